package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	podmanifest "github.com/evictd/evictd/deploy/kubernetes/selftest"
	"github.com/evictd/evictd/internal/cli"
)

const selftestKubeHelp = `
Kubernetes mode (--kubernetes): the same test, in a pod on a node of the
cluster. evictd creates the pod of deploy/kubernetes/selftest/pod.yaml (the
manifest 'kubectl apply -k' uses, built into evictd) pinned to --node-name,
with --image, in --namespace, and --config naming the kubelet's
configuration file ON THE NODE (default ` + defaultKubeletConfig + `). The
other selftest flags (--rates, --trials, --max-psi, --json, the eviction
flags) are passed to the pod. It streams the pod's log, exits with the
pod's exit status (the codes above), and deletes the pod — also on Ctrl-C,
SIGTERM or --timeout (then it exits 2). The API server is reached as for
'evictd run --kubernetes': --kubeconfig, or the in-cluster ServiceAccount.
The caller needs create, get and delete on pods and get on pods/log in
--namespace (and get on nodes, optionally, to be told early that a node
does not exist); docs/selftest.md.

  evictd selftest --kubernetes --kubeconfig ~/.kube/config --node-name worker-1
`

// selftestKubeFlags are selftest's Kubernetes-mode flags.
type selftestKubeFlags struct {
	on                             *bool
	kubeconfig, node, ns, image    *string
	timeout                        *time.Duration
	defaultNamespace, defaultImage string
}

// kubeOnlyFlags are the flags that configure the client side of
// --kubernetes and are not passed to the pod (--config is, rewritten to
// the path the pod mounts the node's file at).
var kubeOnlyFlags = map[string]bool{"kubernetes": true, "kubeconfig": true, "node-name": true, "namespace": true, "image": true, "timeout": true, "config": true}

func registerSelftestKubeFlags(fs *pflag.FlagSet) *selftestKubeFlags {
	ns, image := manifestDefaults()
	return &selftestKubeFlags{
		on:         fs.Bool("kubernetes", false, "run the test in a pod on --node-name of a Kubernetes cluster (docs/selftest.md)"),
		kubeconfig: fs.String("kubeconfig", "", `Kubernetes mode: kubeconfig file; "" uses the in-cluster ServiceAccount`),
		node:       fs.String("node-name", os.Getenv("NODE_NAME"), "Kubernetes mode: the node to test (default $NODE_NAME)"),
		ns:         fs.String("namespace", ns, "Kubernetes mode: the namespace of the pod"),
		image:      fs.String("image", image, "Kubernetes mode: the evictd image the pod runs"),
		timeout:    fs.Duration("timeout", 10*time.Minute, "Kubernetes mode: give up (and delete the pod) after this long"),
	}
}

// manifestDefaults are the namespace and image kustomization.yaml gives
// the pod, as kubectl apply -k does.
func manifestDefaults() (namespace, image string) {
	var k struct {
		Namespace string `json:"namespace"`
		Images    []struct {
			Name, NewName, NewTag string
		} `json:"images"`
	}
	// Embedded and checked by TestSelftestKubePod: it parses.
	if err := yaml.Unmarshal(podmanifest.KustomizationYAML, &k); err != nil || len(k.Images) == 0 {
		panic(fmt.Sprintf("deploy/kubernetes/selftest/kustomization.yaml: %v, %d images", err, len(k.Images)))
	}
	return k.Namespace, k.Images[0].NewName + ":" + k.Images[0].NewTag
}

// check reports a Kubernetes-mode flag given without --kubernetes, or
// --kubernetes without a node.
func (k *selftestKubeFlags) check(fs *pflag.FlagSet) error {
	var stray []string
	fs.Visit(func(f *pflag.Flag) {
		if kubeOnlyFlags[f.Name] && f.Name != "kubernetes" && f.Name != "config" {
			stray = append(stray, "--"+f.Name)
		}
	})
	switch {
	case !*k.on && len(stray) > 0:
		return fmt.Errorf("%s: only with --kubernetes", strings.Join(stray, ", "))
	case !*k.on:
		return nil
	case *k.node == "":
		return errors.New("--kubernetes: the node name is empty: set --node-name or NODE_NAME")
	case *k.ns == "":
		return errors.New("--namespace is empty")
	case *k.image == "":
		return errors.New("--image is empty")
	case *k.timeout <= 0:
		return fmt.Errorf("--timeout %s: want a positive duration", *k.timeout)
	}
	return nil
}

