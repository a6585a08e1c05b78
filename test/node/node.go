// Package node is the real-node tier's fixture: a single-node Kubernetes
// v1.37.2 cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, containerd) on this machine, brought up and torn
// down by scripts/node.sh — the one implementation, used by `make node-up`
// too — and handed to Go tests as a client and paths.
//
// A test package calls Main from its TestMain and Get from each test. The
// tier is off unless EVICTD_TEST_NODE=1 (so `go test ./...` in the unit tier
// starts no cluster; its tests skip and say why); when it is on and the node
// cannot start, every test fails. Main also runs the tier's two machine
// checks around the tests: no packet left for an address outside loopback
// and the pod range (scripts/node.sh traffic), and the machine is as it was
// before (scripts/node.sh snapshot, before up and after down).
//
// With EVICTD_NODE_DIR set (a node from `make node-up`: `scripts/node.sh
// env`), Main uses that node and neither starts nor removes it.
package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/internal/kubeletconfig"
)

// Environment of the tier.
const (
	// EnvEnable turns the tier on ("1").
	EnvEnable = "EVICTD_TEST_NODE"
	// EnvDir names a running node's work directory to use instead of
	// starting one.
	EnvDir = "EVICTD_NODE_DIR"
)

// APITimeout bounds every single call to the API server or the kubelet: a
// call that hangs (a kubectl delete once hung 10 min while the kubelet could
// not reach its runtime) fails the test instead. 15 s, stretched by the
// node's TimeoutScale when it is loaded (under emulation, on a busy
// machine, the v2 node's API server was seen to take over 15 s for a GET).
var APITimeout = apiTimeout

const apiTimeout = 15 * time.Second

// Cluster is a running node.
type Cluster struct {
	// Dir is the run's work directory (.cache/node/run/<id>).
	Dir string
	// Kubeconfig is the admin kubeconfig (system:masters).
	Kubeconfig string
	// Config and Client talk to the API server as admin.
	Config *rest.Config
	Client kubernetes.Interface
	// Kubelet is the kubelet's HTTPS endpoint (https://127.0.0.1:PORT);
	// KubeletRoot and PodLogs its root and pod log directories.
	Kubelet, KubeletRoot, PodLogs string
	// Containerd is containerd's socket (for ctr).
	Containerd string
	// Bin holds the Kubernetes binaries; Images the image archives and,
	// in Images/bin, the static binaries they were made of (evictd too,
	// built from the tree under test).
	Bin, Images string
	// Cgroup is the run's cgroup (unified hierarchy) holding the cluster's
	// daemons: the no-traffic guard counts its packets.
	Cgroup string
	// Threshold and Allocatable are the kubelet's memory.available hard
	// threshold and the node's allocatable memory (quantities).
	Threshold, Allocatable string
	// Node is the node's name.
	Node string
	// TimeoutScale stretches every WaitFor's hang guard: 1 on the v1 node,
	// more on the v2 node under emulation, where a pod takes a minute to
	// start (EVICTD_NODE_TIMEOUT_SCALE in the env file).
	TimeoutScale int
	// CgroupDriver is the kubelet's cgroupDriver ("cgroupfs" on the v1
	// node, "systemd" on the cgroup v2 node in its VM).
	CgroupDriver string
	// Systemd says the node's daemons are systemd units (the v2 node:
	// scripts/node-v2-guest.sh), restarted with systemctl; otherwise they
	// are processes scripts/node.sh started and recorded in the pids file.
	Systemd bool

	repo         string
	kubeletHTTP  *http.Client
	traffic0     int // packets the guard counted before the tests
	startFailure error
}

var cluster *Cluster

