package policy

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observe is makeObservations (the kubelet's makeSignalObservations) with
// the profile's node memory figures, and puts those figures side by side in
// d.NodeMemory (d may be nil). In the kubelet profile the observations are
// makeObservations' unchanged.
func (e *Engine) observe(s *statsv1alpha1.Summary, host *HostMemory, d *Decision) *observations {
	o := makeObservations(s)
	p := e.cfg.Profile
	nm := &NodeMemory{Used: "working set"}
	if mem, ok := o.get(SignalMemoryAvailable); ok {
		q := mem.Available.DeepCopy()
		nm.WorkingSetAvailable = &q
	}
	haveHost := host != nil && host.MemTotalBytes > 0
	if haveHost {
		nm.MemAvailable = resource.NewQuantity(int64(host.MemAvailableBytes), resource.BinarySI)
	}
	var swapFree *uint64
	if sw := s.Node.Swap; sw != nil && sw.SwapAvailableBytes != nil {
		swapFree = sw.SwapAvailableBytes
		nm.SwapAvailable = resource.NewQuantity(int64(*swapFree), resource.BinarySI)
	}
	switch {
	case p.MemAvailable && haveHost:
		at := metav1.NewTime(host.Time)
		if host.Time.IsZero() && s.Node.Memory != nil {
			at = s.Node.Memory.Time
		}
		o.put(Observation{
			Signal:    SignalMemoryAvailable,
			Available: *resource.NewQuantity(int64(host.MemAvailableBytes), resource.BinarySI),
			Capacity:  *resource.NewQuantity(int64(host.MemTotalBytes), resource.BinarySI),
			Time:      at,
		})
		nm.Used = "MemAvailable"
	case p.MemAvailable && d != nil:
		d.Notes = append(d.Notes, "profile memavailable: no /proc/meminfo figures given; memory.available is the kubelet's (capacity − working set)")
	}
	if p.SwapAware && swapFree != nil {
		added := false
		if mem, ok := o.get(SignalMemoryAvailable); ok {
			mem.Available.Add(*resource.NewQuantity(int64(*swapFree), resource.BinarySI))
			added = true
		}
		if alloc, ok := o.get(SignalAllocatableMemoryAvailable); ok {
			// The pods may swap only as far as their cgroup allows: its
			// swap headroom when the Summary reports it, else the node's.
			free := *swapFree
			if pc := podsContainer(s); pc != nil && pc.Swap != nil && pc.Swap.SwapAvailableBytes != nil {
				free = min(free, *pc.Swap.SwapAvailableBytes)
			}
			alloc.Available.Add(*resource.NewQuantity(int64(free), resource.BinarySI))
			added = true
		}
		if added {
			nm.Used += " + free swap"
		}
	}
	if d != nil && (nm.WorkingSetAvailable != nil || nm.MemAvailable != nil) {
		d.NodeMemory = nm
	}
	return o
}

// podsContainer is the Summary's "pods" system container (the first, as the
// kubelet takes it), or nil.
func podsContainer(s *statsv1alpha1.Summary) *statsv1alpha1.ContainerStats {
	for i := range s.Node.SystemContainers {
		if s.Node.SystemContainers[i].Name == systemContainerPods {
			return &s.Node.SystemContainers[i]
		}
	}
	return nil
}

// memoryReclaimFor is Profile.ReclaimFirst's decision: when the deciding
// threshold (actionable[0]) is a memory signal whose cgroup's working set
// holds more than anonymous memory (working set − RSS, both in the Summary),
// what to ask the kernel to reclaim —
// enough to lift every actionable memory threshold of that signal past its
// quantity plus minimum reclaim, as the kubelet's second look requires. nil:
// nothing to reclaim (not memory, or the working set is all anonymous).
func memoryReclaimFor(actionable []Threshold, s *statsv1alpha1.Summary, obs *observations) *MemoryReclaim {
	if len(actionable) == 0 {
		return nil
	}
	sig := actionable[0].Signal
	var m *statsv1alpha1.MemoryStats
	switch sig {
	case SignalMemoryAvailable:
		m = s.Node.Memory
	case SignalAllocatableMemoryAvailable:
		if pc := podsContainer(s); pc != nil {
			m = pc.Memory
		}
	default:
		return nil
	}
	o, ok := obs.get(sig)
	if !ok {
		return nil
	}
	// Only what the Summary shows to be file pages is worth a reclaim: with
	// no RSS to subtract, or a working set that is all anonymous memory,
	// the kernel could only swap (or find nothing) and the eviction is due.
	if m == nil || m.WorkingSetBytes == nil || m.RSSBytes == nil {
		return nil
	}
	mr := &MemoryReclaim{Signal: sig, FileBytes: int64(*m.WorkingSetBytes) - int64(*m.RSSBytes)}
	if mr.FileBytes <= 0 {
		return nil
	}
	for _, t := range actionable {
		if t.Signal != sig {
			continue
		}
		q := thresholdQuantity(t.Value, &o.Capacity)
		if t.MinReclaim != nil {
			q.Add(*thresholdQuantity(*t.MinReclaim, &o.Capacity))
		}
		if need := q.Value() - o.Available.Value(); need > mr.Bytes {
			mr.Bytes = need
		}
	}
	if mr.Bytes <= 0 {
		return nil
	}
	return mr
}

// noteLoop records a threshold eviction of pod for the loop breaker, with an
// EvictionLoop Event and a note when it makes the pod's controller a loop.
func (e *Engine) noteLoop(d *Decision, pod *v1.Pod, now time.Time) {
	c := metav1.GetControllerOfNoCopy(pod)
	if c == nil {
		return
	}
	key := pod.Namespace + "/" + c.Kind + "/" + c.Name
	w := e.cfg.Profile.loopWindow()
	ev := LoopEviction{Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), At: now}
	if !e.loops.note(key, string(c.UID), ev, w) {
		return
	}
	l := e.loops[string(c.UID)]
	msg := fmt.Sprintf("Pods of %s %s/%s were evicted from this node %d times within %v (%s): an eviction loop. "+
		"Its pods rank after the other pods while the node stays under pressure (evictd profile loop-breaker, kubernetes#124388).",
		c.Kind, pod.Namespace, c.Name, len(l.Evictions), w, loopPods(l))
	d.Events = append(d.Events, Event{Object: pod.Namespace + "/" + pod.Name, Type: v1.EventTypeWarning, Reason: EvictionLoopReason, Message: msg})
	d.Notes = append(d.Notes, msg)
}

func loopPods(l *Loop) string {
	out := ""
	for i, ev := range l.Evictions {
		if i > 0 {
			out += ", "
		}
		out += ev.Pod
	}
	return out
}

// preferHard moves the first hard threshold of the kubelet's order to the
// front (Profile.HardPreemptsSoft). With a soft and a hard memory threshold
// both met, the kubelet's order may put the soft one first (byEvictionPriority
// reverses the memory thresholds, and their order comes from a map), and the
// soft one's grace period then applies to an eviction the hard threshold
// calls for; with the profile the hard one decides.
func preferHard(ordered []Threshold) {
	for i, t := range ordered {
		if t.Hard() {
			copy(ordered[1:i+1], ordered[:i])
			ordered[0] = t
			return
		}
	}
}
