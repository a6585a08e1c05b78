// Command evictd is a node-pressure eviction agent that decides exactly as the
// kubelet v1.37 eviction manager does, reacts to kernel wake-ups, and explains
// every decision.
//
// Each subcommand lives in its own file and registers itself in init, so that
// commands can be added without touching this file.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/suggest"
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
			c, ok := commands[args[1]]
			if !ok {
				return unknownCommand(args[1], stderr)
			}
			return c.run([]string{"--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "--version":
		if c, ok := commands["version"]; ok {
			return c.run(args[1:], stdout, stderr)
		}
	case completeCmd, completeNoDescCmd:
		return complete(args, stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		return unknownCommand(args[0], stderr)
	}
	return c.run(args[1:], stdout, stderr)
}

// unknownCommand reports a command that does not exist in one line, with
// the commands it may be a typo of.
func unknownCommand(name string, stderr io.Writer) int {
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "evictd: %q before a command: the command comes first, evictd COMMAND [flags] (run 'evictd help' for the list)\n", name)
		return exitError
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	fmt.Fprintf(stderr, "evictd: unknown command %q%s (run 'evictd help' for the list)\n", name, didYouMean(name, names, ""))
	return exitError
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
// description, a usage line and the flags to stdout. Flags are GNU-style
// (spf13/pflag, as kubectl and the kubelet): --name VALUE or --name=VALUE,
// single-letter shorthands such as -o, flags and arguments in any order.
func newFlagSet(name, usageLine, description string, stdout, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("evictd "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false // the order each command defines, most important first
	fs.SetNormalizeFunc(longShorthands)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: evictd %s %s\n\n", name, usageLine)
		if description != "" {
			fmt.Fprintln(w, strings.TrimSpace(description))
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Flags:")
		writeFlagUsages(w, fs)
	}
	return fs
}

// helpWidth is where flag descriptions wrap in help: a terminal's 80
// columns.
const helpWidth = 80

// writeFlagUsages prints each flag on a line of its own, its description
// wrapped and indented below it: evictd's flag names and descriptions are
// long, and pflag's one-line-per-flag table ran past 200 columns.
func writeFlagUsages(w io.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		line := "      --" + f.Name
		if f.Shorthand != "" {
			line = "  -" + f.Shorthand + ", --" + f.Name
		}
		if name != "" && f.Value.Type() != "bool" {
			line += " " + name
		}
		if !zeroDefault(f) {
			if f.Value.Type() == "string" {
				usage += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, wrap(usage, helpWidth-8, "        "))
	})
}

// zeroDefault reports a flag whose default is its type's zero value, which
// help does not show.
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]", "<nil>":
		return true
	}
	return false
}

// longShorthands keeps the spellings of the standard library's flag
// package, which took every flag with one dash or two, working for the
// one-letter flags that are now shorthands of long ones: --o is --output,
// --v is --verbose.
func longShorthands(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "o":
		return "output"
	case "v":
		return "verbose"
	}
	return pflag.NormalizedName(name)
}

// parseFlags parses args with fs. It returns done=true with the exit code when
// the command must stop: --help (exit 0, help on stdout) or a flag error
// (exit 2, one line on stderr). It adds --log-level and --log-format after
// the command's flags and routes klog to the logger they make. Called with a
// *flagCapture as stdout (shell completion), it hands over fs without
// parsing.
func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	// pflag prints the usage itself on -h; keep it quiet while parsing and
	// print it where it belongs: --help to stdout.
	addLogFlags(fs)
	if fc, ok := stdout.(*flagCapture); ok {
		fc.fs = fs
		return true, exitOK
	}
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, pflag.ErrHelp) {
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return true, exitOK
	}
	if err != nil {
		// One line, not the whole help: the cause must not scroll away.
		fmt.Fprintf(fs.Output(), "%s: %s (run '%s --help' for the flags)\n", fs.Name(), flagError(fs, err), fs.Name())
		return true, exitError
	}
	routeKlog(commandLogger(fs))
	return false, exitOK
}

// flagError is a flag parsing error with the flags a mistyped name may
// have meant.
func flagError(fs *pflag.FlagSet, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if short := ne.GetSpecifiedShortnames(); short != "" {
		// -config: a long flag with one dash, as the standard library's
		// flag package took it.
		long, _, _ := strings.Cut(short, "=")
		if f := fs.Lookup(long); f != nil && !f.Hidden {
			return fmt.Sprintf("%v; long flags take two dashes: did you mean --%s?", err, long)
		}
		return err.Error() + didYouMean(long, names, "--")
	}
	return err.Error() + didYouMean(ne.GetSpecifiedName(), names, "--")
}

// didYouMean is "; did you mean X?" for the candidates a typo may be of
// (suggest.Near), each with prefix, or "" when there are none.
func didYouMean(typed string, candidates []string, prefix string) string {
	near := suggest.Near(typed, candidates)
	if len(near) == 0 {
		return ""
	}
	for i := range near {
		near[i] = prefix + near[i]
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}