// podArgs are the selftest flags the user set that the pod's selftest
// takes, as --name=value.
func podArgs(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		if !kubeOnlyFlags[f.Name] {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// selftestPod is pod.yaml's pod for one run: on node, in namespace, with
// image, reading the kubelet configuration at kubeletConfig on the node,
// with extra selftest arguments; named by the API server
// (evictd-selftest-xxxxx) so that runs do not collide.
func selftestPod(node, namespace, image, kubeletConfig string, extra []string) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(podmanifest.PodYAML, &p); err != nil {
		return nil, fmt.Errorf("deploy/kubernetes/selftest/pod.yaml: %w", err)
	}
	p.GenerateName, p.Name = p.Name+"-", ""
	p.Namespace = namespace
	p.Spec.NodeName = node
	if len(p.Spec.Containers) != 1 {
		return nil, fmt.Errorf("deploy/kubernetes/selftest/pod.yaml: %d containers, want 1", len(p.Spec.Containers))
	}
	c := &p.Spec.Containers[0]
	c.Image = image
	c.Args = append(c.Args, extra...)
	found := false
	for i, v := range p.Spec.Volumes {
		if v.Name == "kubelet-config" && v.HostPath != nil {
			p.Spec.Volumes[i].HostPath.Path = kubeletConfig
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

// podDeleteWait bounds the wait for the deleted pod to be gone: its 30 s
// grace period, in which the selftest removes its sandboxes, and some.
const podDeleteWait = 90 * time.Second

// imageFailures are the container waiting reasons after which the pod will
// not run without someone's help: waiting on is pointless.
var imageFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

func runSelftestKube(k *selftestKubeFlags, kubeletConfig string, extra []string, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd selftest --kubernetes: "+format+"\n", a...)
		return cli.ExitError
	}
	if kubeletConfig == "" {
		kubeletConfig = defaultKubeletConfig
	}
	rc, err := restConfig(*k.kubeconfig)
	if err != nil {
		return fail("%v", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail("%v", err)
	}
	p, err := selftestPod(*k.node, *k.ns, *k.image, kubeletConfig, extra)
	if err != nil {
		return fail("%v", err)
	}
	sig, stop := cleanupContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sig, *k.timeout)
	defer cancel()

	switch _, err := cs.CoreV1().Nodes().Get(ctx, *k.node, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
		return fail("no node %q in the cluster (kubectl get nodes)", *k.node)
	case apierrors.IsForbidden(err):
		// Optional: without it a wrong name shows as a pod never started.
	case err != nil:
		return fail("reading node %q: %v", *k.node, err)
	}
	pods := cs.CoreV1().Pods(*k.ns)
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fail("creating the pod in namespace %s: %v%s", *k.ns, err, forbidden(err, "create pods"))
	}
	name := created.Name
	fmt.Fprintf(stderr, "evictd selftest --kubernetes: pod %s/%s on node %s, image %s\n", *k.ns, name, *k.node, *k.image)
	defer func() {
		// A fresh context: ctx may be why we are here.
		dctx, dcancel := context.WithTimeout(context.Background(), podDeleteWait)
		defer dcancel()
		if err := deletePod(dctx, cs, *k.ns, name); err != nil {
			fmt.Fprintf(stderr, "evictd selftest --kubernetes: deleting pod %s/%s: %v%s\n", *k.ns, name, err, forbidden(err, "delete pods"))
			return
		}
		fmt.Fprintf(stderr, "evictd selftest --kubernetes: pod %s/%s deleted\n", *k.ns, name)
	}()

	interrupted := func() int {
		if sig.Err() != nil {
			return fail("interrupted; deleting the pod (its selftest removes its sandboxes on SIGTERM)")
		}
		return fail("no result after --timeout %s; deleting the pod", *k.timeout)
	}
	logged := false
	for {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if ctx.Err() != nil {
			return interrupted()
		}
		if err != nil {
			return fail("reading pod %s: %v%s", name, err, forbidden(err, "get pods"))
		}
		if code, done, err := podOutcome(cur); err != nil {
			return fail("pod %s: %v", name, err)
		} else if done && logged {
			if code != cli.ExitOK && code != cli.ExitFindings && code != cli.ExitError {
				// Not the selftest's own status: killed (137 is
				// SIGKILL, e.g. the container's OOM kill).
				return fail("pod %s: the container ended with exit code %d (%s)", name, code, terminatedReason(cur))
			}
			return code
		} else if started(cur) && !logged {
			if err := streamLog(ctx, cs, *k.ns, name, asJSON, stdout, stderr); err != nil {
				if ctx.Err() != nil {
					return interrupted()
				}
				return fail("reading the log of pod %s: %v%s", name, err, forbidden(err, "get pods/log"))
			}
			logged = true
			continue
		}
		select {
		case <-ctx.Done():
			return interrupted()
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
// the selftest's stdout and stderr in one stream; with --json copyLog
// parts them again.
func streamLog(ctx context.Context, cs kubernetes.Interface, ns, name string, asJSON bool, stdout, stderr io.Writer) error {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
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

// deletePod deletes the pod and waits until it is gone: its selftest has
// then removed its sandboxes.
func deletePod(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	pods := cs.CoreV1().Pods(ns)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still there after %s: %w", podDeleteWait, ctx.Err())
		case <-time.After(podPollInterval):
		}
	}
}
