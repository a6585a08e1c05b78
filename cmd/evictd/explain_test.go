package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

// Inputs for explain: a node at 1500Mi available against a 2Gi hard
// threshold, one pod above its request and one below (the kubelet's
// TestMemoryPressure_VerifyPodStatus, in our own words).
const (
	explainConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  memory.available: 2Gi
`
	explainSummary = `{"node":{"nodeName":"node-1","memory":{"time":"2026-01-01T00:00:00Z","availableBytes":1572864000,"workingSetBytes":7017070592}},
"pods":[
 {"podRef":{"name":"below","namespace":"default","uid":"u-below"},"memory":{"workingSetBytes":943718400},
  "containers":[{"name":"below","memory":{"workingSetBytes":943718400}}]},
 {"podRef":{"name":"above","namespace":"default","uid":"u-above"},"memory":{"workingSetBytes":734003200},
  "containers":[{"name":"above","memory":{"workingSetBytes":734003200}}]}]}`
	explainPods = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"below","namespace":"default","uid":"u-below"},
  "spec":{"containers":[{"name":"below","resources":{"requests":{"memory":"1Gi"}}}]}},
 {"metadata":{"name":"above","namespace":"default","uid":"u-above"},
  "spec":{"containers":[{"name":"above","resources":{"requests":{"memory":"100Mi"}}}]}}]}`
)

func writeInputs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCmd(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestExplain(t *testing.T) {
	dir := writeInputs(t, map[string]string{"kc.yaml": explainConfig, "summary.json": explainSummary, "pods.json": explainPods})
	args := []string{"explain", "--config", filepath.Join(dir, "kc.yaml"), "--summary", filepath.Join(dir, "summary.json"), "--pods", filepath.Join(dir, "pods.json")}

	out, errOut, code := runCmd(args...)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"memory.available<2Gi", "1500Mi", "Node conditions: MemoryPressure",
		"1  default/above", "Evicted: default/above, grace period 1s",
		"Threshold quantity: 2Gi, available: 1500Mi. Container above was using 700Mi, request is 100Mi",
		// What evictd adds before the kubelet's eviction (offline: both
		// cgroup versions).
		"evictd run: first stops its memory growth (before SIGTERM and any API call), with memory.high on cgroup v2, memory.limit_in_bytes+oom_kill_disable on v1",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns wide (max 100): %q", i+1, n, line)
		}
	}

	out, errOut, code = runCmd(append(args, "-o", "json")...)
	if code != cli.ExitOK {
		t.Fatalf("json: exit %d: %s", code, errOut)
	}
	var rep struct {
		Decision struct {
			Evictions []struct {
				Pod                struct{ Name string }
				GracePeriodSeconds int64
				Message            string
				Condition          *struct{ Type, Reason string }
			}
			NodeConditions []string
		}
		GrowthStops []struct {
			Pod                          struct{ Name string }
			Resource, CgroupV1, CgroupV2 string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	ev := rep.Decision.Evictions
	if len(ev) != 1 || ev[0].Pod.Name != "above" || ev[0].GracePeriodSeconds != 1 || ev[0].Condition == nil || ev[0].Condition.Type != "DisruptionTarget" {
		t.Errorf("json decision: %+v", rep.Decision)
	}
	if g := rep.GrowthStops; len(g) != 1 || g[0].Pod.Name != "above" || g[0].Resource != "memory" ||
		g[0].CgroupV2 != "memory.high" || g[0].CgroupV1 != "memory.limit_in_bytes+oom_kill_disable" {
		t.Errorf("json growth stops: %+v", g)
	}

	// The kubelet's flags work without a config file and win over it.
	out, _, code = runCmd("explain", "--eviction-hard", "memory.available<1Gi", "--summary", filepath.Join(dir, "summary.json"), "--pods", filepath.Join(dir, "pods.json"))
	if code != cli.ExitOK || !strings.Contains(out, "Evicted: none") {
		t.Errorf("--eviction-hard memory.available<1Gi with 1500Mi available must evict nothing (exit %d):\n%s", code, out)
	}
}

// A kubelet config with an unknown field or a duplicate key is read as the
// kubelet reads it: a warning naming file and field, and the decision.
func TestExplainLenientKubeletConfig(t *testing.T) {
	dir := writeInputs(t, map[string]string{
		"summary.json": explainSummary, "pods.json": explainPods,
		"typo.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHrad: {}\n" +
			"evictionHard: {memory.available: 1Gi}\nevictionHard: {memory.available: 2Gi}\n",
	})
	p := func(n string) string { return filepath.Join(dir, n) }
	out, errOut, code := runCmd("explain", "--config", p("typo.yaml"), "--summary", p("summary.json"), "--pods", p("pods.json"))
	if code != cli.ExitOK || !strings.Contains(out, "memory.available<2Gi") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the decision with the last evictionHard", code, out, errOut)
	}
	for _, w := range []string{"typo.yaml: evictionHrad: unknown field", `typo.yaml: evictionHard: "evictionHard": duplicate key (lines 4 and 5)`} {
		if !strings.Contains(errOut, "warning: "+p(w)) {
			t.Errorf("stderr lacks the warning %q:\n%s", w, errOut)
		}
	}
}

