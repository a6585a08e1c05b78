package node_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/node"
)

// selftestLabel is the label deploy/kubernetes/selftest/pod.yaml gives the
// selftest pod: what a leftover would carry.
const selftestLabel = "app.kubernetes.io/name=evictd-selftest"

// buildEvictd builds evictd from this tree for the host side of
// `evictd selftest --kubernetes`.
func buildEvictd(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "evictd")
	cmd := exec.Command("go", "build", "-o", exe, "./cmd/evictd")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/evictd: %v\n%s", err, out)
	}
	return exe
}

// selftestCmd is `evictd selftest --kubernetes` against the test node, as
// a user runs it, with the node's kubelet configuration (in the run's
// directory here, /var/lib/kubelet/config.yaml on a kubeadm node).
func selftestCmd(t *testing.T, c *node.Cluster, exe string, extra ...string) *exec.Cmd {
	args := append([]string{"selftest", "--kubernetes", "--kubeconfig", c.Kubeconfig, "--node-name", c.Node,
		"--image", node.EvictdImage, "--config", filepath.Join(c.Dir, "kubelet.yaml"), "--timeout", "5m"}, extra...)
	return exec.Command(exe, args...)
}

// noSelftestLeft checks that no selftest pod and no sandbox cgroup is left
// (node.Main's leave-nothing check covers the rest of the machine).
func noSelftestLeft(t *testing.T, c *node.Cluster) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("").List(node.Ctx(t), metav1.ListOptions{LabelSelector: selftestLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("selftest pod left behind: %s/%s (%s)", p.Namespace, p.Name, p.Status.Phase)
	}
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if m, _ := filepath.Glob(filepath.Join(root, "evictd-selftest-*")); len(m) > 0 {
			t.Errorf("sandbox cgroups left behind: %v", m)
		}
	}
}

// TestSelftestKubernetes: `evictd selftest --kubernetes` creates the pod of
// deploy/kubernetes/selftest/ on the node, streams its report, exits 0
// with every trial won and the node's own threshold in the report, and
// deletes the pod.
func TestSelftestKubernetes(t *testing.T) {
	c := node.Get(t)
	exe := buildEvictd(t)
	var stdout, stderr bytes.Buffer
	cmd := selftestCmd(t, c, exe)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Errorf("evictd selftest --kubernetes: %v, want exit 0", err)
	}
	out := stdout.String()
	if !strings.Contains(out, "Threshold (/var/lib/kubelet/config.yaml): memory.available<"+c.Threshold) {
		t.Errorf("the report does not show the node's own threshold %s from its kubelet configuration", c.Threshold)
	}
	// Every row of the trials table says "evictd won", and there are the
	// 3 rates × 3 trials of the defaults.
	rows := regexp.MustCompile(`(?m)^  \S+/s\s+\S+/s\s+\d+ms\s.*$`).FindAllString(strings.Split(out, "Per rate")[0], -1)
	won := 0
	for _, r := range rows {
		if strings.HasSuffix(r, "evictd won") {
			won++
		}
	}
	if len(rows) != 9 || won != 9 || !strings.Contains(out, "evictd won all 9 trials") {
		t.Errorf("%d trial row(s), %d won; want 9 of 9", len(rows), won)
	}
	if !regexp.MustCompile(`pod kube-system/evictd-selftest-\S+ deleted`).MatchString(stderr.String()) {
		t.Errorf("stderr does not say the pod was deleted")
	}
	noSelftestLeft(t, c)
}

// TestSelftestKubernetesInterrupted: SIGINT to `evictd selftest
// --kubernetes` while the pod's trials run: exit 2, and neither the pod nor
// a sandbox is left.
func TestSelftestKubernetesInterrupted(t *testing.T) {
	c := node.Get(t)
	exe := buildEvictd(t)
	cmd := selftestCmd(t, c, exe, "--trials", "20")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	var stdout bytes.Buffer
	go func() {
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			stdout.WriteString(sc.Text() + "\n")
			// The pod's selftest has started its first trial.
			if !once && strings.HasPrefix(sc.Text(), "Rates (node → sandbox)") {
				once = true
				close(running)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-running:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the selftest pod did not start its trials in 3 min; stderr:\n%s", stderr.String())
	}
	time.Sleep(2 * time.Second) // into a trial
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("evictd selftest --kubernetes still runs 2 min after SIGINT; stderr:\n%s", stderr.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit %v after SIGINT, want 2", err)
	}
	if !strings.Contains(stderr.String(), "interrupted") || !regexp.MustCompile(`pod kube-system/evictd-selftest-\S+ deleted`).MatchString(stderr.String()) {
		t.Errorf("stderr does not say it was interrupted and deleted the pod")
	}
	noSelftestLeft(t, c)
}

// TestSelftestKubernetesNoSuchNode: a node name the cluster does not have
// is refused before anything is made.
func TestSelftestKubernetesNoSuchNode(t *testing.T) {
	c := node.Get(t)
	exe := buildEvictd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "selftest", "--kubernetes", "--kubeconfig", c.Kubeconfig, "--node-name", "no-such-node").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `no node "no-such-node" in the cluster`) {
		t.Errorf("exit %v, output %q; want 2 and no node \"no-such-node\"", err, out)
	}
	noSelftestLeft(t, c)
}

// TestSelftestKustomize: the node's kubectl renders deploy/kubernetes/selftest/
// (the manifest `evictd selftest --kubernetes` embeds) to one Pod, with
// the image and namespace evictd uses by default.
func TestSelftestKustomize(t *testing.T) {
	c := node.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "kustomize", filepath.Join("..", "..", "deploy", "kubernetes", "selftest")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/kubernetes/selftest: %v", err)
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(out, &p); err != nil {
		t.Fatalf("the rendered manifest is not one Pod: %v\n%s", err, out)
	}
	if p.Spec.Containers[0].Image != node.EvictdImage || p.Namespace != "kube-system" {
		t.Errorf("image %q namespace %q, want %q and kube-system", p.Spec.Containers[0].Image, p.Namespace, node.EvictdImage)
	}
}
