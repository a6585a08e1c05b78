package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

const runKubeHelp = `
Kubernetes mode (--kubernetes): evictd runs beside the kubelet on every node
(deploy/kubernetes/, docs/kubernetes.md). It decides on the pods of this node
(an informer scoped to --node-name) and evicts through the Eviction API with
the kubelet's grace period, DisruptionTarget condition, Event and message.
The thresholds are the kubelet's own, read as the kubelet reads them
(docs/kubelet-config.md): its config file (--config; default the kubelet's
own --config where visible, else ` + kube.DefaultKubeletConfig + `), its drop-ins
(--config-dir; default the kubelet's own where visible) and the eviction
flags on its command line (from /proc), with evictd's eviction flags on top.
A Node whose kubelet is not a v1.37 release is warned about. --shadow decides and records only,
and logs for every pod the kubelet evicts whether evictd had decided the same
pod and how much earlier.

--secure-metrics-addr serves /metrics over HTTPS for a Prometheus outside the
node (the DaemonSet: the node's IP, port 9848), each request authenticated
and authorized with the API server as the kubelet's own /metrics is: a bearer
token (TokenReview) whose user may get the non-resource URL /metrics
(SubjectAccessReview; kube-prometheus' Prometheus may, the chart ships the
evictd-metrics-reader ClusterRole). Without --tls-cert-file and
--tls-private-key-file the certificate is self-signed, made at start
(docs/monitoring.md).
`

// kubeFlags are run's Kubernetes-mode flags.
type kubeFlags struct {
	on, shadow                                       *bool
	node, kubeconfig, summary, kubeletCA, podsCgroup *string
	secureMetrics, tlsCert, tlsKey                   *string
	pdbWait, localDeadline                           *time.Duration
}

func registerKubeFlags(fs *pflag.FlagSet) *kubeFlags {
	return &kubeFlags{
		on:            fs.Bool("kubernetes", false, "Kubernetes mode: evict this node's pods through the API server (docs/kubernetes.md)"),
		shadow:        fs.Bool("shadow", false, "Kubernetes mode: decide and record only, and compare with the kubelet's own evictions"),
		node:          fs.String("node-name", os.Getenv("NODE_NAME"), "Kubernetes mode: this node's name (default $NODE_NAME)"),
		kubeconfig:    fs.String("kubeconfig", "", `Kubernetes mode: kubeconfig file; "" uses the in-cluster ServiceAccount`),
		summary:       fs.String("kubelet-summary", "", `Kubernetes mode: the kubelet's /stats/summary URL for disk stats; "" finds it in the Node object, "none" turns disk thresholds off`),
		kubeletCA:     fs.String("kubelet-ca", "", "Kubernetes mode: CA file of the kubelet's serving certificate (default: not verified)"),
		podsCgroup:    fs.String("pods-cgroup", "", "Kubernetes mode: the kubelet's pods cgroup relative to the memory hierarchy root (default: kubepods.slice or kubepods, whichever exists)"),
		localDeadline: fs.Duration("local-deadline", kube.DefaultLocalDeadline, "Kubernetes mode: when a hard-threshold eviction's pod still runs this long after its grace period (the kubelet wedged, or the API server unreachable), evictd kills the pod's cgroup itself; negative: never"),
		secureMetrics: fs.String("secure-metrics-addr", "", `Kubernetes mode: address for /metrics over HTTPS, authenticated and authorized with the API server (TokenReview, SubjectAccessReview for get /metrics), e.g. the node's IP and 9848; "" to disable`),
		tlsCert:       fs.String("tls-cert-file", "", "Kubernetes mode: serving certificate of --secure-metrics-addr (PEM; default: self-signed, made at start)"),
		tlsKey:        fs.String("tls-private-key-file", "", "Kubernetes mode: private key of --tls-cert-file (PEM)"),
		pdbWait:       fs.Duration("pdb-wait", kube.DefaultPDBWait, "Kubernetes mode: how long a soft-threshold eviction refused by a PodDisruptionBudget is retried before the pod is deleted; negative: never override a PDB"),
	}
}

// runShared are the run flags both modes use.
type runShared struct {
	configPath, configDir, stateFile, decisionLog, metricsAddr string
	log                                                        *slog.Logger
	logw                                                       *agent.AsyncWriter // log's queue (nil in tests that pass no run logger)
	dryRun, check, noGrowthStop, keepStartupPages              bool
	interval                                                   time.Duration
	wakeups                                                    agent.WakeupOptions
	ev                                                         *load.EvictionFlags
	outputs                                                    *outputFlags
	profile                                                    policy.Profile
}

// options are the wiring's options both modes take alike, for the policy
// cfg; the outputs are opened later (startRun), and the state file is set
// only where the run changes something.
func (sh runShared) options(cfg policy.Config) agent.Options {
	o := agent.Options{Policy: cfg, Wakeups: sh.wakeups, Interval: sh.interval, DryRun: sh.dryRun || sh.check,
		NoGrowthStop: sh.noGrowthStop, Log: sh.log, StopTimeout: sh.outputs.stop()}
	if !sh.keepStartupPages {
		o.Observed = agent.ReleaseStartupPages(sh.log)
	}
	return o
}

