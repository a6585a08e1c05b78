// Command evictd-tools holds evictd's offline commands, the ones that draw:
// report (a decision log as one HTML page) and simulate with --plot (a
// scenario's timeline as SVG or PNG). They live apart from the agent binary
// evictd, which a node runs, so that the agent links neither html/template
// nor the plotting stack (cmd/evictd's depaware test keeps it so).
// evictd-tools runs on a workstation; nothing here needs root or a node.
package main

import (
	"io"
	"os"

	"github.com/evictd/evictd/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args (without the program name).
func run(args []string, stdout, stderr io.Writer) int {
	cli.Name = "evictd-tools"
	cli.Tagline = "evictd-tools — evictd's offline commands that draw: the HTML report of a decision log, simulate --plot."
	return cli.Run(args, stdout, stderr)
}