func TestExplainBadInput(t *testing.T) {
	dir := writeInputs(t, map[string]string{
		"kc.yaml": explainConfig, "summary.json": explainSummary, "pods.json": explainPods,
		"badkc.yaml":   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: -1Gi\n",
		"typo.yaml":    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHrad: {}\n",
		"badpods.json": `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"x"},"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"lots"}}}]}}]}`,
	})
	p := func(n string) string { return filepath.Join(dir, n) }
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"negative threshold", []string{"--config", p("badkc.yaml"), "--summary", p("summary.json"), "--pods", p("pods.json")},
			[]string{"badkc.yaml", "evictionHard.memory.available", "-1Gi", "must be positive"}},
		{"bad quantity in pods", []string{"--config", p("kc.yaml"), "--summary", p("summary.json"), "--pods", p("badpods.json")},
			[]string{"badpods.json", "items[0].spec.containers[0].resources.requests.memory", "lots"}},
		{"unknown signal in a flag", []string{"--eviction-hard", "swap.available<1Gi", "--summary", p("summary.json"), "--pods", p("pods.json")},
			[]string{"evictionHard.swap.available", "unsupported eviction signal swap.available"}},
		{"missing summary", []string{"--config", p("kc.yaml"), "--pods", p("pods.json")}, []string{"--summary FILE (or --live) is required"}},
		{"missing file", []string{"--config", p("nope.yaml"), "--summary", p("summary.json"), "--pods", p("pods.json")}, []string{"nope.yaml", "no such file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"explain"}, tc.args...)...)
			if code != cli.ExitError {
				t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitError, errOut)
			}
			if out != "" {
				t.Errorf("partial output on error: %q", out)
			}
			if strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
				t.Errorf("error is not one line: %q", errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q lacks %q", errOut, w)
				}
			}
		})
	}
}

func TestSimulate(t *testing.T) {
	dir := writeInputs(t, map[string]string{"kc.yaml": explainConfig, "summary.json": explainSummary, "pods.json": explainPods,
		"s.yaml":   "kubeletConfig: kc.yaml\nsteps:\n- at: 0s\n  summary: summary.json\n  pods: pods.json\n- at: 10s\n  summary: summary.json\n",
		"bad.yaml": "kubeletConfig: kc.yaml\nsteps:\n- at: 0s\n  summary: summary.json\n  pods: pods.json\n  colour: blue\n",
	})
	out, errOut, code := runCmd("simulate", "--scenario", filepath.Join(dir, "s.yaml"), "-o", "json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Steps []struct {
			At             string
			NodeConditions []string
			Evicted        []map[string]any
			NodeReclaim    []string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// step 2 sees the same stats (same timestamps): the kubelet does not act twice on stale stats
	if len(res.Steps) != 2 || len(res.Steps[0].Evicted) != 1 || res.Steps[0].Evicted[0]["name"] != "above" ||
		len(res.Steps[1].Evicted) != 0 || res.Steps[1].NodeReclaim == nil || res.Steps[1].At != "10s" {
		t.Errorf("simulate: %s", out)
	}
	if !strings.Contains(out, `"evicted": []`) || !strings.Contains(out, `"nodeReclaim": []`) {
		t.Errorf("empty lists must be printed as []: %s", out)
	}
	_, errOut, code = runCmd("simulate", "--scenario", filepath.Join(dir, "bad.yaml"))
	if code != cli.ExitError || !strings.Contains(errOut, "bad.yaml: steps[0].colour: unknown field") {
		t.Errorf("unknown step field: exit %d, %q", code, errOut)
	}
	out, _, code = runCmd("simulate", "--help")
	if code != cli.ExitOK || !strings.Contains(out, "afterReclaim") || !strings.Contains(out, "Example") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}
