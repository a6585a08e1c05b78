package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

func TestSelftestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"selftest", "--rates", "100Mi,fast"}, `--rates: "fast" is not a positive quantity per second`},
		{[]string{"selftest", "--rates", "0"}, `--rates: "0" is not a positive quantity per second`},
		{[]string{"selftest", "--trials", "0"}, "--trials 0: want at least 1"},
		{[]string{"selftest", "--max-psi", "0"}, "--max-psi 0: want a percentage above 0"},
		{[]string{"selftest", "--eviction-hard", "memory.available<lots"}, "memory.available"},
		{[]string{"selftest", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %d and %q", c.args, code, errb.String(), cli.ExitError, c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"selftest", "--help"}, &out, &errb); code != cli.ExitOK || !strings.Contains(out.String(), "10% of MemAvailable, at most 1Gi") {
		t.Errorf("--help: exit %d, %q", code, out.String())
	}
}
