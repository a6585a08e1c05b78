package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
)

// A mistyped command or flag is one line naming the cause and what it may
// have meant, not the whole help.
func TestTypoIsOneLineWithSuggestion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"exlpain"}, `evictd: unknown command "exlpain"; did you mean explain? (run 'evictd help' for the list)`},
		{[]string{"simulte"}, `did you mean simulate?`},
		{[]string{"help", "lnt"}, `unknown command "lnt"; did you mean lint?`},
		{[]string{"run", "--confg", "x"}, `evictd run: unknown flag: --confg; did you mean --config? (run 'evictd run --help' for the flags)`},
		{[]string{"lint", "--eviction-hrad", "memory.available<1Gi"}, `did you mean --eviction-hard?`},
		{[]string{"explain", "--dedicated"}, `did you mean --dedicated-imagefs?`},
		{[]string{"lint", "-config", "x"}, `unknown shorthand flag: 'c' in -config; long flags take two dashes: did you mean --config?`},
		{[]string{"explain", "--zzzz"}, `evictd explain: unknown flag: --zzzz (run 'evictd explain --help' for the flags)`},
		{[]string{"explain", "--summary"}, `flag needs an argument: --summary`},
		{[]string{"--config", "x"}, `"--config" before a command: the command comes first`},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		msg := errb.String()
		if code != cli.ExitError || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want exit 2 and one line with %q", c.args, code, out.Len(), msg, c.want)
		}
	}
}

// The standard library's spellings of the one-letter flags still work.
func TestOneLetterFlagSpellings(t *testing.T) {
	for _, args := range [][]string{{"-o", "xml"}, {"--o", "xml"}, {"--output", "xml"}, {"-o=xml"}, {"-oxml"}} {
		var out, errb bytes.Buffer
		code := run(append([]string{"lint", "--eviction-hard", "memory.available<1Gi"}, args...), &out, &errb)
		if code != cli.ExitError || errb.String() != "evictd lint: -o \"xml\": want table or json\n" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// completeWords runs "evictd __complete WORDS…" and returns the candidates
// and the directive line.
func completeWords(t *testing.T, words ...string) ([]string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{cobra.ShellCompNoDescRequestCmd}, words...), &out, &errb); code != cli.ExitOK {
		t.Fatalf("__complete %q: exit %d: %s", words, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// The completion protocol the scripts call: commands, flags, flag values,
// files where files go, nothing where nothing fits.
func TestCompleteProtocol(t *testing.T) {
	const files, noFiles = ":0", ":4" // cobra's ShellCompDirective values
	for _, c := range []struct {
		words     []string
		want      []string // all of these among the candidates
		directive string
	}{
		{[]string{"ex"}, []string{"explain"}, noFiles},
		{[]string{""}, []string{"run", "explain", "lint", "completion", "help"}, noFiles},
		{[]string{"run", "--conf"}, []string{"--config"}, noFiles},
		{[]string{"run", "--eviction-h"}, []string{"--eviction-hard"}, noFiles},
		{[]string{"explain", "-o", ""}, []string{"table", "json"}, noFiles},
		{[]string{"explain", "--output="}, []string{"table", "json"}, noFiles},
		{[]string{"demo", "-o", ""}, []string{"text", "json"}, noFiles},
		{[]string{"run", "--psi", ""}, []string{"auto", "on", "off"}, noFiles},
		{[]string{"lint", "--filesystems", ""}, []string{"single", "imagefs", "split"}, noFiles},
		{[]string{"stat", "--log-level", ""}, []string{"debug", "info", "warn", "error"}, noFiles},
		{[]string{"lint", "--log-format", ""}, []string{"text", "json"}, noFiles},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish", "powershell"}, noFiles},
		{[]string{"lint", "--config", ""}, nil, files},
		{[]string{"run", "--interval", ""}, nil, noFiles},
		{[]string{"run", "--node-name", ""}, nil, noFiles},
		{[]string{"explain", ""}, nil, noFiles},
	} {
		got, directive := completeWords(t, c.words...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: candidates %q lack %q", c.words, got, w)
			}
		}
		if directive != c.directive {
			t.Errorf("%q: directive %s, want %s", c.words, directive, c.directive)
		}
	}
}

// Every command's every flag completes: the tree is built from the flags
// each command really parses.
func TestCompleteEveryFlag(t *testing.T) {
	for _, name := range cli.Names() {
		fs := cli.CommandFlags(name)
		if fs == nil {
			t.Errorf("%s: no flag set handed over for completion", name)
			continue
		}
		got, _ := completeWords(t, name, "--")
		fs.VisitAll(func(f *pflag.Flag) {
			if !slices.Contains(got, "--"+f.Name) {
				t.Errorf("%s: --%s not completed (got %q)", name, f.Name, got)
			}
		})
	}
}

// needShell skips a test that needs a shell the unit tier installs
// (scripts/test.sh: bash-completion, zsh, fish), or fails where the real
// tests must run (CI, or EVICTD_REQUIRE_REAL_CGROUP=1).
func needShell(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if ci := os.Getenv("CI"); os.Getenv(cgrouptest.EnvRequireReal) == "1" || (ci != "" && ci != "false") {
		t.Fatalf("the shell completion test must run here (CI or %s=1) but needs %s (scripts/test.sh unit installs it)", cgrouptest.EnvRequireReal, what)
	}
	t.Skipf("needs %s (scripts/test.sh unit installs it)", what)
}

// evictdOnPath puts an "evictd" on a fresh PATH directory that runs this
// test binary as evictd (TestMain), for the completion scripts to call.
func evictdOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" + asEvictdEnv + "=1 exec '" + os.Args[0] + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "evictd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + ":" + os.Getenv("PATH")
}

func shell(t *testing.T, path string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr.String())
	}
	return stdout.String()
}

