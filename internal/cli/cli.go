// Package cli is the command line both evictd binaries share: the agent
// (cmd/evictd) and the offline tools (cmd/evictd-tools). It holds the
// command registry and dispatch, GNU-style flag sets and their help, the
// log flags every command takes, shell completion, the version command, and
// the one command both binaries carry, simulate (its --plot drawn by the
// tools binary only: the agent links no plotting stack).
//
// Each command lives in a file of its own in its binary's package and
// registers itself in init, so that commands can be added without touching
// the dispatcher.
package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/suggest"
)

// Name is the binary's name, as help and messages spell it: "evictd", or
// "evictd-tools" (set by its main before Run).
var Name = "evictd"

// Tagline is the first line of the binary's help.
var Tagline = "evictd — node-pressure eviction with kubelet v1.37 parity, kernel wake-ups and explanations."

// Exit codes shared by every subcommand.
const (
	ExitOK       = 0 // success (lint: no findings)
	ExitFindings = 1 // lint: warnings only
	ExitError    = 2 // bad input, bad flags, or an operation that failed
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for the top-level help
	// Run parses args (everything after the subcommand name) and runs.
	// It returns the process exit code; errors it prints itself.
	Run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]Command{}

// Register adds a subcommand; called from init in each command's file.
func Register(c Command) {
	if _, dup := commands[c.Name]; dup {
		panic(Name + ": command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// movedCommand is a command of another binary, by the name it had here.
type movedCommand struct {
	to  string // the command to run instead, e.g. "evictd-tools report"
	why string // one line: why it is not in this binary
}

var moved = map[string]movedCommand{}

// Moved records that command name lives in another binary now: Run answers
// it (and its help) with one line naming the command to run instead and
// why, exit 2, rather than "unknown command"; the help lists it apart.
func Moved(name, to, why string) {
	moved[name] = movedCommand{to: to, why: why}
}

// Lookup is the registered command name, if there is one.
func Lookup(name string) (Command, bool) {
	c, ok := commands[name]
	return c, ok
}

// Names are the registered commands' names, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(commands))
}

// Run runs the command args name (args[0]) with the rest of args, or the
// help, the version or shell completion, and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitError
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				return notHere(args[1], stderr)
			}
			return c.Run([]string{"--help"}, stdout, stderr)
		}
		usage(stdout)
		return ExitOK
	case "--version":
		if c, ok := commands["version"]; ok {
			return c.Run(args[1:], stdout, stderr)
		}
	case completeCmd, completeNoDescCmd:
		return complete(args, stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		return notHere(args[0], stderr)
	}
	return c.Run(args[1:], stdout, stderr)
}

// notHere answers a command this binary does not have: one that moved to
// another binary, or one that does not exist.
func notHere(name string, stderr io.Writer) int {
	if m, ok := moved[name]; ok {
		fmt.Fprintf(stderr, "%s %s: %s: run '%s'\n", Name, name, m.why, m.to)
		return ExitError
	}
	return unknownCommand(name, stderr)
}

// unknownCommand reports a command that does not exist in one line, with
// the commands it may be a typo of.
func unknownCommand(name string, stderr io.Writer) int {
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "%[1]s: %[2]q before a command: the command comes first, %[1]s COMMAND [flags] (run '%[1]s help' for the list)\n", Name, name)
		return ExitError
	}
	fmt.Fprintf(stderr, "%[1]s: unknown command %[2]q%[3]s (run '%[1]s help' for the list)\n", Name, name, DidYouMean(name, Names(), ""))
	return ExitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, Tagline)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Usage: %s <command> [flags]\n", Name)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, n := range Names() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	if len(moved) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Moved to another binary:")
		for _, n := range slices.Sorted(maps.Keys(moved)) {
			fmt.Fprintf(w, "  %-10s run '%s'\n", n, moved[n].to)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Run '%s <command> --help' for a command's flags.\n", Name)
}

// newFlagSet returns a FlagSet for a subcommand whose --help prints the
// description, a usage line and the flags to stdout. Flags are GNU-style
// (spf13/pflag, as kubectl and the kubelet): --name VALUE or --name=VALUE,
// single-letter shorthands such as -o, flags and arguments in any order.
func NewFlagSet(name, usageLine, description string, stdout, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(Name+" "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false // the order each command defines, most important first
	fs.SetNormalizeFunc(longShorthands)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s %s %s\n\n", Name, name, usageLine)
		if description != "" {
			fmt.Fprintln(w, strings.TrimSpace(description))
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Flags:")
		WriteFlagUsages(w, fs)
	}
	return fs
}

// helpWidth is where flag descriptions wrap in help: a terminal's 80
// columns.
const helpWidth = 80

// WriteFlagUsages prints each flag on a line of its own, its description
// wrapped and indented below it: evictd's flag names and descriptions are
// long, and pflag's one-line-per-flag table ran past 200 columns.
func WriteFlagUsages(w io.Writer, fs *pflag.FlagSet) {
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
		fmt.Fprintf(w, "%s\n        %s\n", line, Wrap(usage, helpWidth-8, "        "))
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
func ParseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	// pflag prints the usage itself on -h; keep it quiet while parsing and
	// print it where it belongs: --help to stdout.
	addLogFlags(fs)
	if fc, ok := stdout.(*flagCapture); ok {
		fc.fs = fs
		return true, ExitOK
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
		return true, ExitOK
	}
	if err != nil {
		// One line, not the whole help: the cause must not scroll away.
		fmt.Fprintf(fs.Output(), "%s: %s (run '%s --help' for the flags)\n", fs.Name(), flagError(fs, err), fs.Name())
		return true, ExitError
	}
	RouteKlog(CommandLogger(fs))
	return false, ExitOK
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
		return err.Error() + DidYouMean(long, names, "--")
	}
	return err.Error() + DidYouMean(ne.GetSpecifiedName(), names, "--")
}

// didYouMean is "; did you mean X?" for the candidates a typo may be of
// (suggest.Near), each with prefix, or "" when there are none.
func DidYouMean(typed string, candidates []string, prefix string) string {
	near := suggest.Near(typed, candidates)
	if len(near) == 0 {
		return ""
	}
	for i := range near {
		near[i] = prefix + near[i]
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}
