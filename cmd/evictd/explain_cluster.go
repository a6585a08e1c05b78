package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/fleet"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/load"
)

// kubectlPluginName is the name kubectl looks for on PATH to run
// "kubectl evictd": evictd installed (or linked) under it runs
// "explain --cluster".
const kubectlPluginName = "kubectl-evictd"

const explainClusterHelp = `
Explains the whole cluster, or the nodes a label selector picks (or those
named): for each node it reads the kubelet's Summary and running
configuration (/configz) through the API server's node proxy and the node's
pods, with your own credentials (kubeconfig), runs the same engine as
"evictd explain", and prints one row: the node's Ready and pressure
conditions, the threshold nearest to being met and its margin, the trend of
that signal over a short sampling window and when it crosses at that rate,
the pod that would go first and why, and whether an evictd agent runs there.
Nodes nearest to eviction come first. -o json prints everything, for
scripts.

Nodes are read --concurrency at a time, each call under --timeout; a node
that cannot be read shows its error in its row and never fails the others.

The API server's node proxy refuses a kubelet whose address is not a global
unicast IP (loopback or link-local, e.g. a single-node test cluster whose
node is 127.0.0.1): "address not allowed". With --kubelet-direct auto (the
default) such a node's kubelet is then asked directly at the address and
port its Node object publishes, with the same credentials, its serving
certificate verified against the cluster's CA (--kubelet-ca FILE for another
CA; --kubelet-insecure to skip the check). The row says which path was used.

Reading /configz needs nodes/proxy (through the proxy or the kubelet), the
Summary nodes/proxy or nodes/stats, and listing pods and nodes. The
MemAvailable of a node is not in the kubelet's Summary, so the cluster view
shows the kubelet's memory.available only.

As a kubectl plugin: link evictd as kubectl-evictd on your PATH (make build
makes bin/kubectl-evictd); "kubectl evictd [flags] [NODE...]" then runs this.

Example:
  evictd explain --cluster
  evictd explain --cluster -l node-role.kubernetes.io/worker= -o json
  evictd explain --cluster --window 30s worker-1 worker-2
  kubectl evictd --context prod --profile extended
`

// clusterArg reports whether explain's arguments ask for --cluster.
func clusterArg(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "cluster" {
			continue
		}
		if !hasVal {
			return true
		}
		on, err := strconv.ParseBool(val)
		return err == nil && on
	}
	return false
}

// runKubectlPlugin is "kubectl evictd": explain --cluster.
func runKubectlPlugin(args []string, stdout, stderr io.Writer) int {
	return runExplainCluster("kubectl evictd", args, stdout, stderr)
}

func runExplainCluster(name string, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("explain", "--cluster [flags] [NODE...]", explainClusterHelp, stdout, stderr)
	if name == "kubectl evictd" {
		fs.Usage = func() {
			w := fs.Output()
			fmt.Fprintf(w, "Usage: kubectl evictd [flags] [NODE...]\n\n%s\n\nFlags:\n", strings.TrimSpace(explainClusterHelp))
			cli.WriteFlagUsages(w, fs)
		}
	}
	fs.Bool("cluster", name == "kubectl evictd", "explain every node of the cluster (or those selected) through the API server")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	kcontext := fs.String("context", "", "kubeconfig context (default: the current context)")
	selector := fs.StringP("selector", "l", "", "label selector for the nodes, e.g. node-role.kubernetes.io/worker=")
	concurrency := fs.Int("concurrency", fleet.DefaultConcurrency, "nodes read at once")
	timeout := fs.Duration("timeout", fleet.DefaultTimeout, "bound of each call for one node")
	window := fs.Duration("window", fleet.DefaultWindow, "sampling window for each node's trend (the kubelet refreshes its memory stats about every 10s); 0 for one sample and no trend")
	samples := fs.Int("samples", fleet.DefaultSamples, "Summaries taken across the window")
	direct := fs.String("kubelet-direct", string(fleet.DirectAuto), "ask a kubelet directly: auto (when the API server's proxy refuses its address), never, always")
	kubeletCA := fs.String("kubelet-ca", "", "CA file for the kubelets' serving certificates on direct calls (default: the cluster's CA from the kubeconfig)")
	insecure := fs.Bool("kubelet-insecure", false, "do not verify the kubelets' serving certificates on direct calls (your credentials then go to whatever answers at the node's address)")
	out := fs.StringP("output", "o", "table", "output format: table or json")
	profile := cli.RegisterProfileFlag(fs)
	evFlags := load.RegisterEvictionFlags(fs)
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, name+": "+format+"\n", a...)
		return cli.ExitError
	}
	if *out != "table" && *out != "json" {
		return fail("-o %q: want table or json", *out)
	}
	d, err := fleet.ParseDirect(*direct)
	if err != nil {
		return fail("--kubelet-direct %v", err)
	}
	if *concurrency <= 0 || *timeout <= 0 || *samples <= 0 || *window < 0 {
		return fail("--concurrency, --timeout and --samples must be positive, --window not negative")
	}
	if *insecure && *kubeletCA != "" {
		return fail("--kubelet-ca and --kubelet-insecure exclude each other")
	}
	rc, err := fleet.RestConfig(*kubeconfig, *kcontext)
	if err != nil {
		return fail("%v", err)
	}
	client, err := kubeclient.New(rc)
	if err != nil {
		return fail("API client: %v", err)
	}
	w := *window
	if w == 0 {
		w = -1 // one sample
	}
	o := fleet.Options{Client: client, Rest: rc, Selector: *selector, Names: fs.Args(), Profile: profile.Profile(),
		Concurrency: *concurrency, Timeout: *timeout, Window: w, Samples: *samples,
		Direct: d, KubeletCA: *kubeletCA, KubeletInsecure: *insecure}
	o.Flags = evFlags
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := fleet.Inspect(ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	if *out == "json" {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "evictd: writing JSON:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	rep.WriteTable(stdout)
	return cli.ExitOK
}
