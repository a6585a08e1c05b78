package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A SIGHUP logs one line saying what was reloaded and what is not, and a
// line for each reload that failed; a failed reload does not stop the
// others.
func TestReloaderLogsWhatItReloaded(t *testing.T) {
	var buf bytes.Buffer
	r := NewReloader(slog.New(slog.NewTextHandler(&buf, nil)))
	if r.Reload() != 0 || !strings.Contains(buf.String(), `msg="SIGHUP handled" reloaded="nothing`) || !strings.Contains(buf.String(), "not_reloaded=") {
		t.Fatalf("no reload registered:\n%s", buf.String())
	}
	buf.Reset()
	ran := 0
	r.Add("bad file", func() error { return errors.New("line 3: broken") })
	r.Add("decision log", func() error { ran++; return nil })
	if got := r.Reload(); got != 1 || ran != 1 {
		t.Fatalf("Reload = %d failed, good reload ran %d times; want 1 and 1", got, ran)
	}
	out := buf.String()
	for _, want := range []string{`what="bad file" err="line 3: broken"`, `reloaded="decision log" failed="bad file"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 2 {
		t.Errorf("%d lines, want 2 (the failure, the summary):\n%s", n, out)
	}
}
