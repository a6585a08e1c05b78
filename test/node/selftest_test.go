package node_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/node"
)

// TestSelftestPod: `evictd selftest` in a pod on the node, as a user runs
// it (deploy/kubernetes/selftest/, rendered by the node's kubectl
// kustomize), with the node's kubelet configuration. The pod ends
// Succeeded with evictd having won every trial, its log has the report, and
// once it is deleted no sandbox cgroup is left on the host (node.Main's
// leave-nothing check covers the rest of the machine).
func TestSelftestPod(t *testing.T) {
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
	if got := p.Spec.Containers[0].Image; got != node.EvictdImage {
		t.Fatalf("image %q, want the kustomization to set %q", got, node.EvictdImage)
	}
	// The two settings of this test node (as installEvictd's): the
	// kubelet's configuration is in the run's directory, and the pod goes
	// to this node.
	for i, v := range p.Spec.Volumes {
		if v.Name == "kubelet-config" {
			p.Spec.Volumes[i].HostPath.Path = filepath.Join(c.Dir, "kubelet.yaml")
		}
	}
	p.Spec.NodeName = c.Node
	ns := p.Namespace
	if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), &p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := false
	del := func() {
		if deleted {
			return
		}
		deleted = true
		if err := c.Client.CoreV1().Pods(ns).Delete(node.Ctx(t), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the pod: %v", err)
		}
		c.WaitFor(t, 60*time.Second, "the selftest pod gone", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
	t.Cleanup(del)
	var got *corev1.Pod
	c.WaitFor(t, 180*time.Second, "the selftest pod to end", func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, nil
	})
	logFile := filepath.Join(c.PodLogs, ns+"_"+p.Name+"_"+string(got.UID), "selftest", "0.log")
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the selftest pod's log:\n%s", b)
	if got.Status.Phase != corev1.PodSucceeded || !strings.Contains(string(b), "evictd won all") {
		t.Errorf("the pod ended %s; want Succeeded with evictd having won every trial", got.Status.Phase)
	}
	if !strings.Contains(string(b), "Threshold ("+"/var/lib/kubelet/config.yaml): memory.available<"+c.Threshold) {
		t.Errorf("the log does not show the node's own threshold %s from its kubelet configuration", c.Threshold)
	}
	del()
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if m, _ := filepath.Glob(filepath.Join(root, "evictd-selftest-*")); len(m) > 0 {
			t.Errorf("sandbox cgroups left behind: %v", m)
		}
	}
}
