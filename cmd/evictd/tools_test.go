package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

// TestToolsCommandsNameEvictdTools: the commands that moved to evictd-tools
// answer in the agent with one line naming the evictd-tools command, exit 2,
// not "unknown command" (and simulate without --plot still runs here).
func TestToolsCommandsNameEvictdTools(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "decisions.jsonl"}, "run 'evictd-tools report "},
		{[]string{"help", "report"}, "run 'evictd-tools report "},
		{[]string{"simulate", "--scenario", "../../testdata/scenarios/min-reclaim.yaml", "--plot", "out.svg"}, "run 'evictd-tools simulate --scenario ../../testdata/scenarios/min-reclaim.yaml --plot out.svg'"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		msg := errb.String()
		if code != cli.ExitError || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", c.args, code, out.String(), msg, cli.ExitError, c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/min-reclaim.yaml"}, &out, &errb); code != cli.ExitOK || !strings.Contains(out.String(), "EVICTED") {
		t.Errorf("simulate without --plot: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
