package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
)

func TestMain(m *testing.M) {
	cgrouptest.RunHogIfChild() // the test binary doubles as a memory hog
	if os.Getenv(asEvictdEnv) == "1" {
		// ... and as evictd itself, for tests that signal a real process.
		limitDescriptorsIfAsked()
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestExplainLiveFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"explain", "--live", "--summary", "s.json", "--pods", "p.json"},
		{"explain", "--pods", "p.json"},
		{"explain", "--summary", "s.json", "--workload-root", "/w"},
		{"explain", "--live", "--workloads", "w.yaml"},
		{"explain", "--live", "--workload-root", "/w", "--pods", "p.json"},
		{"explain", "--live"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != cli.ExitError || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: code %d, want one error line; stderr %q", args, code, errb.String())
		}
	}
}

// TestExplainLiveOnRealWorkloads reads real v1 cgroups: two workloads under
// a workload root, one holding a 64 MiB hog. With a memory threshold above
// what the node has free, explain must evict the hog's workload (BestEffort,
// equal priority, largest usage above its zero request) and give the
// kubelet's message with the live observation.
func TestExplainLiveOnRealWorkloads(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	hogDir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, base+"/hungry")
	cgrouptest.Mkdirs(t, cgrouptest.V1Memory, base+"/idle")
	cgrouptest.StartHog(t, 64, hogDir)
	wl := filepath.Join(t.TempDir(), "workloads.yaml")
	if err := os.WriteFile(wl, []byte("workloads:\n- name: idle\n  cgroup: idle\n  priority: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	// 1000Gi is above any machine's memory: the threshold is met for sure.
	args := []string{"explain", "--live", "--eviction-hard", "memory.available<1000Gi",
		"--workload-root", "/" + base, "--workloads", wl, "-o", "json"}
	if code := run(args, &out, &errb); code != cli.ExitOK {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	var rep struct {
		Decision struct {
			NodeConditions []string `json:"nodeConditions"`
			Evictions      []struct {
				Pod struct {
					Name, Namespace string
				} `json:"pod"`
				GracePeriodSeconds int64  `json:"gracePeriodSeconds"`
				Message            string `json:"message"`
			} `json:"evictions"`
		} `json:"decision"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.String(), err)
	}
	d := rep.Decision
	if len(d.Evictions) != 1 {
		t.Fatalf("evictions %+v, want one:\n%s", d.Evictions, out.String())
	}
	e := d.Evictions[0]
	if e.Pod.Name != "hungry" || e.GracePeriodSeconds != 1 {
		t.Errorf("evicted %+v grace %d, want hungry with grace 1", e.Pod, e.GracePeriodSeconds)
	}
	if !strings.HasPrefix(e.Message, "The node was low on resource: memory. Threshold quantity: 1000Gi, available: ") {
		t.Errorf("message %q", e.Message)
	}
	if strings.Join(d.NodeConditions, ",") != "MemoryPressure" {
		t.Errorf("node conditions %v", d.NodeConditions)
	}
}

// TestExplainLiveKubernetesNames: on a kubepods tree (real v1 cgroups), with
// the node's pods from --pods, `explain --live` and `stat --summary` name
// pods and containers as the kubelet's Summary does (the sandbox is no
// container), so the message carries the kubelet's container part.
func TestExplainLiveKubernetesNames(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	const (
		uid   = "5a5a5a5a-1111-2222-3333-444444444444"
		cid   = "abababababababababababababababababababababababababababababababab"
		pause = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
	)
	pods := cgrouptest.UniqueName(t) + "/kubepods"
	cgrouptest.StartHog(t, 32, cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pods+"/besteffort/pod"+uid+"/"+cid))
	cgrouptest.StartHog(t, 1, cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pods+"/besteffort/pod"+uid+"/"+pause))
	podsJSON := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(podsJSON, []byte(`{"kind":"List","apiVersion":"v1","items":[{"metadata":{"name":"web","namespace":"shop","uid":"`+uid+`"},
"spec":{"containers":[{"name":"app","image":"x"}]},
"status":{"phase":"Running","qosClass":"BestEffort","containerStatuses":[{"name":"app","containerID":"containerd://`+cid+`","ready":true,"restartCount":0,"image":"x","imageID":"x"}]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"explain", "--live", "--pods-cgroup", "/" + pods, "--pods", podsJSON, "--eviction-hard", "memory.available<1000Gi", "-o", "json"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("explain: code %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `Container app was using`) || !strings.Contains(out.String(), `"offending_containers": "app"`) {
		t.Errorf("explain lacks the kubelet's container part:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"stat", "--summary", "--pods-cgroup", "/" + pods, "--pods", podsJSON}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("stat: code %d: %s", code, errb.String())
	}
	var s struct {
		Pods []struct {
			PodRef     struct{ Name, Namespace, UID string } `json:"podRef"`
			Containers []struct{ Name string }               `json:"containers"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || s.Pods[0].PodRef.Name != "web" || s.Pods[0].PodRef.Namespace != "shop" ||
		len(s.Pods[0].Containers) != 1 || s.Pods[0].Containers[0].Name != "app" {
		t.Errorf("stat --summary pods %+v, want shop/web with container app only", s.Pods)
	}
}
