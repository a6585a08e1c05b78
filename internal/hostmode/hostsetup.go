package hostmode

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/protect"
	"github.com/evictd/evictd/internal/workload"
)

// Options configure evictd on a host whose workloads are cgroups under
// a workload root.
type Options struct {
	// Options are what Kubernetes mode takes too (the policy, the wake-ups,
	// the outputs, the stop).
	agent.Options
	// WorkloadRoot is relative to the memory hierarchy's root ("/workloads").
	WorkloadRoot string
	Workloads    *workload.File // nil: every cgroup is BestEffort priority 0
	Hooks        map[string][]actuate.Hook
	HookTimeout  time.Duration
	OnRecord     func(agent.Record)
	BeforeEvict  func(agent.Trigger, policy.Decision, agent.Action)
	Clock        agent.Clock
	// GoneTimeout bounds the wait for a killed workload to disappear.
	GoneTimeout time.Duration
	// MemoryQoS, when set, makes evictd keep the kubelet's memory.min/low/
	// high (cgroup v2) and oom_score_adj of every workload (internal/protect);
	// its CgroupV2 is set from the hierarchy. nil: evictd leaves them alone.
	MemoryQoS *memqos.Settings
}

// Host is an Agent wired to the live host.
type Host struct {
	*agent.Agent
	Collector *collect.Collector
	Pods      *Pods
	Stats     *Stats
	Observer  *Observer // the agent's: Pods and Stats, one listing per synchronize
	Wakeups   *agent.Wakeups
	Killer    *actuate.Killer
	Protector *protect.Protector // nil without Options.MemoryQoS
	Root      string             // absolute workload root
	V2        bool
	lock      *rootLock // nil in a dry run
}

// New wires the collector, the workloads, the killer, the wake-ups and
// the engine. Nothing is changed on the host until Run.
func New(o Options) (*Host, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.WorkloadRoot == "" {
		return nil, fmt.Errorf("a workload root is required (the cgroup whose children are the workloads)")
	}
	rootRel := "/" + strings.Trim(o.WorkloadRoot, "/")
	var wl *collect.Collector
	col, err := collect.New(collect.Config{
		WorkloadRoot: rootRel,
		// Every synchronize takes a Summary: read only what eviction uses.
		EvictionOnly: true,
		ProfileStats: agent.NeedsProfileStats(o.Policy.Profile),
		PodRef: func(w collect.Workload) statsapi.PodReference {
			rel := strings.TrimPrefix(path.Clean(w.Cgroup), rootRel+"/")
			return statsapi.PodReference{Name: w.Name, Namespace: workload.Namespace, UID: string(workload.UID(rel))}
		},
	})
	if err != nil {
		return nil, err
	}
	wl = col
	memRoot, version := wl.MemoryRoot()
	v2 := version == 2
	root := filepath.Join(memRoot, rootRel)
	self, err := workload.SelfCgroup(memRoot, v2)
	if err != nil {
		o.Log.Warn("cannot tell evictd's own cgroup; relying on the pid check alone", "err", err)
	}
	pods := &Pods{File: o.Workloads, Root: root, SelfCgroup: self, V2: v2}
	wired := false
	defer func() {
		if !wired {
			pods.Close() // its watch on the root
		}
	}()
	if _, err := pods.Workloads(); err != nil {
		return nil, err
	}
	var lock *rootLock
	if !o.DryRun { // a dry run changes nothing, so it may watch beside a real agent
		if lock, err = lockWorkloadRoot(memRoot, root); err != nil {
			return nil, err
		}
		defer func() {
			if !wired {
				lock.release()
			}
		}()
	}
	k := actuate.NewKiller(wl.Hierarchy(), memRoot, v2, o.Log)
	k.DryRun, k.GoneTimeout = o.DryRun, o.GoneTimeout
	k.ThawLeft(root)
	eng, err := policy.NewEngine(o.Policy, policy.Filesystems{})
	if err != nil {
		return nil, err
	}
	wc := agent.WakeupConfig{
		MemoryRoot: memRoot, PodsCgroup: root, V2: v2,
		ReadPodsMemory: func() (uint64, error) {
			m, err := wl.ReadPodsCgroupMemory()
			return m.WorkingSet, err
		},
		Log: o.Log,
		Arm: !o.NoGrowthStop && !o.DryRun,
	}
	o.Wakeups.Apply(&wc, eng.Thresholds())
	wk, err := agent.NewWakeups(wc)
	if err != nil {
		return nil, err
	}
	if o.Wakeups.MemcgNotification == agent.On && v2 {
		o.Log.Warn("memcg threshold notification asked for, but cgroup v2 has no cgroup.event_control (kubernetes#106331); using PSI, memory.events and the fast poll")
	}
	var rec agent.Reclaimer
	if len(o.Hooks) > 0 {
		rec = &HookReclaimer{Hooks: &actuate.Hooks{BySignal: o.Hooks, DryRun: o.DryRun, Log: o.Log}}
	}
	var prot *protect.Protector
	if o.MemoryQoS != nil {
		s := *o.MemoryQoS
		s.CgroupV2 = v2
		if prot, err = protect.New(protect.Config{Settings: s, Root: root, DryRun: o.DryRun, Log: o.Log, Held: k.Held}); err != nil {
			wk.Close()
			return nil, err
		}
	}
	stats := &Stats{Collector: wl, RootRel: rootRel}
	obs := &Observer{Workloads: pods, Stats: stats, Protector: prot}
	memRec, hostMem := agent.ProfileEdges(o.Policy.Profile, memRoot, root, v2, o.DryRun, "")
	if o.Policy.Profile.ReclaimFirst && !v2 {
		o.Log.Warn("profile reclaim-first: memory.reclaim is cgroup v2 only; on this cgroup v1 host memory evictions happen as the kubelet's")
	}
	ev := &Evictor{Killer: k}
	var holder agent.Holder = ev
	if o.NoGrowthStop {
		holder = nil
	}
	a, err := agent.New(agent.Config{
		Engine: eng, Observer: obs, Evictor: ev, Holder: holder, OOM: OOMCounter{Pods: pods}, Reclaimer: rec,
		MemoryReclaimer: memRec, Host: hostMem,
		Waker: wk, Updater: wk, Clock: o.Clock, Interval: o.Interval, Log: o.Log,
		DecisionLog: o.DecisionLog, Metrics: o.Metrics, StateFile: o.StateFile, DryRun: o.DryRun, OnRecord: o.OnRecord, BeforeEvict: o.BeforeEvict,
		StopTimeout: o.StopTimeout, Observed: o.Observed,
	})
	if err != nil {
		wk.Close()
		return nil, err
	}
	wired = true
	return &Host{Agent: a, Collector: wl, Pods: pods, Stats: stats, Observer: obs, Wakeups: wk, Killer: k, Protector: prot, Root: root, V2: v2, lock: lock}, nil
}

// Run runs the loop until ctx is done, then stops the notifiers. What
// memory QoS wrote stays in place (docs/qos.md).
func (h *Host) Run(ctx context.Context) error {
	defer h.lock.release()
	defer h.Wakeups.Close()
	defer h.Pods.Close()
	if h.Protector != nil {
		h.Protector.Start()
	}
	return h.Agent.Run(ctx)
}

// Close releases what New started (the notifiers, the workload root's
// lock), for a Host that is not Run.
func (h *Host) Close() {
	h.Wakeups.Close()
	h.Pods.Close()
	h.lock.release()
}

// Sink lets callers inject a wake-up (the demo, tests).
func (h *Host) Sink() notify.Sink { return h.Wakeups.Sink() }
