package node_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/evictd/evictd/test/node"
)

// TestKubeletConfigAsTheKubeletReadsIt: the node's kubelet runs with a
// config file, a --config-dir of drop-ins (scripts/node.sh: one in a
// subdirectory, one file that is no drop-in) and an eviction flag. Its own
// /configz says which thresholds it ended up with; evictd reads the same
// ones from the /configz dump, from the file and drop-ins (with the flag
// given as the kubelet has it), and — in Kubernetes mode on the host — from
// the kubelet's command line in /proc alone, and explain decides with them.
func TestKubeletConfigAsTheKubeletReadsIt(t *testing.T) {
	c := node.Get(t)
	exe := buildEvictd(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The kubelet's own endpoints, as kubectl get --raw
	// /api/v1/nodes/NODE/proxy/... serves them (the API server refuses to
	// proxy to this node's loopback address).
	kubelet := func(path string) string {
		b, err := c.KubeletGet(node.Ctx(t), path)
		if err != nil {
			t.Fatalf("the kubelet's %s: %v", path, err)
		}
		return string(b)
	}
	configz := write("configz.json", kubelet("/configz"))
	summary := write("summary.json", kubelet("/stats/summary"))
	pods := write("pods.json", kubectl(t, c, "get", "pods", "-A", "--field-selector", "spec.nodeName="+c.Node, "-o", "json"))

	// What the kubelet holds, by its own account.
	var dump struct {
		Kubeletconfig struct {
			EvictionHard           map[string]string `json:"evictionHard"`
			EvictionMinimumReclaim map[string]string `json:"evictionMinimumReclaim"`
		} `json:"kubeletconfig"`
	}
	b, _ := os.ReadFile(configz)
	if err := json.Unmarshal(b, &dump); err != nil {
		t.Fatalf("/configz: %v\n%s", err, b)
	}
	wantHard := map[string]string{"memory.available": c.Threshold, "nodefs.available": "2%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"}
	if !reflect.DeepEqual(dump.Kubeletconfig.EvictionHard, wantHard) || dump.Kubeletconfig.EvictionMinimumReclaim["nodefs.available"] != "100Mi" {
		t.Fatalf("the kubelet's /configz has evictionHard %v, evictionMinimumReclaim %v; scripts/node.sh's file, drop-ins and flag make %v and nodefs.available=100Mi",
			dump.Kubeletconfig.EvictionHard, dump.Kubeletconfig.EvictionMinimumReclaim, wantHard)
	}

	src := c.KubeletConfig()
	explain := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(exe, append(append([]string{"explain"}, args...), "--summary", summary, "--pods", pods, "-o", "json")...).Output()
		if err != nil {
			t.Fatalf("evictd explain %q: %v\n%s", args, err, stderrOf(err))
		}
		var rep struct {
			Thresholds []struct{ Threshold string } `json:"thresholds"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatal(err)
		}
		var ts []string
		for _, r := range rep.Thresholds {
			ts = append(ts, r.Threshold)
		}
		sort.Strings(ts)
		return ts
	}
	fromConfigz := explain("--config", configz)
	fromFiles := explain("--config", src.File, "--config-dir", src.DropInDir, "--eviction-minimum-reclaim", "nodefs.available=100Mi")
	fromFileAlone := explain("--config", src.File)
	if !reflect.DeepEqual(fromConfigz, fromFiles) {
		t.Errorf("explain on /configz decides with\n  %q\non the file and drop-ins with\n  %q", fromConfigz, fromFiles)
	}
	for _, want := range []string{"memory.available<" + c.Threshold, "nodefs.available<2%"} {
		if !anyPrefix(fromConfigz, want) {
			t.Errorf("explain's thresholds %q lack the kubelet's %s", fromConfigz, want)
		}
	}
	for _, th := range fromConfigz {
		if strings.HasPrefix(th, "imagefs.inodesFree") {
			t.Errorf("imagefs.inodesFree, removed by a drop-in's null, is among explain's thresholds: %q", fromConfigz)
		}
	}
	if reflect.DeepEqual(fromFileAlone, fromFiles) {
		t.Errorf("the drop-ins change nothing (%q): the test no longer checks their merge", fromFileAlone)
	}

	// lint reads both shapes without an error finding; the drop-in
	// directory's README is reported as skipped.
	for _, args := range [][]string{{"--config", configz}, {"--config", src.File, "--config-dir", src.DropInDir}} {
		out, err := exec.Command(exe, append([]string{"lint", "-o", "json"}, args...)...).Output()
		var rep struct{ Errors int }
		if jerr := json.Unmarshal(out, &rep); jerr != nil || rep.Errors != 0 {
			t.Errorf("evictd lint %q: %v, %d error(s)\n%s", args, err, rep.Errors, out)
		}
		if len(args) == 4 && !strings.Contains(string(out), "README") {
			t.Errorf("lint with the drop-ins does not report README as skipped:\n%s", out)
		}
	}

	// Kubernetes mode on the host finds it all on the kubelet's command
	// line: no --config, no --config-dir, no flag given.
	out, err := exec.Command(exe, "run", "--kubernetes", "--check", "--kubeconfig", c.Kubeconfig, "--node-name", c.Node,
		"--kubelet-summary", "none").CombinedOutput()
	if err != nil {
		t.Fatalf("evictd run --kubernetes --check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--config " + src.File + ", --config-dir " + src.DropInDir + ", eviction flags --eviction-minimum-reclaim=nodefs.available=100Mi",
		"read " + filepath.Join(src.DropInDir, "20-sub", "10-disk.conf"),
		"threshold memory.available<" + c.Threshold, "threshold nodefs.available<2%",
		"kubelet version v1.37.2: evictd implements its eviction decisions",
		"from " + src.File + " + " + src.DropInDir + " (2 drop-ins) + the kubelet's --eviction-minimum-reclaim",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("run --kubernetes --check lacks %q:\n%s", want, out)
		}
	}
}

// anyPrefix: one of list starts with s (a threshold's text goes on with its
// grace period and minimum reclaim).
func anyPrefix(list []string, s string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, s) {
			return true
		}
	}
	return false
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
