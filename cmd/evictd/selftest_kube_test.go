package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/load"
)

// Kubernetes-mode flags are checked before anything connects.
func TestSelftestKubeFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", "x", "--node-name", "n"}, "--image, --node-name: only with --kubernetes"},
		{[]string{"--kubeconfig", "k"}, "--kubeconfig: only with --kubernetes"},
		{[]string{"--timeout", "1m"}, "--timeout: only with --kubernetes"},
		{[]string{"--kubernetes"}, "the node name is empty: set --node-name or NODE_NAME"},
		{[]string{"--kubernetes", "--node-name", "n", "--namespace", ""}, "--namespace is empty"},
		{[]string{"--kubernetes", "--node-name", "n", "--image", ""}, "--image is empty"},
		{[]string{"--kubernetes", "--node-name", "n", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
		{[]string{"--kubernetes", "--node-name", "n", "--trials", "0"}, "--trials 0: want at least 1"},
		{[]string{"--kubernetes", "--node-name", "n", "--eviction-hard", "memory.available<lots"}, "memory.available"},
		{[]string{"--kubernetes", "--node-name", "n", "--kubeconfig", "/nonexistent/kubeconfig"}, "API server configuration"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"selftest"}, c.args...), &out, &errb)
		if code != cli.ExitError || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), cli.ExitError, c.want)
		}
	}
	// NODE_NAME stands for --node-name, as in 'evictd run --kubernetes'.
	t.Setenv("NODE_NAME", "from-env")
	var out, errb bytes.Buffer
	if code := run([]string{"selftest", "--kubernetes", "--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), "API server configuration") {
		t.Errorf("NODE_NAME set: exit %d, stderr %q; want it past the node check", code, errb.String())
	}
}

// podArgs passes the selftest's own flags, and only those, in a form the
// pod's selftest parses back to the same values.
func TestSelftestKubePodArgs(t *testing.T) {
	parse := func(args []string) (*pflag.FlagSet, *load.EvictionFlags) {
		fs := pflag.NewFlagSet("selftest", pflag.ContinueOnError)
		fs.String("config", "", "")
		fs.String("rates", "100Mi", "")
		fs.Int("trials", 3, "")
		fs.Bool("json", false, "")
		ev := load.RegisterEvictionFlags(fs)
		registerSelftestKubeFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, ev
	}
	fs, ev := parse([]string{"--kubernetes", "--kubeconfig", "k", "--node-name", "n", "--namespace", "ns", "--image", "i", "--timeout", "1m",
		"--config", "/etc/kubelet.yaml", "--rates", "1Gi,2Gi", "--trials", "5", "--json",
		"--eviction-hard", "memory.available<500Mi,nodefs.available<10%", "--eviction-hard", "imagefs.available<15%"})
	got := podArgs(fs)
	want := []string{"--eviction-hard=imagefs.available<15%,memory.available<500Mi,nodefs.available<10%", "--json=true", "--rates=1Gi,2Gi", "--trials=5"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("podArgs %q, want %q", got, want)
	}
	fs2, ev2 := parse(got)
	if !reflect.DeepEqual(ev.Hard, ev2.Hard) || fs2.Lookup("trials").Value.String() != "5" || fs2.Lookup("json").Value.String() != "true" {
		t.Errorf("parsed back: %v, trials %s; want %v, 5", ev2.Hard, fs2.Lookup("trials").Value, ev.Hard)
	}
}

// On a real kube-apiserver (no kubelet): the errors a user meets before
// the pod runs, each one line, and the pod deleted in every case.
func TestRealSelftestKubeErrors(t *testing.T) {
	nobody := kubetest.User{Token: "evictd-test-nobody", Name: "nobody", Groups: []string{"system:authenticated"}}
	srv := kubetest.Start(t, nobody)
	srv.Namespace(t, "kube-system")
	srv.Node(t, "node-a")
	admin := srv.Kubeconfig(t, "admin", kubetest.AdminToken)
	selftest := func(kubeconfig string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"selftest", "--kubernetes", "--kubeconfig", kubeconfig, "--timeout", "30s"}, args...), &out, &errb)
		return code, errb.String()
	}
	if code, msg := selftest(admin, "--node-name", "node-b"); code != cli.ExitError || !strings.Contains(msg, `no node "node-b" in the cluster`) {
		t.Errorf("no such node: exit %d, %q", code, msg)
	}
	if code, msg := selftest(srv.Kubeconfig(t, "nobody", nobody.Token), "--node-name", "node-a"); code != cli.ExitError ||
		!strings.Contains(msg, `cannot create resource "pods"`) || !strings.Contains(msg, "RBAC: the caller needs create pods in the namespace") {
		t.Errorf("RBAC: exit %d, %q", code, msg)
	}

	// The kubelet's part, played here: a status for the pod, and the final
	// deletion once the pod is deleted gracefully.
	kubelet := func(ctx context.Context, status func(*corev1.Pod)) {
		pods := srv.Client.CoreV1().Pods("kube-system")
		for ctx.Err() == nil {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					p := &l.Items[i]
					switch {
					case p.DeletionTimestamp != nil:
						pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
					case len(p.Status.ContainerStatuses) == 0 && len(p.Status.Conditions) == 0:
						status(p)
						if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
							t.Errorf("the kubelet's status: %v", err)
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, c := range []struct {
		name, want string
		status     func(*corev1.Pod)
	}{
		{"image pull", "ImagePullBackOff: Back-off pulling image (image reg/none:v0; stopped waiting)", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "selftest", Image: p.Spec.Containers[0].Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}},
		{"unschedulable", "unschedulable: 0/1 nodes", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
		}},
	} {
		kctx, kcancel := context.WithCancel(context.Background())
		go kubelet(kctx, c.status)
		code, msg := selftest(admin, "--node-name", "node-a", "--image", "reg/none:v0")
		kcancel()
		if code != cli.ExitError || !strings.Contains(msg, c.want) {
			t.Errorf("%s: exit %d, %q; want %d and %q", c.name, code, msg, cli.ExitError, c.want)
		}
		if !strings.Contains(msg, "deleted") {
			t.Errorf("%s: the pod was not deleted: %q", c.name, msg)
		}
		l, err := srv.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 0 {
			t.Errorf("%s: pods left: %v %v", c.name, l, err)
		}
	}
}
