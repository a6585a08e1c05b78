// Command evictd is a node-pressure eviction agent that decides exactly as the
// kubelet v1.37 eviction manager does, reacts to kernel wake-ups, and explains
// every decision.
//
// It is the agent binary: what a node runs and needs (run, explain, lint,
// qos, stat, selftest, demo, simulate). The offline tools that draw — the
// HTML report and simulate --plot — are cmd/evictd-tools, so that the agent
// links neither html/template nor the plotting stack; depaware_test.go keeps
// its dependency list. Each subcommand lives in its own file and registers
// itself in init (internal/cli), so that commands can be added without
// touching this file.
package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/evictd/evictd/internal/cli"
)

func main() {
	if filepath.Base(os.Args[0]) == kubectlPluginName {
		// Installed as the kubectl plugin: "kubectl evictd ..." runs
		// explain --cluster (explain_cluster.go).
		os.Exit(runKubectlPlugin(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args (without the program name).
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(args, stdout, stderr)
}
