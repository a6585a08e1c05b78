package selftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	podmanifest "github.com/evictd/evictd/deploy/kubernetes/selftest"
	"github.com/evictd/evictd/internal/kubeclient"
)

// The self-test in a pod ("evictd selftest --kubernetes"): the same test,
// run by the evictd image in the pod of deploy/kubernetes/selftest/pod.yaml
// (the manifest 'kubectl apply -k' uses, built into evictd) on one node of
// a cluster. The caller creates the pod (StartPod), waits for its result
// (PodRun.Wait) and deletes it (PodRun.Delete), also when interrupted.

// PodSpec is one run of the self-test in a pod.
type PodSpec struct {
	// Node, Namespace and Image place the pod and name what it runs.
	Node, Namespace, Image string
	// KubeletConfig is the path of the kubelet's configuration file on
	// the node, mounted into the pod.
	KubeletConfig string
	// Args are extra selftest arguments (--name=value) for the pod's
	// selftest.
	Args []string
}

// ManifestDefaults are the namespace and image kustomization.yaml gives
// the pod, as kubectl apply -k does.
func ManifestDefaults() (namespace, image string) {
	var k struct {
		Namespace string `json:"namespace"`
		Images    []struct {
			Name, NewName, NewTag string
		} `json:"images"`
	}
	// Embedded and checked by TestPodManifest: it parses.
	if err := yaml.Unmarshal(podmanifest.KustomizationYAML, &k); err != nil || len(k.Images) == 0 {
		panic(fmt.Sprintf("deploy/kubernetes/selftest/kustomization.yaml: %v, %d images", err, len(k.Images)))
	}
	return k.Namespace, k.Images[0].NewName + ":" + k.Images[0].NewTag
}

// Pod is pod.yaml's pod for one run, as s says; named by the API server
// (evictd-selftest-xxxxx) so that runs do not collide.
func Pod(s PodSpec) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(podmanifest.PodYAML, &p); err != nil {
		return nil, fmt.Errorf("deploy/kubernetes/selftest/pod.yaml: %w", err)
	}
	p.GenerateName, p.Name = p.Name+"-", ""
	p.Namespace = s.Namespace
	p.Spec.NodeName = s.Node
	if len(p.Spec.Containers) != 1 {
		return nil, fmt.Errorf("deploy/kubernetes/selftest/pod.yaml: %d containers, want 1", len(p.Spec.Containers))
	}
	c := &p.Spec.Containers[0]
	c.Image = s.Image
	c.Args = append(c.Args, s.Args...)
	found := false
	for i, v := range p.Spec.Volumes {
		if v.Name == "kubelet-config" && v.HostPath != nil {
			p.Spec.Volumes[i].HostPath.Path = s.KubeletConfig
			found = true
		}
	}
	if !found {
		return nil, errors.New("deploy/kubernetes/selftest/pod.yaml: no hostPath volume kubelet-config")
	}
	return &p, nil
}

// podPollInterval is how often the pod's status is read while it starts
// and after its log ends: a run takes tens of seconds.
const podPollInterval = 500 * time.Millisecond

// PodDeleteWait bounds the wait for the deleted pod to be gone: its 30 s
// grace period, in which the selftest removes its sandboxes, and some.
const PodDeleteWait = 90 * time.Second

// imageFailures are the container waiting reasons after which the pod will
// not run without someone's help: waiting on is pointless.
var imageFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// PodRun is a created self-test pod.
type PodRun struct {
	cs              *kubeclient.Client
	Namespace, Name string
}

// StartPod checks that s.Node exists (when the caller may read nodes: without
// it a wrong name shows as a pod never started) and creates the pod. Once it
// returns a PodRun, the caller must Delete it.
func StartPod(ctx context.Context, cs *kubeclient.Client, s PodSpec) (*PodRun, error) {
	p, err := Pod(s)
	if err != nil {
		return nil, err
	}
	switch _, err := cs.GetNode(ctx, s.Node); {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("no node %q in the cluster (kubectl get nodes)", s.Node)
	case apierrors.IsForbidden(err):
		// Optional: see above.
	case err != nil:
		return nil, fmt.Errorf("reading node %q: %w", s.Node, err)
	}
	created, err := cs.CreatePod(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("creating the pod in namespace %s: %w%s", s.Namespace, err, forbidden(err, "create pods"))
	}
	return &PodRun{cs: cs, Namespace: s.Namespace, Name: created.Name}, nil
}

// PodResult is how the pod's selftest container ended.
type PodResult struct {
	// ExitCode is the container's exit code: the selftest's exit status,
	// or another code when it was killed (137 for SIGKILL).
	ExitCode int
	// Reason is the kubelet's reason for the end (OOMKilled, Error, …).
	Reason string
}

