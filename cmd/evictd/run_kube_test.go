package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/kube/kubetest"
)

// Kubernetes mode refuses bad configuration with one line, before it
// connects anywhere.
func TestRunKubeRejectsBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	badType := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badType, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nevictionMaxPodGracePeriod: ten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_NAME", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", badType, "--node-name", "n"}, badType + ": evictionMaxPodGracePeriod"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml"), "--node-name", "n"}, "missing.yaml"},
		{[]string{"--config", ok}, "the node name is empty"},
		{[]string{"--config", ok, "--node-name", "n", "--kubeconfig", filepath.Join(dir, "nokubeconfig")}, "API server configuration"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"run", "--kubernetes"}, c.args...), &out, &errb)
		msg := errb.String()
		if code != cli.ExitError || !strings.Contains(msg, c.want) || strings.Count(strings.TrimSpace(msg), "\n") > 0 {
			t.Errorf("run --kubernetes %v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, msg, cli.ExitError, c.want)
		}
	}
}

// `evictd run --kubernetes --check` on a real API server: the kubelet's
// configuration with a field evictd does not know and a duplicate key is
// read leniently (a warning), and the node's pods are listed.
func TestRealRunKubeCheck(t *testing.T) {
	srv, pods := kubeNode(t)
	for _, name := range []string{"a", "b"} {
		srv.RunningPod(t, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}}}, "node-a")
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
aFieldOfANewerKubelet: true
evictionHard: {memory.available: 100Mi}
evictionHard: {memory.available: 300Mi}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"run", "--kubernetes", "--check", "--config", cfg, "--node-name", "node-a",
		"--kubeconfig", srv.Kubeconfig(t, "admin", kubetest.AdminToken), "--pods-cgroup", "/" + pods, "--kubelet-summary", "none"}, &out, &errb)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	for _, want := range []string{"configuration OK", "node node-a", "2 active pod(s)", "disk stats off", "threshold memory.available<300Mi", "threshold allocatableMemory.available<300Mi"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "read leniently") {
		t.Errorf("no lenient-read warning:\n%s", errb.String())
	}
	if strings.Contains(errb.String(), "acts before evictd") {
		t.Errorf("coexistence warning with the kubelet's own thresholds:\n%s", errb.String())
	}

	// evictd's flags lowering a threshold below the kubelet's: one warning.
	out.Reset()
	errb.Reset()
	code = run([]string{"run", "--kubernetes", "--check", "--config", cfg, "--node-name", "node-a", "--eviction-hard", "memory.available<200Mi",
		"--kubeconfig", srv.Kubeconfig(t, "admin", kubetest.AdminToken), "--pods-cgroup", "/" + pods, "--kubelet-summary", "none"}, &out, &errb)
	if code != cli.ExitOK || strings.Count(errb.String(), "the kubelet acts before evictd") != 2 {
		t.Errorf("exit %d; want two coexistence warnings (memory and allocatable):\n%s", code, errb.String())
	}
}

// Kubernetes mode on a real API server that goes away: client-go's
// reflector logs its failing watch through klog (at V(4), "Watch failed -
// backing off"), and with --log-level debug it reaches evictd's stderr as
// one of evictd's own JSON lines, with its pairs, never in klog's format.
// The Node's kubelet version (kubetest's Node has none) is warned about.
func TestRealRunKubeRoutesClientGoLogs(t *testing.T) {
	srv, pods := kubeNode(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, next := startEvictd(t, "run", "--kubernetes", "--dry-run", "--config", cfg, "--node-name", "node-a",
		"--kubeconfig", srv.Kubeconfig(t, "admin", kubetest.AdminToken), "--pods-cgroup", "/"+pods, "--kubelet-summary", "none",
		"--metrics-addr", "", "--decision-log", "", "--state-file", "", "--psi", "off", "--log-format", "json", "--log-level", "debug")
	var stopped, versionWarned, cachesPopulated bool
	for {
		line := next("") // every line, in order
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not evictd's JSON: %q", line)
		}
		level, _ := rec["level"].(string)
		switch {
		case rec["kubelet_version"] != nil && level == "WARN":
			versionWarned = true
		case rec["msg"] == "Caches populated" && strings.HasPrefix(level, "DEBUG") && rec["reflector"] != nil:
			cachesPopulated = true // client-go's V(2), with its pairs
		case !stopped && rec["msg"] == "evictd running in Kubernetes mode":
			srv.StopAPIServer()
			stopped = true
		}
		if stopped && rec["msg"] == "Watch failed - backing off" {
			if !strings.HasPrefix(level, "DEBUG") || !strings.Contains(fmt.Sprint(rec["err"]), "connection refused") {
				t.Errorf("client-go's failing watch: level %s, err %v", level, rec["err"])
			}
			break
		}
	}
	if !versionWarned || !cachesPopulated {
		t.Errorf("kubelet version warned %v; client-go's \"Caches populated\" seen %v", versionWarned, cachesPopulated)
	}
}

