package policy

import (
	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// systemContainerPods is the Summary system container of the pod cgroup root.
const systemContainerPods = "pods"

// observations holds one observation per signal, indexed by signalRank.
type observations struct {
	set [9]bool
	obs [9]Observation
}

func (o *observations) get(s Signal) (*Observation, bool) {
	i := signalRank(s)
	if i >= len(o.set) || !o.set[i] {
		return nil, false
	}
	return &o.obs[i], true
}

func (o *observations) put(ob Observation) {
	i := signalRank(ob.Signal)
	o.set[i] = true
	o.obs[i] = ob
}

func (o *observations) list() []Observation {
	out := make([]Observation, 0, len(o.set))
	for i := range o.set {
		if o.set[i] {
			out = append(out, o.obs[i])
		}
	}
	return out
}

// makeObservations derives the signals from a Summary as the kubelet's
// makeSignalObservations (Linux) does. Unsigned values are converted to int64
// without checks, so an underflowed availableBytes becomes a huge negative
// number, and capacity = available + workingSet is computed in uint64 first.
func makeObservations(s *statsv1alpha1.Summary) *observations {
	o := &observations{}
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		o.put(Observation{
			Signal:    SignalMemoryAvailable,
			Available: *resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
			Capacity:  *resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
			Time:      m.Time,
		})
	}
	for i := range s.Node.SystemContainers {
		c := &s.Node.SystemContainers[i]
		if c.Name != systemContainerPods {
			continue
		}
		if m := c.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			o.put(Observation{
				Signal:    SignalAllocatableMemoryAvailable,
				Available: *resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
				Capacity:  *resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
				Time:      m.Time,
			})
		}
		break // the kubelet uses the first container of that name
	}
	fsObs := func(fs *statsv1alpha1.FsStats, avail, inodes Signal) {
		if fs == nil {
			return
		}
		if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
			o.put(Observation{
				Signal:    avail,
				Available: *resource.NewQuantity(int64(*fs.AvailableBytes), resource.BinarySI),
				Capacity:  *resource.NewQuantity(int64(*fs.CapacityBytes), resource.BinarySI),
				Time:      fs.Time,
			})
		}
		if fs.InodesFree != nil && fs.Inodes != nil {
			o.put(Observation{
				Signal:    inodes,
				Available: *resource.NewQuantity(int64(*fs.InodesFree), resource.DecimalSI),
				Capacity:  *resource.NewQuantity(int64(*fs.Inodes), resource.DecimalSI),
				Time:      fs.Time,
			})
		}
	}
	fsObs(s.Node.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if rt := s.Node.Runtime; rt != nil {
		fsObs(rt.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
		fsObs(rt.ContainerFs, SignalContainerFsAvailable, SignalContainerFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.NumOfRunningProcesses != nil && r.MaxPID != nil {
		o.put(Observation{
			Signal:    SignalPIDAvailable,
			Available: *resource.NewQuantity(*r.MaxPID-*r.NumOfRunningProcesses, resource.DecimalSI),
			Capacity:  *resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
			Time:      r.Time,
		})
	}
	return o
}

// ResolvedThreshold is a threshold resolved against one Summary as a
// synchronize resolves it.
type ResolvedThreshold struct {
	Threshold Threshold
	// Observation is the threshold's signal as observed
	// (makeSignalObservations): Available, and the Capacity a percentage
	// resolves against.
	Observation Observation
	// Quantity is the threshold's value in the signal's units
	// (GetThresholdQuantity against Observation.Capacity), without minimum
	// reclaim.
	Quantity resource.Quantity
}

// Resolve resolves the engine's thresholds (Thresholds) against a Summary
// (with the profile's observations: free swap counts with swap-aware;
// MemAvailable is not known here, so memavailable resolves on the kubelet's
// figure),
// in order, leaving out those whose signal the Summary does not observe. It
// is for callers that act on the engine's numbers between synchronizes (the
// agent's kernel wake-ups register the threshold with the kernel and poll
// towards it), so that they take them from the engine instead of deriving
// them again. It changes nothing in the engine.
func (e *Engine) Resolve(s *statsv1alpha1.Summary) []ResolvedThreshold {
	if s == nil {
		return nil
	}
	// The profile's observations (swap-aware headroom); in the kubelet
	// profile they are makeObservations'.
	obs := e.observe(s, nil, nil)
	out := make([]ResolvedThreshold, 0, len(e.thresholds))
	for _, t := range e.thresholds {
		o, ok := obs.get(t.Signal)
		if !ok {
			continue
		}
		out = append(out, ResolvedThreshold{Threshold: t, Observation: *o, Quantity: *thresholdQuantity(t.Value, &o.Capacity)})
	}
	return out
}

// podStatsIndex maps pod UID to its stats, as the kubelet's cachedStatsFunc
// (the last entry wins for a duplicated UID).
func podStatsIndex(s *statsv1alpha1.Summary) map[string]*statsv1alpha1.PodStats {
	return podStatsIndexInto(nil, s)
}

// podStatsIndexInto is podStatsIndex reusing m (cleared) when it is not nil.
func podStatsIndexInto(m map[string]*statsv1alpha1.PodStats, s *statsv1alpha1.Summary) map[string]*statsv1alpha1.PodStats {
	if m == nil {
		m = make(map[string]*statsv1alpha1.PodStats, len(s.Pods))
	} else {
		clear(m)
	}
	for i := range s.Pods {
		m[s.Pods[i].PodRef.UID] = &s.Pods[i]
	}
	return m
}