// Wait copies the pod's log to stdout as it runs (with asJSON, the report
// to stdout and the progress to stderr, as the selftest on the host writes
// them) and returns how its container ended. When ctx ends first it returns
// ctx.Err() itself; any other error stops the wait on what will not resolve
// by itself: an image that cannot be pulled, no room on the node, a pod the
// kubelet rejected, or a permission the caller lacks.
func (r *PodRun) Wait(ctx context.Context, asJSON bool, stdout, stderr io.Writer) (PodResult, error) {
	logged := false
	for {
		cur, err := r.cs.GetPod(ctx, r.Namespace, r.Name)
		if ctx.Err() != nil {
			return PodResult{}, ctx.Err()
		}
		if err != nil {
			return PodResult{}, fmt.Errorf("reading pod %s: %w%s", r.Name, err, forbidden(err, "get pods"))
		}
		if code, done, err := podOutcome(cur); err != nil {
			return PodResult{}, fmt.Errorf("pod %s: %w", r.Name, err)
		} else if done && logged {
			return PodResult{ExitCode: code, Reason: terminatedReason(cur)}, nil
		} else if started(cur) && !logged {
			if err := r.streamLog(ctx, asJSON, stdout, stderr); err != nil {
				if ctx.Err() != nil {
					return PodResult{}, ctx.Err()
				}
				return PodResult{}, fmt.Errorf("reading the log of pod %s: %w%s", r.Name, err, forbidden(err, "get pods/log"))
			}
			logged = true
			continue
		}
		select {
		case <-ctx.Done():
			return PodResult{}, ctx.Err()
		case <-time.After(podPollInterval):
		}
	}
}

// forbidden names the RBAC permission a Forbidden error lacks.
func forbidden(err error, verbResource string) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf(" (RBAC: the caller needs %s in the namespace)", verbResource)
	}
	return ""
}

// started: the selftest container runs or ran, so it has a log.
func started(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil || s.State.Terminated != nil {
			return true
		}
	}
	return false
}

// terminatedReason is the kubelet's reason for the container's end
// (OOMKilled, Error, …).
func terminatedReason(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return t.Reason
		}
	}
	return ""
}

// podOutcome is the pod's exit status once its container ended (done), or
// the error that keeps it from running: an image that cannot be pulled, no
// room on the node, or a pod the kubelet rejected.
func podOutcome(p *corev1.Pod) (code int, done bool, err error) {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return int(t.ExitCode), true, nil
		}
		if w := s.State.Waiting; w != nil && imageFailures[w.Reason] {
			return 0, false, fmt.Errorf("container %s: %s: %s (image %s; stopped waiting)", s.Name, w.Reason, w.Message, s.Image)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return 0, false, fmt.Errorf("unschedulable: %s", c.Message)
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return 0, false, fmt.Errorf("failed before its container ran: %s: %s", p.Status.Reason, p.Status.Message)
	}
	return 0, false, nil
}

// streamLog copies the pod's log until its container ends. The log has
// the selftest's stdout and stderr in one stream; with asJSON copyLog
// parts them again.
func (r *PodRun) streamLog(ctx context.Context, asJSON bool, stdout, stderr io.Writer) error {
	rc, err := r.cs.PodLogs(ctx, r.Namespace, r.Name, &corev1.PodLogOptions{Follow: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	return copyLog(rc, asJSON, stdout, stderr)
}

// copyLog copies the selftest's log; with asJSON the report (from a line
// "{" to a line "}", which the selftest writes at once at the end) goes to
// stdout and every other line to stderr.
func copyLog(r io.Reader, asJSON bool, stdout, stderr io.Writer) error {
	if !asJSON {
		_, err := io.Copy(stdout, r)
		return err
	}
	br := bufio.NewReader(r)
	inReport := false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			w := stderr
			if line == "{\n" {
				inReport = true
			}
			if inReport {
				w = stdout
			}
			if _, werr := io.WriteString(w, line); werr != nil {
				return werr
			}
			if line == "}\n" {
				inReport = false
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Delete deletes the pod and waits until it is gone (at most
// PodDeleteWait): its selftest has then removed its sandboxes. It uses a
// fresh context, as the run's may be why it is called. The error names the
// RBAC permission when the caller lacks it.
func (r *PodRun) Delete() error {
	ctx, cancel := context.WithTimeout(context.Background(), PodDeleteWait)
	defer cancel()
	if err := r.cs.DeletePod(ctx, r.Namespace, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%w%s", err, forbidden(err, "delete pods"))
	}
	for {
		_, err := r.cs.GetPod(ctx, r.Namespace, r.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still there after %s: %w", PodDeleteWait, ctx.Err())
		case <-time.After(podPollInterval):
		}
	}
}
