package agent

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/policy"
)

// OOMCounter reads the kernel OOM killer's counters, so that the agent says
// when the kernel, not evictd, ended a process: a log line, a metric
// (evictd_kernel_oom_kills_total) and a decision-log action for every kill,
// and an eviction whose victim the kernel killed is recorded as such.
type OOMCounter interface {
	// NodeOOMKills is a count that rises with every kill OOMKills can see,
	// read cheaply at every synchronize to tell whether anything is new:
	// /proc/vmstat's oom_kill (node-wide, for any reason) or a workload
	// root's hierarchical memory.events oom_kill. Outside says whether
	// what it counts beyond the workloads' own kills is to be reported
	// (the node's other processes in Kubernetes mode, or cgroups already
	// removed) or is somebody else's (a host-mode workload root on a
	// shared host, counted by /proc/vmstat).
	NodeOOMKills() (n uint64, outside bool, err error)
	// OOMKills reads the count of every pod cgroup on the node now, active
	// or not (collect.ReadOOMKills): a workload can start, be OOM-killed
	// and empty its cgroup between two synchronizes.
	OOMKills() ([]PodOOMKills, error)
}

// PodOOMKills is a pod's OOM kill count (Pod carries at least its UID, and
// its namespace and name where they are known).
type PodOOMKills struct {
	Pod   *v1.Pod
	Kills uint64
}

// oomWatch is what the agent knows of the kernel's OOM kills.
type oomWatch struct {
	primed bool
	node   uint64
	pods   map[types.UID]uint64 // the counts at the last scan
	// errLogged: the counters are unreadable, said once.
	errLogged bool
}

// oomKillAction is the decision log's kind for a kernel OOM kill.
const oomKillAction = "kernel-oom-kill"

// watchOOM reports the kernel OOM kills since it last looked, when
// /proc/vmstat says there are any: for each pod whose count rose, one
// action in rec, one log line and the metric, or, for victim (an eviction
// just carried out), its OOMKills; what no pod accounts for (a process
// outside the pods, or a cgroup already removed) as one action without a
// pod. The first call only reads the counts: kills before evictd started
// are history, not news.
func (a *Agent) watchOOM(rec *Record, victim *Action) {
	w := &a.oom
	if a.cfg.OOM == nil {
		return
	}
	n, outside, err := a.cfg.OOM.NodeOOMKills()
	if err != nil {
		a.oomUnreadable(err)
		return
	}
	if w.primed && n <= w.node {
		w.node = n // (a counter that went back: a test's fake)
		return
	}
	scan, err := a.cfg.OOM.OOMKills()
	if err != nil {
		a.oomUnreadable(err)
		return
	}
	delta := n - w.node
	prev := w.pods
	w.node, w.pods = n, make(map[types.UID]uint64, len(scan))
	for _, p := range scan {
		w.pods[p.Pod.UID] = p.Kills
	}
	if !w.primed {
		w.primed = true
		return
	}
	var attributed uint64
	for _, p := range scan {
		// A pod not seen before was created since: its count began at 0.
		kills := p.Kills - min(prev[p.Pod.UID], p.Kills)
		if kills == 0 {
			continue
		}
		attributed += kills
		a.oomMetric(p.Pod, kills)
		if victim != nil && victim.pod != nil && victim.pod.UID == p.Pod.UID {
			victim.OOMKills += kills
			continue // said in the eviction's own line
		}
		_, held := a.holds[p.Pod.UID]
		a.log.Warn("the kernel OOM killer killed processes of a workload", "pod", p.Pod.Namespace+"/"+p.Pod.Name,
			"qos", a.qos(p.Pod), "kills", kills, "being_evicted", held)
		rec.Actions = append(rec.Actions, Action{Kind: oomKillAction, OOMKills: kills,
			Pod:     policy.PodRef{Namespace: p.Pod.Namespace, Name: p.Pod.Name, UID: string(p.Pod.UID)},
			Message: "killed by the kernel OOM killer, not by evictd"})
	}
	if delta > attributed && outside {
		rest := delta - attributed
		a.oomMetric(nil, rest)
		a.log.Warn("the kernel OOM killer killed processes outside the workloads evictd watches (or in a cgroup already removed)", "kills", rest)
		rec.Actions = append(rec.Actions, Action{Kind: oomKillAction, OOMKills: rest,
			Message: "killed by the kernel OOM killer outside the workloads evictd watches, or in a cgroup already removed"})
	}
}

func (a *Agent) oomUnreadable(err error) {
	if !a.oom.errLogged {
		a.oom.errLogged = true
		a.log.Warn("cannot read the kernel's OOM kill counts; kernel OOM kills will not be reported", "err", err)
	}
}

// qos is the pod's QoS class; "" for a pod known by its cgroup alone.
func (a *Agent) qos(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass == "" && len(pod.Spec.Containers) == 0 {
		return ""
	}
	return policy.PodQOS(pod, a.cfg.Engine.Config().Features)
}

func (a *Agent) oomMetric(pod *v1.Pod, kills uint64) {
	if a.cfg.Metrics == nil {
		return
	}
	ns, name, qos := "", "", ""
	if pod != nil {
		ns, name, qos = pod.Namespace, pod.Name, string(a.qos(pod))
	}
	a.cfg.Metrics.KernelOOMKills.WithLabelValues(ns, name, qos).Add(float64(kills))
}