func runKube(kf *kubeFlags, sh runShared, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd run --kubernetes: "+format+"\n", a...)
		return cli.ExitError
	}
	log := sh.log
	if *kf.node == "" {
		return fail("the node name is empty: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
	}
	pcfg, kc, notes, err := kube.PolicyConfig(*kf.node, sh.configPath, sh.configDir, sh.ev)
	if err != nil {
		return fail("%v", err)
	}
	pcfg.Profile = sh.profile
	source := kc.Describe()
	if err := checkListenAddr("--secure-metrics-addr", *kf.secureMetrics, sh.check); err != nil {
		return fail("%v", err)
	}
	if (*kf.tlsCert == "") != (*kf.tlsKey == "") {
		return fail("--tls-cert-file and --tls-private-key-file go together")
	}
	rc, err := kube.RestConfig(*kf.kubeconfig)
	if err != nil {
		return fail("%v", err)
	}
	for _, n := range notes {
		log.Log(context.Background(), n.Level, n.Msg, n.Args...)
	}
	o := kube.Options{
		Options: sh.options(pcfg),
		Rest:    rc, Node: *kf.node,
		Self:              kube.Self{UID: types.UID(os.Getenv("POD_UID")), Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")},
		Collect:           collect.Config{PodsCgroup: *kf.podsCgroup},
		KubeletSummaryURL: *kf.summary, KubeletCA: *kf.kubeletCA, PDBWait: *kf.pdbWait, LocalDeadline: *kf.localDeadline,
		Shadow: *kf.shadow,
	}
	if !o.DryRun && !o.Shadow {
		o.StateFile = sh.stateFile
	}
	if sh.check {
		ctx, stop := runSignals()
		defer stop()
		n, err := kube.New(ctx, o)
		if err != nil {
			return fail("%v", err)
		}
		defer n.Close()
		pods, _ := n.Observer.Pods(ctx) // active, the vanished excluded, as a synchronize sees them
		disk := n.DiskStats
		if disk == "" {
			disk = "off"
		}
		fmt.Fprintf(stdout, "configuration OK: %d threshold(s) from %s, node %s, pods cgroup %s, %d active pod(s), disk stats %s, profile %s\n",
			len(n.Engine().Thresholds()), source, o.Node, n.Collector.PodsCgroup(), len(pods), disk, pcfg.Profile)
		writeKubeletFacts(stdout, kc, n.KubeletVersion)
		for _, t := range n.Engine().Thresholds() {
			fmt.Fprintf(stdout, "  threshold %s\n", t.String())
		}
		return cli.ExitOK
	}
	l, err := startRun(sh, sh.metricsAddr != "" || *kf.secureMetrics != "")
	if err != nil {
		return fail("%v", err)
	}
	defer l.Close()
	o.DecisionLog, o.Metrics = l.DecisionLog, l.Metrics
	n, err := kube.New(l.Ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	if *kf.secureMetrics != "" {
		auth := &kube.MetricsAuth{Client: n.Evictor.Client, Path: "/metrics", Log: log}
		mux := http.NewServeMux()
		mux.Handle("/metrics", auth.Wrap(promhttp.HandlerFor(o.Metrics.Registry, promhttp.HandlerOpts{})))
		srv, err := kube.ServeSecure(*kf.secureMetrics, mux, *kf.tlsCert, *kf.tlsKey)
		if err != nil {
			n.Close()
			return fail("--secure-metrics-addr %s: %v", *kf.secureMetrics, err)
		}
		l.onClose(func() { srv.Close() })
	}
	if err := l.run(n, sh.metricsAddr, "evictd running in Kubernetes mode", "node", o.Node, "pods_cgroup", n.Collector.PodsCgroup(),
		"thresholds", thresholdTexts(n.Engine().Thresholds()), "config", source, "wakeups", n.Wakeups.Active(),
		"disk_stats", n.DiskStats, "dry_run", sh.dryRun, "shadow", *kf.shadow, "pdb_wait", *kf.pdbWait); err != nil {
		return fail("%v", err)
	}
	return cli.ExitOK
}

// writeKubeletFacts prints, for --check, what evictd learnt of the kubelet:
// its command line, the files it merged, the release it is.
func writeKubeletFacts(w io.Writer, kc *kubeletconfig.Config, version string) {
	if p := kc.Process; p != nil {
		fmt.Fprintf(w, "  kubelet pid %d: --config %s, --config-dir %s, eviction flags %s\n", p.PID, cli.Dash(p.ConfigFile), cli.Dash(p.ConfigDir), cli.Dash(strings.Join(p.EvictionArgs, " ")))
	} else {
		fmt.Fprintln(w, "  kubelet command line: not visible")
	}
	for _, f := range kc.Files {
		fmt.Fprintf(w, "  read %s\n", f)
	}
	switch err := kubeletconfig.CheckKubeletVersion(version); {
	case version == "":
		fmt.Fprintln(w, "  kubelet version: unknown (the Node object was not readable)")
	case err != nil:
		fmt.Fprintf(w, "  kubelet version %s: WARNING: %v\n", version, err)
	default:
		fmt.Fprintf(w, "  kubelet version %s: evictd implements its eviction decisions (%s)\n", version, policy.KubeletVersion)
	}
}
