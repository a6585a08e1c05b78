package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

// lint --kubelet-config: evictd's thresholds against the kubelet's own file,
// which is read leniently (a field evictd does not know is no error).
func TestLintKubeletCoexistence(t *testing.T) {
	kp := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(kp, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nnewerField: 1\nevictionHard: {memory.available: 300Mi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"lint", "--eviction-hard", "memory.available<200Mi", "--kubelet-config", kp}, &out, &errb)
	if code != 1 || strings.Count(out.String(), "(coexistence-kubelet-first)") != 2 {
		t.Errorf("exit %d, want 1 and two coexistence findings:\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	code = run([]string{"lint", "--eviction-hard", "memory.available<300Mi", "--kubelet-config", kp}, &out, &errb)
	if strings.Contains(out.String(), "coexistence") {
		t.Errorf("exit %d, coexistence finding for equal thresholds:\n%s", code, out.String())
	}
	code = run([]string{"lint", "--eviction-hard", "memory.available<300Mi", "--kubelet-config", filepath.Join(t.TempDir(), "none.yaml")}, &out, &errb)
	if code != cli.ExitError || !strings.Contains(errb.String(), "--kubelet-config") {
		t.Errorf("missing kubelet config: exit %d, stderr %q", code, errb.String())
	}
}
