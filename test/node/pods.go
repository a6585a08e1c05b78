package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Images imported into the node's containerd before its kubelet starts
// (scripts/node.sh). Pods use them with imagePullPolicy Never.
const (
	PauseImage  = "evictd.local/pause:node"
	WorkImage   = "evictd.local/work:node"
	EvictdImage = "evictd.local/evictd:node"
)

// Namespace creates a namespace for one test and deletes it (and its pods,
// at once) when the test ends.
func (c *Cluster) Namespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(Ctx(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), APITimeout)
		defer cancel()
		zero := int64(0)
		_ = c.Client.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		// Gone from the node before the next test measures memory.
		var left string
		defer func() {
			if left != "" {
				t.Logf("namespace %s not gone: %s", name, left)
			}
		}()
		c.WaitFor(t, 60*time.Second, "namespace "+name+" gone", func(ctx context.Context) (bool, error) {
			n, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				left = ""
				return true, nil
			}
			left = describeLeft(ctx, c, n, err)
			return false, nil
		})
	})
	// The service account controller makes "default" shortly after.
	c.WaitFor(t, 30*time.Second, "service account "+name+"/default", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return name
}

// describeLeft says what keeps a deleted namespace: its phase and
// conditions (the namespace controller's view) and its pods (the
// kubelet's), for a failed wait.
func describeLeft(ctx context.Context, c *Cluster, n *corev1.Namespace, err error) string {
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, finalizers %v", n.Status.Phase, n.Spec.Finalizers)
	for _, cond := range n.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	l, err := c.Client.CoreV1().Pods(n.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return b.String() + "; pods: " + err.Error()
	}
	for _, p := range l.Items {
		fmt.Fprintf(&b, "; pod %s %s deletion %v finalizers %v", p.Name, p.Status.Phase, p.DeletionTimestamp, p.Finalizers)
	}
	return b.String()
}

// HogPod is a pod of the work image running the memory hog with script
// (steps separated by ";", see internal/workload/hog), with the given
// memory request and limit ("" for none) and a CPU request and limit equal
// to the memory's presence, so that requests == limits makes it Guaranteed.
func HogPod(name, script, request, limit string) *corev1.Pod {
	res := corev1.ResourceRequirements{}
	if request != "" {
		res.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request), corev1.ResourceCPU: resource.MustParse("50m")}
	}
	if limit != "" {
		res.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit), corev1.ResourceCPU: resource.MustParse("50m")}
	}
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "hog",
				Image:           WorkImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            strings.Fields(strings.ReplaceAll(script, ";", " ; ")),
				Resources:       res,
			}},
		},
	}
}

// RunPod creates the pod in ns and waits until it runs.
func (c *Cluster) RunPod(t testing.TB, ns string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(ns).Create(Ctx(t), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, p.Name, err)
	}
	return c.WaitRunning(t, ns, p.Name)
}

// WaitRunning waits until the pod ns/name runs, and fails the test when it
// ends first.
func (c *Cluster) WaitRunning(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	c.WaitFor(t, 60*time.Second, "pod "+ns+"/"+name+" Running", func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		switch got.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, fmt.Errorf("pod %s/%s ended: %s %s %s", ns, name, got.Status.Phase, got.Status.Reason, got.Status.Message)
		}
		return false, nil
	})
	return got
}

// WaitFor polls cond every 200 ms (each call bounded by APITimeout) until
// it is true, and fails the test after timeout or on cond's error.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	timeout *= time.Duration(max(c.TimeoutScale, 1))
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), APITimeout)
		ok, err := cond(ctx)
		cancel()
		if ok && err == nil {
			return
		}
		if err != nil {
			last = err
			if !isTransient(err) {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (last error: %v)", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func isTransient(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || strings.Contains(err.Error(), "connection refused")
}

// ContainerID is the runtime's ID of the pod's first container (the part
// after "containerd://").
func ContainerID(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	id := p.Status.ContainerStatuses[0].ContainerID
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}