// Main brings the node up (unless the tier is off or EnvDir names one), runs
// the tests, checks traffic, tears the node down and checks that the machine
// is as before. Use it as os.Exit(node.Main(m)).
func Main(m *testing.M) int {
	// Descriptors inherited without close-on-exec (scripts/node.sh's lock,
	// fd 9, passed down through go test) would reach every daemon a test
	// restarts: a restarted kubelet kept the node lock for as long as it ran.
	for fd := 3; fd < 256; fd++ {
		syscall.CloseOnExec(fd)
	}
	if os.Getenv(EnvEnable) != "1" {
		return m.Run()
	}
	repo, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	if d := os.Getenv(EnvDir); d != "" {
		cluster, err = load(repo, d)
		if err != nil {
			cluster = &Cluster{startFailure: err}
		}
		return m.Run()
	}
	// Hold the node lock for the whole run, so that no `make node-up`
	// tears this node down under the tests (scripts/node.sh lock).
	if os.Getenv("EVICTD_NODE_LOCKED") != "1" {
		f, err := os.OpenFile("/tmp/evictd-node.lock", os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			err = lockFile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "node: taking /tmp/evictd-node.lock:", err)
			return 1
		}
		defer f.Close()
		os.Setenv("EVICTD_NODE_LOCKED", "1")
	}
	before, err := script(repo, "snapshot")
	if err != nil {
		fmt.Fprintln(os.Stderr, "node: snapshot before:", err)
		return 1
	}
	out, err := script(repo, "up")
	if err == nil {
		cluster, err = loadFromUp(repo, out)
	}
	if err != nil {
		cluster = &Cluster{startFailure: fmt.Errorf("bringing the node up: %w", err)}
	} else {
		cluster.traffic0, _, err = cluster.traffic()
		if err != nil {
			cluster.startFailure = err
		}
	}
	code := m.Run()
	if cluster.startFailure == nil {
		n, err := cluster.Leaked()
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "FAIL: no-traffic check:", err)
			code = 1
		case n != 0:
			fmt.Fprintf(os.Stderr, "FAIL: no-traffic check: the cluster sent %d packet(s) to addresses outside 127.0.0.0/8, ::1 and the pod range (dropped by the guard; see scripts/node.sh)\n", n)
			code = 1
		default:
			fmt.Fprintln(os.Stderr, "node: no-traffic check: 0 packets to addresses outside loopback and the pod range")
		}
	}
	if _, err := script(repo, "down"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: tearing the node down:", err)
		code = 1
	}
	after, err := script(repo, "snapshot")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: snapshot after:", err)
		return 1
	}
	if d := diffLines(before, after); d != "" {
		fmt.Fprintf(os.Stderr, "FAIL: leave-nothing check: the machine differs after teardown (- before, + after):\n%s", d)
		code = 1
	} else {
		fmt.Fprintln(os.Stderr, "node: leave-nothing check: cgroups, mounts, processes, iptables, sysctls, links, namespaces and host directories as before")
	}
	return code
}

// Get returns the node, skipping the test when the tier is off and failing
// it when the node did not start.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(EnvEnable) != "1" {
		t.Skipf("the real-node tier is off: %s=1 (make test-node) starts a Kubernetes node for it", EnvEnable)
	}
	if cluster == nil {
		t.Fatal("node.Get without node.Main in TestMain")
	}
	if cluster.startFailure != nil {
		t.Fatal(cluster.startFailure)
	}
	return cluster
}

// Ctx is a context bounded by APITimeout, for one call.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), APITimeout)
	t.Cleanup(cancel)
	return ctx
}

func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "scripts", "node.sh")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("scripts/node.sh not found above the working directory")
		}
		d = p
	}
}

// script runs scripts/node.sh with args, its stderr to ours (the steps'
// progress and times), and returns its stdout.
func script(repo string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repo, "scripts", "node.sh"), args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("scripts/node.sh %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// loadFromUp reads the run's directory from up's last line, KUBECONFIG=...
func loadFromUp(repo, out string) (*Cluster, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	kc, ok := strings.CutPrefix(last, "KUBECONFIG=")
	if !ok {
		return nil, fmt.Errorf("scripts/node.sh up: last line %q, want KUBECONFIG=<path>", last)
	}
	return load(repo, filepath.Dir(kc))
}

// load reads a run's env file (written by scripts/node.sh up).
func load(repo, dir string) (*Cluster, error) {
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", dir, err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, repo: repo, Node: envOr(env, "EVICTD_NODE_NAME", "127.0.0.1"), Kubeconfig: env["KUBECONFIG"],
		CgroupDriver: envOr(env, "EVICTD_NODE_CGROUP_DRIVER", "cgroupfs"), Systemd: env["EVICTD_NODE_SYSTEMD"] == "1", TimeoutScale: 1,
		Kubelet: env["EVICTD_NODE_KUBELET"], KubeletRoot: env["EVICTD_NODE_KUBELET_ROOT"], PodLogs: env["EVICTD_NODE_POD_LOGS"],
		Containerd: env["EVICTD_NODE_CONTAINERD"],
		Bin:        env["EVICTD_NODE_BIN"], Images: env["EVICTD_NODE_IMAGES"], Cgroup: env["EVICTD_NODE_CGROUP"],
		Threshold: env["EVICTD_NODE_THRESHOLD"], Allocatable: env["EVICTD_NODE_ALLOCATABLE"]}
	if v := env["EVICTD_NODE_TIMEOUT_SCALE"]; v != "" {
		if c.TimeoutScale, err = strconv.Atoi(v); err != nil || c.TimeoutScale < 1 {
			return nil, fmt.Errorf("node %s: EVICTD_NODE_TIMEOUT_SCALE=%q: want a whole number ≥ 1", dir, v)
		}
	}
	for k, v := range map[string]string{"KUBECONFIG": c.Kubeconfig, "EVICTD_NODE_KUBELET": c.Kubelet, "EVICTD_NODE_CGROUP": c.Cgroup, "EVICTD_NODE_IMAGES": c.Images} {
		if v == "" {
			return nil, fmt.Errorf("node %s: env file lacks %s", dir, k)
		}
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", dir, err)
	}
	APITimeout = apiTimeout * time.Duration(c.TimeoutScale)
	c.Config.Timeout = APITimeout
	c.Client, err = kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	// The kubelet trusts the same CA and authorizes admin (system:masters)
	// through the API server: its port 10250 serves /stats/summary (the
	// API server's node proxy refuses a loopback node).
	tc, err := rest.TLSConfigFor(c.Config)
	if err != nil {
		return nil, err
	}
	c.kubeletHTTP = &http.Client{Timeout: APITimeout, Transport: &http.Transport{TLSClientConfig: tc.Clone(), TLSHandshakeTimeout: 5 * time.Second}}
	return c, nil
}

