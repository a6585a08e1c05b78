package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/collect"
)

func TestStatHelpAndBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"stat", "--help"}, &out, &errb); code != cli.ExitOK || !strings.Contains(out.String(), "Examples:") {
		t.Errorf("--help: code %d, out %q", code, out.String())
	}
	for _, args := range [][]string{{"stat", "-o", "yaml"}, {"stat", "--pod", "x", "--cgroup", "/y"}, {"stat", "extra"}} {
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != cli.ExitError || errb.Len() == 0 {
			t.Errorf("%v: code %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestStatOnRealKubepodsTree runs `evictd stat` on a kubepods-shaped v1 tree
// holding a running process, in all three output modes. (v1 charges a moved
// process's earlier memory to its old cgroup, so usage is not checked here;
// internal/collect checks the numbers against hogs.)
func TestStatOnRealKubepodsTree(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	const uid = "6f3c1a2b-1111-4c2d-9e8f-0123456789ab"
	ctr := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, base+"/kubepods/burstable/pod"+uid+"/abc123")
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	if err := cgroup.WriteCgroupProcs(ctr, sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	pods := "--pods-cgroup=/" + base + "/kubepods"

	var out, errb bytes.Buffer
	if code := run([]string{"stat", pods}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("table: code %d: %s", code, errb.String())
	}
	for _, want := range []string{uid, "abc123", "WORKING SET", "total_inactive_file"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := run([]string{"stat", pods, "--pod", uid, "-o", "json"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("json: code %d: %s", code, errb.String())
	}
	var stats []collect.CgroupStat
	if err := json.Unmarshal(out.Bytes(), &stats); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if len(stats) != 1 || stats[0].PodUID != uid || len(stats[0].Containers) != 1 || stats[0].Containers[0].ContainerID != "abc123" {
		t.Errorf("json stats %+v", stats)
	}

	out.Reset()
	if code := run([]string{"stat", "--summary", pods, "--kubelet-root", t.TempDir()}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("summary: code %d: %s", code, errb.String())
	}
	var s statsapi.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if len(s.Pods) != 1 || s.Pods[0].PodRef.UID != uid || *s.Pods[0].ProcessStats.ProcessCount != 1 ||
		s.Node.Memory == nil || s.Node.Memory.AvailableBytes == nil || len(s.Node.SystemContainers) != 1 {
		t.Errorf("summary %s", out.String())
	}
}