// The generated scripts complete in the real shells.
func TestCompletionInRealShells(t *testing.T) {
	path := evictdOnPath(t)
	cases := []struct {
		line string // what the user typed before TAB
		want []string
	}{
		{"evictd ex", []string{"explain"}},
		{"evictd run --conf", []string{"--config"}},
		{"evictd explain -o ", []string{"table", "json"}},
		{"evictd run --memcg-notification ", []string{"auto", "on", "off"}},
	}
	t.Run("bash", func(t *testing.T) {
		const bashCompletion = "/usr/share/bash-completion/bash_completion"
		_, err := os.Stat(bashCompletion)
		needShell(t, err == nil, "bash with the bash-completion package")
		for _, c := range cases {
			// What readline does on TAB: COMP_* set, the function
			// "complete -p evictd" names called.
			script := `source ` + bashCompletion + `
source <(evictd completion bash)
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
fn=$(complete -p evictd | sed -E 's/.*-F ([^ ]+).*/\1/')
"$fn" evictd "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
			got := strings.Fields(shell(t, path, "bash", "-c", script, "bash", c.line))
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("bash %q<TAB>: %q, want %q among them", c.line, got, w)
				}
			}
		}
	})
	t.Run("fish", func(t *testing.T) {
		_, err := exec.LookPath("fish")
		needShell(t, err == nil, "fish")
		for _, c := range cases {
			out := shell(t, path, "fish", "--no-config", "-c", "evictd completion fish | source; complete -C $argv[1]", c.line)
			var got []string
			for _, l := range strings.Split(out, "\n") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("fish %q<TAB>: %q, want %q among them", c.line, got, w)
				}
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		// zsh completes only inside its line editor; this checks the
		// script parses and registers _evictd for evictd.
		_, err := exec.LookPath("zsh")
		needShell(t, err == nil, "zsh")
		out := shell(t, path, "zsh", "-f", "-c", `autoload -U compinit && compinit -u -D && source <(evictd completion zsh) && print -r -- $_comps[evictd] && whence -w _evictd`)
		if !strings.Contains(out, "_evictd\n") || !strings.Contains(out, "_evictd: function") {
			t.Errorf("zsh: _evictd not registered for evictd:\n%s", out)
		}
	})
}