func envOr(env map[string]string, k, def string) string {
	if v := env[k]; v != "" {
		return v
	}
	return def
}

// KubeletGet GETs path from the kubelet's HTTPS port as admin.
func (c *Cluster) KubeletGet(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Kubelet+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.kubeletHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// Leaked is the number of packets the cluster sent to addresses outside
// loopback and the pod range since it started, less those sent to
// CanaryAddr (the tests' own, counted apart).
func (c *Cluster) Leaked() (int, error) {
	total, canary, err := c.traffic()
	return total - canary - c.traffic0, err
}

// Canary is the number of packets the guard counted (and dropped) on their
// way to CanaryAddr.
func (c *Cluster) Canary() (int, error) {
	_, canary, err := c.traffic()
	return canary, err
}

func (c *Cluster) traffic() (total, canary int, err error) {
	out, err := script(c.repo, "traffic")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(out, "%d %d", &total, &canary); err != nil {
		return 0, 0, fmt.Errorf("scripts/node.sh traffic printed %q: %w", out, err)
	}
	return total, canary, nil
}

// CanaryAddr is where the tests send the packet that shows the no-traffic
// guard works: TEST-NET-3 (RFC 5737), routed nowhere, and the guard drops
// it before it could leave (scripts/node.sh counts it apart).
const CanaryAddr = "203.0.113.7"

// PingFromClusterCgroup sends one ICMP echo to CanaryAddr from a process in
// the run's cgroup, where the cluster's daemons run: a stand-in for a
// component of the cluster that leaks. The ping fails (the guard drops it).
func (c *Cluster) PingFromClusterCgroup(ctx context.Context) string {
	busybox := filepath.Join(c.repo, ".cache", "node", "busybox", "bin", "busybox")
	cmd := exec.CommandContext(ctx, "sh", "-c", `echo $$ >"$1/cgroup.procs" && exec "$2" ping -c 1 -W 1 "$3"`, "sh", c.Cgroup, busybox, CanaryAddr)
	out, _ := cmd.CombinedOutput()
	return string(bytes.TrimSpace(out))
}

// lockFile waits up to 2 min for an exclusive flock on f.
func lockFile(f *os.File) error {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EWOULDBLOCK {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("another node is in use (held for 2 min)")
		}
		time.Sleep(time.Second)
	}
}

// diffLines lists the lines only in a ("-") or only in b ("+").
func diffLines(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if ca[l] > cb[l] {
			fmt.Fprintf(&out, "- %s\n", l)
			ca[l]--
		}
	}
	ca = count(a)
	for _, l := range strings.Split(b, "\n") {
		if cb[l] > ca[l] {
			fmt.Fprintf(&out, "+ %s\n", l)
			cb[l]--
		}
	}
	return out.String()
}