// kubeNode starts a real API server with the namespace ns and the Node
// node-a, and makes a pods cgroup for it (v1 memory hierarchy), which it
// returns relative to the hierarchy root, without the leading slash.
func kubeNode(t *testing.T) (*kubetest.Server, string) {
	t.Helper()
	srv := kubetest.Start(t)
	cgrouptest.RequireV1Memory(t)
	pods := cgrouptest.UniqueName(t) + "/kubepods"
	cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pods)
	srv.Namespace(t, "ns")
	srv.Node(t, "node-a")
	return srv, pods
}

// SIGHUP in Kubernetes mode (a real kube-apiserver; the apiserver tier)
// does what it does in host mode and what its log line says: the decision
// log, rotated away by hand, is reopened at its path, the line names it and
// what a SIGHUP does not reload, and the agent keeps running (it used to end
// with exit 129) and stops cleanly on SIGTERM.
func TestRealRunKubeSIGHUPReloads(t *testing.T) {
	srv, pods, _, cfg := kubeNodeUnderPressure(t)
	dl := filepath.Join(t.TempDir(), "decisions.jsonl")
	addr := freePort(t)
	p := startAgent(t, nil, nil, "run", "--kubernetes", "--dry-run", "--config", cfg, "--node-name", "node-a",
		"--kubeconfig", srv.Kubeconfig(t, "admin", kubetest.AdminToken), "--pods-cgroup", "/"+pods, "--kubelet-summary", "none",
		"--decision-log", dl, "--metrics-addr", addr, "--state-file", "", "--psi", "off")
	p.wait("evictd running in Kubernetes mode", 60*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(dl); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no decision in %s in 30 s:\n%s", dl, p.logs())
		}
	}
	if err := os.Rename(dl, dl+".1"); err != nil { // a rotation by hand
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	line := p.wait("SIGHUP handled", 30*time.Second)
	for _, want := range []string{"decision log " + dl + " (reopened)", "not_reloaded=", "--config"} {
		if !strings.Contains(line, want) {
			t.Errorf("the SIGHUP line lacks %q: %s", want, line)
		}
	}
	if _, err := os.Stat(dl); err != nil {
		t.Errorf("the decision log was not reopened at its path: %v", err)
	}
	waitHealthy(t, addr) // still running
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.waitExit(30 * time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), "evictd stopped") {
		t.Errorf("no clean stop:\n%s", p.logs())
	}
}

// kubeNodeUnderPressure is kubeNode with the running pod ns/a on node-a and
// a kubelet configuration, in the returned directory, whose hard threshold
// is met on any node (memory.available<1Pi): an agent decides, and
// records, at once.
func kubeNodeUnderPressure(t *testing.T) (srv *kubetest.Server, pods, dir, cfg string) {
	t.Helper()
	srv, pods = kubeNode(t)
	srv.RunningPod(t, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}}}, "node-a")
	dir = t.TempDir()
	cfg = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard: {memory.available: 1Pi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, pods, dir, cfg
}
