package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/hostmode/selftest"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/kubeclient"
)

const selftestKubeHelp = `
Kubernetes mode (--kubernetes): the same test, in a pod on a node of the
cluster. evictd creates the pod of deploy/kubernetes/selftest/pod.yaml (the
manifest 'kubectl apply -k' uses, built into evictd) pinned to --node-name,
with --image, in --namespace, and --config naming the kubelet's
configuration file ON THE NODE (default ` + kube.DefaultKubeletConfig + `). The
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
	ns, image := selftest.ManifestDefaults()
	return &selftestKubeFlags{
		on:         fs.Bool("kubernetes", false, "run the test in a pod on --node-name of a Kubernetes cluster (docs/selftest.md)"),
		kubeconfig: fs.String("kubeconfig", "", `Kubernetes mode: kubeconfig file; "" uses the in-cluster ServiceAccount`),
		node:       fs.String("node-name", os.Getenv("NODE_NAME"), "Kubernetes mode: the node to test (default $NODE_NAME)"),
		ns:         fs.String("namespace", ns, "Kubernetes mode: the namespace of the pod"),
		image:      fs.String("image", image, "Kubernetes mode: the evictd image the pod runs"),
		timeout:    fs.Duration("timeout", 10*time.Minute, "Kubernetes mode: give up (and delete the pod) after this long"),
	}
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

// runSelftestKube runs the self-test in a pod on the node (selftest.StartPod),
// saying what it does on stderr, and exits with the pod's exit status.
func runSelftestKube(k *selftestKubeFlags, kubeletConfig string, extra []string, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd selftest --kubernetes: "+format+"\n", a...)
		return cli.ExitError
	}
	if kubeletConfig == "" {
		kubeletConfig = kube.DefaultKubeletConfig
	}
	rc, err := kube.RestConfig(*k.kubeconfig)
	if err != nil {
		return fail("%v", err)
	}
	cs, err := kubeclient.New(rc)
	if err != nil {
		return fail("%v", err)
	}
	spec := selftest.PodSpec{Node: *k.node, Namespace: *k.ns, Image: *k.image, KubeletConfig: kubeletConfig, Args: extra}
	sig, stop := cleanupContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sig, *k.timeout)
	defer cancel()

	pod, err := selftest.StartPod(ctx, cs, spec)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stderr, "evictd selftest --kubernetes: pod %s/%s on node %s, image %s\n", pod.Namespace, pod.Name, *k.node, *k.image)
	defer func() {
		if err := pod.Delete(); err != nil {
			fmt.Fprintf(stderr, "evictd selftest --kubernetes: deleting pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
			return
		}
		fmt.Fprintf(stderr, "evictd selftest --kubernetes: pod %s/%s deleted\n", pod.Namespace, pod.Name)
	}()

	res, err := pod.Wait(ctx, asJSON, stdout, stderr)
	stopped := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) // a signal or --timeout
	switch {
	case stopped && sig.Err() != nil:
		return fail("interrupted; deleting the pod (its selftest removes its sandboxes on SIGTERM)")
	case stopped:
		return fail("no result after --timeout %s; deleting the pod", *k.timeout)
	case err != nil:
		return fail("%v", err)
	case res.ExitCode != cli.ExitOK && res.ExitCode != cli.ExitFindings && res.ExitCode != cli.ExitError:
		// Not the selftest's own status: killed (137 is SIGKILL, e.g.
		// the container's OOM kill).
		return fail("pod %s: the container ended with exit code %d (%s)", pod.Name, res.ExitCode, res.Reason)
	}
	return res.ExitCode
}
