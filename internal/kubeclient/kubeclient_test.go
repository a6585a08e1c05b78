package kubeclient_test

import (
	"context"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/kubeclient"
)

// TestRealEveryCall makes each of the client's calls against a real
// kube-apiserver and checks what the server did (read back with client-go's
// own clientset), so a wrong path, verb, parameter or encoding fails here.
func TestRealEveryCall(t *testing.T) {
	srv := kubetest.Start(t)
	c := srv.API
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv.Namespace(t, "kc")
	srv.Node(t, "node-a")
	srv.Node(t, "node-b")

	// Nodes: get, and list by label selector.
	n, err := c.GetNode(ctx, "node-a")
	if err != nil || n.Name != "node-a" {
		t.Fatalf("GetNode: %v, %v", n, err)
	}
	if _, err := c.GetNode(ctx, "no-such-node"); !apierrors.IsNotFound(err) {
		t.Errorf("GetNode of a missing node: %v, want NotFound", err)
	}
	if _, err := srv.Client.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	nl, err := c.ListNodes(ctx, metav1.ListOptions{LabelSelector: "pool=b"})
	if err != nil || len(nl.Items) != 1 || nl.Items[0].Name != "node-b" {
		t.Fatalf("ListNodes(pool=b): %v, %v", nl, err)
	}

	// Pods: create, get, list and watch by field selector.
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kc"},
		Spec: v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "main", Image: "busybox"}}, AutomountServiceAccountToken: new(bool)}}
	created, err := c.CreatePod(ctx, pod)
	if err != nil || created.UID == "" {
		t.Fatalf("CreatePod: %v, %v", created, err)
	}
	other := pod.DeepCopy()
	other.Name, other.Spec.NodeName = "q", "node-b"
	if _, err := c.CreatePod(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetPod(ctx, "kc", "p")
	if err != nil || got.UID != created.UID {
		t.Fatalf("GetPod: %v, %v", got, err)
	}
	onA := fields.OneTermEqualSelector("spec.nodeName", "node-a").String()
	pl, err := c.ListPods(ctx, "", metav1.ListOptions{FieldSelector: onA})
	if err != nil || len(pl.Items) != 1 || pl.Items[0].Name != "p" {
		t.Fatalf("ListPods(spec.nodeName=node-a): %v, %v", pl, err)
	}
	w, err := c.WatchPods(ctx, "kc", metav1.ListOptions{FieldSelector: onA, ResourceVersion: pl.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Status: a strategic merge patch of the status subresource.
	patch := []byte(`{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet","message":"m"}]}}`)
	patched, err := c.PatchPodStatus(ctx, "kc", "p", types.StrategicMergePatchType, patch)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(patched, "DisruptionTarget") {
		t.Errorf("PatchPodStatus: the condition is not in the answer: %+v", patched.Status.Conditions)
	}
	select {
	case ev := <-w.ResultChan():
		p, ok := ev.Object.(*v1.Pod)
		if ev.Type != watch.Modified || !ok || p.Name != "p" || !hasCondition(p, "DisruptionTarget") {
			t.Errorf("the watch saw %s %T, want the patched pod Modified", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("the watch saw nothing of the status patch")
	}

	// Events.
	ev, err := c.CreateEvent(ctx, &v1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "p.", Namespace: "kc"},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "kc", Name: "p", UID: created.UID},
		Reason:         "Evicted", Message: "The node was low on resource: memory.", Type: v1.EventTypeWarning,
		Source: v1.EventSource{Component: "evictd", Host: "node-a"}})
	if err != nil || ev.Name == "" {
		t.Fatalf("CreateEvent: %v, %v", ev, err)
	}
	if back, err := srv.Client.CoreV1().Events("kc").Get(ctx, ev.Name, metav1.GetOptions{}); err != nil || back.Reason != "Evicted" {
		t.Errorf("the Event as stored: %v, %v", back, err)
	}

	// The Eviction subresource through Core (as internal/kube posts it).
	grace := int64(0)
	err = c.Core().Post().Namespace("kc").Resource("pods").Name("p").SubResource("eviction").
		Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kc"}, DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}).
		Do(ctx).Error()
	if err != nil {
		t.Fatalf("eviction: %v", err)
	}
	if _, err := srv.Client.CoreV1().Pods("kc").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the eviction (grace 0, no kubelet): get pod %v, want NotFound", err)
	}

	// Delete, with a precondition that does not hold and then without.
	wrong := types.UID("not-the-uid")
	if err := c.DeletePod(ctx, "kc", "q", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}}); !apierrors.IsConflict(err) {
		t.Errorf("DeletePod with a wrong UID precondition: %v, want Conflict", err)
	}
	if err := c.DeletePod(ctx, "kc", "q", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Errorf("DeletePod: %v", err)
	}

	// Logs: no kubelet behind the node, so the server says why, as an API error.
	if rc, err := c.PodLogs(ctx, "kc", "no-such-pod", &v1.PodLogOptions{Follow: true}); err == nil {
		rc.Close()
		t.Error("PodLogs of a missing pod: no error")
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("PodLogs of a missing pod: %v, want NotFound", err)
	}

	// The reviews the secure metrics endpoint makes.
	tr, err := c.CreateTokenReview(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: kubetest.AdminToken}})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("CreateTokenReview: %+v, %v", tr.Status, err)
	}
	sar, err := c.CreateSubjectAccessReview(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: tr.Status.User.Username, Groups: tr.Status.User.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}})
	if err != nil || !sar.Status.Allowed {
		t.Fatalf("CreateSubjectAccessReview: %+v, %v", sar.Status, err)
	}
}

func hasCondition(p *v1.Pod, typ v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// TestNewNeedsAConfig: no configuration is an error, not a panic.
func TestNewNeedsAConfig(t *testing.T) {
	if _, err := kubeclient.New(nil); err == nil {
		t.Fatal("New(nil): no error")
	}
}
