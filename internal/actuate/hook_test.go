package actuate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHooks(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	h := &Hooks{BySignal: map[string][]Hook{
		"imagefs.available": {
			{Signal: "imagefs.available", Command: []string{"sh", "-c", "echo pruned; touch " + marker}},
			{Signal: "imagefs.available", Command: []string{"sleep", "5"}, Timeout: 100 * time.Millisecond},
			{Signal: "imagefs.available", Command: []string{"false"}},
		},
	}}
	if !h.Has("imagefs.available") || h.Has("memory.available") {
		t.Fatal("Has is wrong")
	}
	rs := h.Run(context.Background(), "imagefs.available")
	if len(rs) != 3 {
		t.Fatalf("%d results", len(rs))
	}
	if rs[0].Err != nil || rs[0].Output != "pruned" {
		t.Fatalf("first hook: %+v", rs[0])
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("first hook did not run")
	}
	if rs[1].Err == nil || !strings.Contains(rs[1].Err.Error(), "timed out") || rs[1].Elapsed > 3*time.Second {
		t.Fatalf("timeout hook: %+v", rs[1])
	}
	if rs[2].Err == nil {
		t.Fatalf("failing hook reported success")
	}
	if got := h.Run(context.Background(), "memory.available"); len(got) != 0 {
		t.Fatalf("hooks ran for an unconfigured signal: %+v", got)
	}
}

func TestHooksDryRun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	h := &Hooks{DryRun: true, BySignal: map[string][]Hook{"nodefs.available": {{Command: []string{"touch", marker}}}}}
	rs := h.Run(context.Background(), "nodefs.available")
	if len(rs) != 1 || !rs[0].DryRun {
		t.Fatalf("%+v", rs)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("dry run ran the hook")
	}
}
