package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Shell completion comes from spf13/cobra (already linked through
// k8s.io/component-base, and what kubectl's completion is built on): its
// scripts call "evictd __complete WORDS…", and cobra answers from a command
// tree built here with every command's real flags. Commands keep parsing
// their own flags (parseFlags); the tree exists only for completion.

const (
	completeCmd       = cobra.ShellCompRequestCmd       // "__complete"
	completeNoDescCmd = cobra.ShellCompNoDescRequestCmd // "__completeNoDesc"
)

// completionShells are the shells "evictd completion" writes a script for.
var completionShells = []string{"bash", "zsh", "fish", "powershell"}

// flagChoices are the values a flag takes, offered on completion; string
// flags not named here complete file names (most are files), except those
// in notFileFlags. A "command/flag" key overrides the flag's entry for one
// command.
var flagChoices = map[string][]string{
	"output":             {"table", "json"},
	"demo/output":        {"text", "json"},
	"log-format":         {"text", "json"},
	"log-level":          {"debug", "info", "warn", "error"},
	"memcg-notification": {"auto", "on", "off"},
	"psi":                {"auto", "on", "off"},
	"memory-events":      {"auto", "on", "off"},
	"fast-poll":          {"auto", "on", "off"},
	"realtime-wakeups":   {"auto", "on", "off"},
	"filesystems":        {"single", "imagefs", "split"},
	"cgroup-version":     {"1", "2"},
}

// notFileFlags are the string flags whose values are not files: no file
// names offered for them.
var notFileFlags = map[string]bool{
	"node-name": true, "namespace": true, "image": true, "metrics-addr": true,
	"kubelet-summary": true, "rates": true, "pod": true,
}

// fileArgs are the commands whose positional arguments are files.
var fileArgs = map[string]bool{"report": true}

// flagCapture is the stdout that makes a command's parseFlags hand over its
// FlagSet instead of parsing: the only way to learn a command's flags, since
// each command defines them as it runs.
type flagCapture struct{ fs *pflag.FlagSet }

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// CommandFlags is the FlagSet command name defines, or nil.
func CommandFlags(name string) *pflag.FlagSet {
	fc := &flagCapture{}
	commands[name].Run(nil, fc, io.Discard)
	return fc.fs
}

// completionTree is evictd's commands as a cobra tree, with each command's
// flags and the values they complete to.
func completionTree(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:               Name,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, name := range Names() {
		sub := &cobra.Command{Use: name, Short: commands[name].Summary, Run: func(*cobra.Command, []string) {}}
		switch {
		case name == "completion":
			sub.ValidArgs = completionShells
		case !fileArgs[name]:
			sub.ValidArgsFunction = cobra.NoFileCompletions
		}
		if fs := CommandFlags(name); fs != nil {
			sub.Flags().AddFlagSet(fs)
			sub.Flags().SetNormalizeFunc(longShorthands)
			fs.VisitAll(func(f *pflag.Flag) { completeFlagValue(sub, name, f) })
		}
		root.AddCommand(sub)
	}
	return root
}

// completeFlagValue registers what flag f of command name completes to.
func completeFlagValue(sub *cobra.Command, name string, f *pflag.Flag) {
	choices, ok := flagChoices[name+"/"+f.Name]
	if !ok {
		choices, ok = flagChoices[f.Name]
	}
	if name == "report" && f.Name == "output" {
		ok = false // report's -o is the page's file
	}
	var fn cobra.CompletionFunc
	switch {
	case ok:
		fn = cobra.FixedCompletions(choices, cobra.ShellCompDirectiveNoFileComp)
	case f.Value.Type() == "string" && !notFileFlags[f.Name]:
		return // file names: cobra's default
	default:
		fn = cobra.NoFileCompletions
	}
	// Cannot fail: the flag is in sub's set and registered once.
	_ = sub.RegisterFlagCompletionFunc(f.Name, fn)
}

// complete answers a completion script's "evictd __complete WORDS…".
func complete(args []string, stdout, stderr io.Writer) int {
	root := completionTree(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", Name, args[0], err)
		return ExitError
	}
	return ExitOK
}

func init() {
	Register(Command{
		Name:    "completion",
		Summary: "print the shell completion script for bash, zsh, fish or powershell",
		Run:     runCompletion,
	})
}

const completionHelp = `
Prints a script that completes evictd's commands, flags and flag values
(output formats, log levels, file names) in the shell. Load it in the
current shell, or install it for every new one:

  bash (needs the bash-completion package):
    source <(evictd completion bash)
    evictd completion bash > /etc/bash_completion.d/evictd
  zsh:
    source <(evictd completion zsh)
    evictd completion zsh > "${fpath[1]}/_evictd"
  fish:
    evictd completion fish | source
    evictd completion fish > ~/.config/fish/completions/evictd.fish
  powershell:
    evictd completion powershell | Out-String | Invoke-Expression

--no-descriptions leaves out the one-line description of each command and
flag.
`

func runCompletion(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("completion", "bash|zsh|fish|powershell [--no-descriptions]", strings.ReplaceAll(completionHelp, "evictd", Name), stdout, stderr)
	noDesc := fs.Bool("no-descriptions", false, "leave out the descriptions of commands and flags")
	if done, code := ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, Name+" completion: "+format+"\n", a...)
		return ExitError
	}
	if fs.NArg() != 1 {
		return fail("want one shell: bash, zsh, fish or powershell")
	}
	root := completionTree(stdout, stderr)
	var err error
	switch shell := fs.Arg(0); shell {
	case "bash":
		err = root.GenBashCompletionV2(stdout, !*noDesc)
	case "zsh":
		if *noDesc {
			err = root.GenZshCompletionNoDesc(stdout)
		} else {
			err = root.GenZshCompletion(stdout)
		}
	case "fish":
		err = root.GenFishCompletion(stdout, !*noDesc)
	case "powershell":
		if *noDesc {
			err = root.GenPowerShellCompletion(stdout)
		} else {
			err = root.GenPowerShellCompletionWithDesc(stdout)
		}
	default:
		return fail("unknown shell %q%s: want bash, zsh, fish or powershell", shell, DidYouMean(shell, completionShells, ""))
	}
	if err != nil {
		return fail("%v", err)
	}
	return ExitOK
}
