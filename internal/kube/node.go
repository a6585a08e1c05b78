package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/policy"
)

// SummaryOff disables the kubelet's Summary (Options.KubeletSummaryURL).
const SummaryOff = "none"

// Options configure evictd on a Kubernetes node.
type Options struct {
	Rest   *rest.Config
	Client *kubeclient.Client // nil: built from Rest
	Node   string
	Self   Self
	// Options are what host mode takes too (the policy, the wake-ups, the
	// outputs, the stop); their DryRun decides and records only.
	agent.Options
	// Collect is the collector's configuration (NodeName and the naming
	// hooks are set here; PodsCgroup "" detects kubepods.slice or kubepods).
	Collect collect.Config
	// KubeletSummaryURL: "" finds the kubelet's address and port in the
	// Node object; SummaryOff disables disk stats.
	KubeletSummaryURL string
	KubeletCA         string // CA of the kubelet's serving certificate ("": not verified)
	PDBWait           time.Duration
	// LocalDeadline: how long after an immediate eviction's grace period
	// evictd kills the pod's cgroup itself when it still runs (0:
	// DefaultLocalDeadline; negative: never).
	LocalDeadline time.Duration
	// Shadow is DryRun that also compares with the kubelet's own
	// evictions.
	Shadow bool
	// PodsSyncTimeout bounds the informer's first list (0: 60 s).
	PodsSyncTimeout time.Duration
	// RecordTimeout bounds each write of an Event or a DisruptionTarget
	// condition, made off the loop (0: DefaultCallTimeout).
	RecordTimeout time.Duration
}

// Node is an agent wired to a Kubernetes node.
type Node struct {
	*agent.Agent
	Pods      *Pods
	Stats     *Stats
	Observer  *Observer // the agent's pods and Summary, one listing each
	Evictor   *Evictor
	Wakeups   *agent.Wakeups
	Shadow    *Shadow // nil unless shadow mode
	Collector *collect.Collector
	// DiskStats says where disk stats come from ("" when they are off).
	DiskStats string
	// Events and Conditions write the Events and the DisruptionTarget
	// conditions off the loop.
	Events, Conditions *Recorder
	// KubeletVersion is the Node's status.nodeInfo.kubeletVersion ("" when
	// the Node could not be read).
	KubeletVersion string
}