// StopAPIServer stops the node's kube-apiserver, found by the PID
// scripts/node.sh recorded in the run's pids file (SIGTERM, SIGKILL after
// 5 s, as teardown does), and returns a function that starts it again with
// the same command line, in the run's cgroup (so the no-traffic guard still
// counts its packets), logging to the same file, and waits until it is
// ready. The new PID replaces the old one in the pids file, so that
// teardown stops it. If the test ends with the server stopped, its cleanup
// starts it again: the tests after it need it.
func (c *Cluster) StopAPIServer(t testing.TB) (restart func()) {
	t.Helper()
	restart = c.stopDaemon(t, "kube-apiserver", func() {
		c.WaitFor(t, 60*time.Second, "kube-apiserver ready again", func(ctx context.Context) (bool, error) {
			err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
			return err == nil, nil
		})
	})
	t.Cleanup(restart)
	return restart
}

// RestartKubelet stops the node's kubelet and starts it again with the same
// command line and configuration file (which the test may have changed), and
// waits until the node is Ready again. The kubelet reads the machine (its
// memory and huge page capacity) only when it starts. On the v2 node the
// kubelet is a systemd unit: systemctl restarts it.
func (c *Cluster) RestartKubelet(t testing.TB) {
	t.Helper()
	// A node condition's heartbeat is a metav1.Time, stored in whole
	// seconds, and the kubelet posts its status again only on a change or
	// every nodeStatusReportFrequency (5 min). A new kubelet that
	// registered within the second its restart began (0.9 s on a fresh CI
	// machine) posted a heartbeat that read as before a restart time with
	// nanoseconds, and the wait below ran out. So the restart begins on a
	// whole second, and a heartbeat in that second or later counts.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	restarted := time.Now().Truncate(time.Second)
	if c.Systemd {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "systemctl", "restart", "evictd-kubelet.service").CombinedOutput(); err != nil {
			t.Fatalf("systemctl restart evictd-kubelet: %v\n%s", err, out)
		}
	} else {
		c.stopDaemon(t, "kubelet", func() {})()
	}
	// Ready again, as posted by the new kubelet (a heartbeat after its start).
	c.WaitFor(t, 3*time.Minute, "the node Ready after the kubelet's restart", func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue && !cond.LastHeartbeatTime.Time.Before(restarted), nil
			}
		}
		return false, nil
	})
}

// stopDaemon stops the daemon that scripts/node.sh started as name (its PID
// in the pids file) and returns a function that starts it again, once, as
// described at StopAPIServer, then calls ready.
func (c *Cluster) stopDaemon(t testing.TB, name string, ready func()) (restart func()) {
	t.Helper()
	if c.Systemd {
		t.Fatalf("stopping %s by its PID: the node's daemons are systemd units here", name)
	}
	pids := filepath.Join(c.Dir, "pids")
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, l := range strings.Split(string(b), "\n") {
		if n, p, ok := strings.Cut(l, " "); ok && n == name {
			fmt.Sscanf(p, "%d", &pid)
		}
	}
	if pid == 0 {
		t.Fatalf("%s names no %s", pids, name)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("%s (pid %d): %v", name, pid, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if filepath.Base(args[0]) != name {
		t.Fatalf("pid %d runs %q, not %s", pid, args[0], name)
	}
	if err := stopPID(pid, 5*time.Second); err != nil {
		t.Fatalf("stopping %s (pid %d): %v", name, pid, err)
	}
	stopped := true
	return func() {
		t.Helper()
		if !stopped {
			return
		}
		stopped = false
		logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		cg, err := os.Open(c.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(cg.Fd())}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s again: %v", name, err)
		}
		go cmd.Wait() // reaped when teardown stops it
		old := fmt.Sprintf("%s %d\n", name, pid)
		now := fmt.Sprintf("%s %d\n", name, cmd.Process.Pid)
		cur, _ := os.ReadFile(pids)
		if err := os.WriteFile(pids, []byte(strings.Replace(string(cur), old, now, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		ready()
	}
}

// stopPID sends SIGTERM, waits up to grace for the process to go, then
// SIGKILLs it and waits up to 10 s more.
func stopPID(pid int, grace time.Duration) error {
	for _, step := range []struct {
		sig  unix.Signal
		wait time.Duration
	}{{unix.SIGTERM, grace}, {unix.SIGKILL, 10 * time.Second}} {
		if err := unix.Kill(pid, step.sig); err != nil {
			return nil // gone already
		}
		for deadline := time.Now().Add(step.wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if unix.Kill(pid, 0) != nil {
				return nil
			}
		}
	}
	return errors.New("still running 10 s after SIGKILL")
}

// KubeletConfig is the kubelet's --config and --config-dir (scripts/node.sh
// writes both).
func (c *Cluster) KubeletConfig() kubeletconfig.Source {
	return kubeletconfig.Source{File: filepath.Join(c.Dir, "kubelet.yaml"), DropInDir: filepath.Join(c.Dir, "kubelet.conf.d")}
}
