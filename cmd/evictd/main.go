// Command evictd is a node-pressure eviction agent that decides exactly as the
// kubelet v1.37 eviction manager does, reacts to kernel wake-ups, and explains
// every decision.
//
// Each subcommand lives in its own file and registers itself in init, so that
// commands can be added without touching this file.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Exit codes shared by every subcommand.
const (
	exitOK       = 0 // success (lint: no findings)
	exitFindings = 1 // lint: warnings only
	exitError    = 2 // bad input, bad flags, or an operation that failed
)

// command is one evictd subcommand.
type command struct {
	name    string
	summary string // one line for the top-level help
	// run parses args (everything after the subcommand name) and runs.
	// It returns the process exit code; errors it prints itself.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; called from init in each command's file.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("evictd: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	if filepath.Base(os.Args[0]) == kubectlPluginName {
		// Installed as the kubectl plugin: "kubectl evictd ..." runs
		// explain --cluster (explain_cluster.go).
		os.Exit(runKubectlPlugin(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitError
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run([]string{"--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "evictd: unknown command %q (run 'evictd help' for the list)\n", args[0])
		return exitError
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "evictd — node-pressure eviction with kubelet v1.37 parity, kernel wake-ups and explanations.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: evictd <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'evictd <command> --help' for a command's flags.")
}

// newFlagSet returns a FlagSet for a subcommand whose --help prints the
// description, a usage line and the flags to stdout.
func newFlagSet(name, usageLine, description string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("evictd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: evictd %s %s\n\n", name, usageLine)
		if description != "" {
			fmt.Fprintln(w, strings.TrimSpace(description))
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Flags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs. It returns done=true with the exit code when
// the command must stop: --help (exit 0, help on stdout) or a flag error
// (exit 2, the error and usage on stderr).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	// The flag package prints the usage itself on -h and on an error; keep
	// it quiet while parsing and print it once, where it belongs: --help to
	// stdout only, the usage after an error to stderr.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return true, exitOK
	}
	if err != nil {
		fs.Usage()
		return true, exitError
	}
	return false, exitOK
}