// New connects to the API server, lists the node's pods, and wires the
// collector, the evictor, the wake-ups and the engine. Nothing is changed
// until Run.
func New(ctx context.Context, o Options) (*Node, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Node == "" {
		return nil, errors.New("the node name is empty: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
	}
	client := o.Client
	if client == nil {
		var err error
		if client, err = kubeclient.New(o.Rest); err != nil {
			return nil, fmt.Errorf("API client: %w", err)
		}
	}
	dry := o.DryRun || o.Shadow
	n := &Node{}
	st := &Stats{Log: o.Log}
	cc := o.Collect
	cc.NodeName = o.Node
	cc.ProfileStats = agent.NeedsProfileStats(o.Policy.Profile)
	col, err := st.NewCollector(cc)
	if err != nil {
		return nil, err
	}
	if col.PodsCgroup() == "" {
		return nil, collect.ErrNoPodsCgroup
	}
	if in, err := host.InInitPIDNamespace("/proc"); err == nil && !in {
		o.Log.Warn("evictd is not in the host's PID namespace: other pods' cgroup.procs read empty here, so their process counts are 0 (the PID ranking) and the local fallback finds nothing to kill; run evictd's pod with hostPID: true, as deploy/kubernetes/ does")
	}
	n.Collector, n.Stats = col, st
	n.KubeletVersion = kubeletVersion(ctx, client, o.Node, o.Log)

	fs := policy.Filesystems{}
	if o.KubeletSummaryURL != SummaryOff {
		url := o.KubeletSummaryURL
		if url == "" {
			if url, err = KubeletSummaryURL(ctx, client, o.Node); err != nil {
				o.Log.Warn("cannot find the kubelet's address; disk thresholds will not be evaluated", "err", err)
			}
		}
		if url != "" {
			ks, err := NewKubeletSummary(o.Rest, url, o.KubeletCA)
			if err != nil {
				return nil, err
			}
			st.Disk, n.DiskStats = ks, url
			if s, err := ks.Fetch(ctx); err == nil {
				fs = filesystemsOf(s)
			} else {
				o.Log.Warn("the kubelet's Summary is not readable now; assuming one filesystem for nodefs and imagefs", "err", err)
			}
		}
	}
	eng, err := policy.NewEngine(o.Policy, fs)
	if err != nil {
		return nil, err
	}

	syncTimeout := o.PodsSyncTimeout
	if syncTimeout <= 0 {
		syncTimeout = syncTimeoutDefault
	}
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	pods, err := NewPods(sctx, client, o.Node, o.Self)
	if err != nil {
		return nil, err
	}
	wired := false
	defer func() {
		if !wired {
			pods.Close()
		}
	}()
	n.Pods = pods
	obs := NewObserver(pods, st)
	n.Observer = obs

	memRoot, version := col.MemoryRoot()
	v2 := version == 2
	wc := agent.WakeupConfig{MemoryRoot: memRoot, PodsCgroup: filepath.Join(memRoot, col.PodsCgroup()), V2: v2}
	o.Wakeups.Apply(&wc, eng.Thresholds())
	wc.ReadPodsMemory = func() (uint64, error) {
		m, err := col.ReadPodsCgroupMemory()
		return m.WorkingSet, err
	}
	wc.Log = o.Log
	wc.Arm = !o.NoGrowthStop && !dry
	wk, err := agent.NewWakeups(wc)
	if err != nil {
		return nil, err
	}
	n.Wakeups = wk

	// One killer for the holds and the local kill, so that the kill of a
	// held pod knows it is held (on v1 it then needs no freezer).
	k := actuate.NewKiller(col.Hierarchy(), memRoot, v2, o.Log)
	k.DryRun = dry
	k.ThawLeft(filepath.Join(memRoot, col.PodsCgroup()))
	n.Events = NewRecorder("Events", agent.OutputEvents, eventQueue, o.RecordTimeout, o.Metrics, o.Log)
	n.Conditions = NewRecorder("DisruptionTarget conditions", agent.OutputConditions, conditionQueue, o.RecordTimeout, o.Metrics, o.Log)
	n.Evictor = &Evictor{Client: client, Node: o.Node, PDBWait: o.PDBWait, DryRun: dry, Log: o.Log, Killer: k, PodDir: st.PodDir,
		Events: n.Events, Conditions: n.Conditions}
	if !dry && o.LocalDeadline >= 0 {
		n.Evictor.Local = &LocalFallback{Killer: k, Cgroup: st.PodCgroup, Deadline: o.LocalDeadline, Killed: pods.Exclude}
	}
	var holder agent.Holder = n.Evictor
	if o.NoGrowthStop {
		holder = nil
	}
	events := &NodeEvents{Client: client, Node: o.Node, DryRun: dry, Events: n.Events}
	if o.Shadow {
		n.Shadow = &Shadow{Log: o.Log, Wake: wk.Sink()}
		if err := n.Shadow.Watch(pods.Informer()); err != nil {
			wk.Close()
			closeRecorders(0, n.Events, n.Conditions)
			return nil, err
		}
	}
	if o.Metrics != nil {
		observed := o.Metrics.KubeletEvictionsObserved()
		ke := &kubeletEvictions{ours: n.Evictor.Evicted, seen: func(*v1.Pod) { observed.Inc() }}
		if err := ke.watch(pods.Informer()); err != nil {
			wk.Close()
			closeRecorders(0, n.Events, n.Conditions)
			return nil, err
		}
	}
	onRecord := func(rec agent.Record) {
		events.Record(rec)
		if n.Shadow != nil {
			n.Shadow.Record(rec)
		}
	}
	memRec, hostMem := agent.ProfileEdges(o.Policy.Profile, memRoot, wc.PodsCgroup, v2, dry, cc.ProcRoot)
	if o.Policy.Profile.ReclaimFirst && !v2 {
		o.Log.Warn("profile reclaim-first: memory.reclaim is cgroup v2 only; on this cgroup v1 node memory evictions happen as the kubelet's")
	}
	a, err := agent.New(agent.Config{
		Engine: eng, Observer: obs, Evictor: n.Evictor, Holder: holder, OOM: obs, MemoryReclaimer: memRec, Host: hostMem,
		Waker: wk, Updater: wk, Interval: o.Interval, Log: o.Log,
		DecisionLog: o.DecisionLog, Metrics: o.Metrics, StateFile: o.StateFile, DryRun: dry, OnRecord: onRecord,
		StopTimeout: o.StopTimeout, Observed: o.Observed,
	})
	if err != nil {
		wk.Close()
		closeRecorders(0, n.Events, n.Conditions)
		return nil, err
	}
	n.Agent = a
	wired = true
	return n, nil
}

// syncTimeoutDefault bounds the first list of the node's pods.
const syncTimeoutDefault = 60 * time.Second

// Run runs the loop until ctx is done, then stops the informer and the
// notifiers.
func (n *Node) Run(ctx context.Context) error {
	defer n.Wakeups.Close()
	defer n.Pods.Close()
	defer closeRecorders(agent.DefaultFlushTimeout, n.Events, n.Conditions)
	return n.Agent.Run(ctx)
}

// Close releases what New started, for a Node that is not Run.
func (n *Node) Close() {
	n.Wakeups.Close()
	n.Pods.Close()
	closeRecorders(agent.DefaultFlushTimeout, n.Events, n.Conditions)
}

// filesystemsOf tells the kubelet's filesystem layout from its Summary: the
// image filesystem is dedicated when its capacity differs from the node
// filesystem's, and the container filesystem split when it differs from the
// image filesystem's. (The kubelet compares devices, which the Summary does
// not carry; two distinct filesystems of exactly equal size and inode count
// would be taken for one.)
func filesystemsOf(s *statsapi.Summary) policy.Filesystems {
	var fs policy.Filesystems
	if s.Node.Runtime == nil || s.Node.Fs == nil {
		return fs
	}
	same := func(a, b *statsapi.FsStats) bool {
		return a == nil || b == nil || (eqp(a.CapacityBytes, b.CapacityBytes) && eqp(a.Inodes, b.Inodes))
	}
	fs.DedicatedImageFs = !same(s.Node.Fs, s.Node.Runtime.ImageFs)
	fs.SplitContainerFs = fs.DedicatedImageFs && !same(s.Node.Runtime.ImageFs, s.Node.Runtime.ContainerFs)
	return fs
}

func eqp(a, b *uint64) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

// kubeletVersion reads the Node's kubelet version and warns once when it is
// not a release whose eviction decisions evictd implements.
func kubeletVersion(ctx context.Context, client *kubeclient.Client, node string, log *slog.Logger) string {
	ctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	n, err := client.GetNode(ctx, node)
	if err != nil {
		log.Info("cannot read the Node object: the kubelet's version is not checked against the release evictd implements", "node", node, "err", err)
		return ""
	}
	v := n.Status.NodeInfo.KubeletVersion
	if err := kubeletconfig.CheckKubeletVersion(v); err != nil {
		log.Warn("the node's kubelet is not the release whose eviction decisions evictd implements", "kubelet_version", v, "implemented", policy.KubeletVersion, "detail", err.Error())
	}
	return v
}
