package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/protect"
	"github.com/evictd/evictd/internal/workload"
)

// TestQoSLive on real v1 cgroups: before evictd keeps the values, --live
// flags the raised ones as differences; after one Apply with the same
// settings, `evictd run` would use, they agree.
func TestQoSLive(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	name := cgrouptest.UniqueName(t)
	root := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, name)
	for _, c := range []string{"web", "batch"} {
		dir := cgrouptest.Mkdirs(t, root, c)
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := host.WriteOOMScoreAdj("/proc", cmd.Process.Pid, 0); err != nil {
			t.Fatal(err)
		}
		if err := cgroup.WriteCgroupProcs(dir, cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	wlPath := filepath.Join(t.TempDir(), "workloads.yaml")
	if err := os.WriteFile(wlPath, []byte("workloads:\n- name: web\n  cgroup: web\n  requests: {memory: 1Mi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := func() string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run([]string{"qos", "--live", "--workload-root", "/" + name, "--workloads", wlPath}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		return out.String()
	}
	row := func(out, workload string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, workload+" ") {
				return l
			}
		}
		t.Fatalf("no %s row in:\n%s", workload, out)
		return ""
	}
	before := live()
	if !strings.HasSuffix(strings.TrimSpace(row(before, "batch")), "!=") || !strings.Contains(before, "2 difference(s)") {
		t.Fatalf("before evictd keeps them, want both workloads flagged:\n%s", before)
	}

	kc, err := kubeletconfig.Read(kubeletconfig.Source{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := hostQoSSettings(kc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := workload.ReadFile(wlPath)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workload.Discover(f, root, "")
	if err != nil {
		t.Fatal(err)
	}
	s.CgroupV2 = false
	p, err := protect.New(protect.Config{Settings: s, Root: root, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(ws)
	after := live()
	for _, w := range []string{"web", "batch"} {
		if l := row(after, w); strings.HasSuffix(strings.TrimSpace(l), "!=") {
			t.Errorf("after Apply, %s still differs: %s", w, l)
		}
	}
	if !strings.Contains(after, "Everything is as evictd run keeps it.") {
		t.Errorf("after Apply:\n%s", after)
	}
}
