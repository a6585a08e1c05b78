package selftest

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	podmanifest "github.com/evictd/evictd/deploy/kubernetes/selftest"
)

// The pod is pod.yaml's, with only its name, namespace, node, image,
// arguments and the kubelet configuration's path on the node changed; the
// defaults are kustomization.yaml's, as 'kubectl apply -k' renders them.
func TestPodManifest(t *testing.T) {
	ns, image := ManifestDefaults()
	if ns != "kube-system" || image != "evictd.local/evictd:node" {
		t.Errorf("defaults %q %q, want kustomization.yaml's kube-system and evictd.local/evictd:node", ns, image)
	}
	p, err := Pod(PodSpec{Node: "node-a", Namespace: "ns", Image: "reg/evictd:v1", KubeletConfig: "/etc/kubernetes/kubelet.yaml", Args: []string{"--trials=5"}})
	if err != nil {
		t.Fatal(err)
	}
	var m corev1.Pod
	if err := yaml.UnmarshalStrict(podmanifest.PodYAML, &m); err != nil {
		t.Fatal(err)
	}
	if p.Name != "" || p.GenerateName != "evictd-selftest-" || p.Namespace != "ns" || p.Spec.NodeName != "node-a" {
		t.Errorf("name %q generateName %q namespace %q node %q", p.Name, p.GenerateName, p.Namespace, p.Spec.NodeName)
	}
	c := p.Spec.Containers[0]
	if c.Image != "reg/evictd:v1" || !reflect.DeepEqual(c.Args, []string{"selftest", "--config=/var/lib/kubelet/config.yaml", "--trials=5"}) {
		t.Errorf("image %q args %q", c.Image, c.Args)
	}
	var hostPath string
	for _, v := range p.Spec.Volumes {
		if v.Name == "kubelet-config" {
			hostPath = v.HostPath.Path
		}
	}
	if hostPath != "/etc/kubernetes/kubelet.yaml" {
		t.Errorf("kubelet-config hostPath %q", hostPath)
	}
	// Everything else is the manifest's.
	q := p.DeepCopy()
	q.ObjectMeta, q.Spec.NodeName = m.ObjectMeta, m.Spec.NodeName
	q.Spec.Containers[0].Image, q.Spec.Containers[0].Args = m.Spec.Containers[0].Image, m.Spec.Containers[0].Args
	q.Spec.Volumes = m.Spec.Volumes
	if !reflect.DeepEqual(*q, m) {
		t.Errorf("the pod differs from pod.yaml beyond name, namespace, node, image, args and the config's path")
	}
}

// podOutcome stops waiting on what will not resolve by itself.
func TestPodOutcome(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "selftest", Image: "reg/evictd:v1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "the message"}}}}}}
	}
	for _, c := range []struct {
		p       *corev1.Pod
		code    int
		done    bool
		wantErr string
	}{
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, 0, false, ""},
		{waiting("ContainerCreating"), 0, false, ""},
		{waiting("ImagePullBackOff"), 0, false, "container selftest: ImagePullBackOff: the message (image reg/evictd:v1; stopped waiting)"},
		{waiting("ErrImagePull"), 0, false, "ErrImagePull"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}}}, 0, false, "unschedulable: 0/1 nodes are available"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfmemory", Message: "Node didn't have enough resource"}}, 0, false,
			"failed before its container ran: OutOfmemory: Node didn't have enough resource"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "selftest",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}, 1, true, ""},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "selftest",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}}}, 0, true, ""},
	} {
		code, done, err := podOutcome(c.p)
		if code != c.code || done != c.done || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%+v: %d %v %v; want %d %v %q", c.p.Status, code, done, err, c.code, c.done, c.wantErr)
		}
	}
}

// With --json the pod's one log is parted again: the report on stdout, the
// progress on stderr, so that `... --json | jq` works as on the host.
func TestPodLogJSON(t *testing.T) {
	log := "evictd selftest — cgroup v1\n  trial 1: won\n{\n  \"won\": true,\n  \"trials\": [\n    {}\n  ]\n}\n"
	var out, errb bytes.Buffer
	if err := copyLog(strings.NewReader(log), true, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.String() != "{\n  \"won\": true,\n  \"trials\": [\n    {}\n  ]\n}\n" || errb.String() != "evictd selftest — cgroup v1\n  trial 1: won\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if err := copyLog(strings.NewReader(log), false, &out, &errb); err != nil || out.String() != log || errb.Len() != 0 {
		t.Errorf("without --json: stdout %q stderr %q", out.String(), errb.String())
	}
}
