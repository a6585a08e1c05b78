package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/evictd/evictd/internal/cli"
)

// TestCompleteFiles: evictd-tools completes its commands, and file names
// where files go (report's log and page, simulate's picture).
func TestCompleteFiles(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string // a candidate, or "" for none
	}{
		{[]string{""}, "report"},
		{[]string{""}, "simulate"},
		{[]string{"report", ""}, ""},
		{[]string{"report", "-o", ""}, ""},
		{[]string{"simulate", "--plot", ""}, ""},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{cobra.ShellCompNoDescRequestCmd}, c.words...), &out, &errb)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		directive := lines[len(lines)-1]
		if code != cli.ExitOK || c.want != "" && !strings.Contains(out.String(), c.want+"\n") || c.want == "" && directive != ":0" {
			t.Errorf("%q: exit %d, candidates %q, stderr %q", c.words, code, lines, errb.String())
		}
	}
}

// Every command of evictd-tools has its help on stdout only, with the log
// flags every command takes, and a usage line naming evictd-tools.
func TestHelpOfEveryCommand(t *testing.T) {
	for _, name := range cli.Names() {
		var out, errb bytes.Buffer
		code := run([]string{name, "--help"}, &out, &errb)
		help := out.String()
		if code != cli.ExitOK || errb.Len() != 0 || !strings.HasPrefix(help, "Usage: evictd-tools "+name) || !strings.Contains(help, "--log-level level") {
			t.Errorf("%s --help: exit %d, stderr %q, help %.80q", name, code, errb.String(), help)
		}
	}
}
