package policy

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fsStats selects which filesystem usage a disk ranking measures.
type fsStats uint8

const (
	fsRoot fsStats = 1 << iota
	fsLogs
	fsLocalVolumes
	fsImages // the kubelet lists it but pods have no image usage: contributes nothing
)

// rankKind is the ranking family for a signal.
type rankKind uint8

const (
	rankNone rankKind = iota
	rankMemory
	rankPID
	rankDisk
)

// rankFor returns the ranking of signal s in the given layout
// (buildSignalToRankFunc). The kubelet builds no ranking at all after a split
// layout with KubeletSeparateDiskGC off (ok=false).
func rankFor(s Signal, fs Filesystems) (kind rankKind, measure fsStats, res v1.ResourceName) {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return rankMemory, 0, v1.ResourceMemory
	case SignalPIDAvailable:
		return rankPID, 0, ResourcePIDs
	}
	res = signalToResource[s]
	all := fsImages | fsRoot | fsLogs | fsLocalVolumes
	switch {
	case fs.DedicatedImageFs && !fs.SplitContainerFs:
		switch s {
		case SignalNodeFsAvailable, SignalNodeFsInodesFree:
			return rankDisk, fsLogs | fsLocalVolumes, res
		default: // imagefs.*, containerfs.*
			return rankDisk, fsRoot | fsImages, res
		}
	case fs.DedicatedImageFs && fs.SplitContainerFs:
		switch s {
		case SignalImageFsAvailable, SignalImageFsInodesFree:
			return rankDisk, fsImages, res
		default: // nodefs.*, containerfs.*
			return rankDisk, fsLogs | fsLocalVolumes | fsRoot, res
		}
	default:
		return rankDisk, all, res
	}
}

// reclaimFor returns the node-level reclaim functions for s in the kubelet's
// order (buildSignalToNodeReclaimFuncs).
func reclaimFor(s Signal, fs Filesystems) []string {
	const cgc, igc = ReclaimContainerGC, ReclaimImageGC
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable, SignalPIDAvailable:
		return nil
	}
	switch {
	case fs.DedicatedImageFs && !fs.SplitContainerFs:
		switch s {
		case SignalNodeFsAvailable, SignalNodeFsInodesFree:
			return nil
		default:
			return []string{cgc, igc}
		}
	case fs.DedicatedImageFs && fs.SplitContainerFs:
		switch s {
		case SignalImageFsAvailable, SignalImageFsInodesFree:
			return []string{igc}
		default:
			return []string{cgc}
		}
	default:
		return []string{cgc, igc}
	}
}

// Node-level reclaim function names.
const (
	ReclaimContainerGC = "containerGC" // DeleteAllUnusedContainers
	ReclaimImageGC     = "imageGC"     // DeleteUnusedImages
)

// rankKey holds a pod's precomputed comparison keys. The kubelet recomputes
// them inside every comparison; they are pure functions of the pod and its
// stats, so precomputing gives the same Less results (and so, with the same
// sort algorithm, the same order) at a fraction of the cost.
type rankKey struct {
	pod      *v1.Pod
	demoted  bool // Profile.LoopBreaker: ranked after every pod that is not
	found    bool
	exceeds  bool
	priority int32
	usage    resource.Quantity
	request  resource.Quantity
	delta    resource.Quantity // usage minus request
	procs    uint64
	swap     int64 // Profile.SwapAware: swap usage counted in usage (-1: none reported)
}

// cmpBool places true before false.
func cmpBool(a, b bool) int {
	if a == b {
		return 0
	}
	if !b {
		return -1
	}
	return 1
}

// rankSorter sorts positions into keys (swapping small integers instead of
// the large keys); the sequence of Less and Swap calls, and so the result,
// is the kubelet's.
type rankSorter struct {
	kind  rankKind
	keys  []rankKey
	order []int32
}

func (r *rankSorter) Len() int      { return len(r.order) }
func (r *rankSorter) Swap(i, j int) { r.order[i], r.order[j] = r.order[j], r.order[i] }

// Less is the kubelet's multiSorter.Less over its compare chains.
func (r *rankSorter) Less(i, j int) bool {
	a, b := &r.keys[r.order[i]], &r.keys[r.order[j]]
	// The loop breaker's tier comes before the kubelet's keys. In the
	// kubelet profile no pod is demoted, so this never decides and the
	// kubelet's sequence of comparisons is unchanged.
	if a.demoted != b.demoted {
		return b.demoted
	}
	statsCmp := func() (int, bool) {
		if !a.found || !b.found {
			return cmpBool(!a.found, !b.found), true
		}
		return 0, false
	}
	prio := func() int {
		if a.priority == b.priority {
			return 0
		}
		if a.priority > b.priority {
			return 1
		}
		return -1
	}
	switch r.kind {
	case rankPID:
		// orderedBy(priority, process)
		if c := prio(); c != 0 {
			return c < 0
		}
		if c, ok := statsCmp(); ok {
			return c < 0
		}
		return int(b.procs-a.procs) < 0 // the kubelet's uint64 subtraction, converted to int
	default:
		// orderedBy(exceedRequests, priority, usage-minus-request)
		c, ok := statsCmp()
		if !ok {
			c = cmpBool(a.exceeds, b.exceeds)
		}
		if c != 0 {
			return c < 0
		}
		if c := prio(); c != 0 {
			return c < 0
		}
		if c, ok := statsCmp(); ok {
			return c < 0
		}
		return b.delta.Cmp(a.delta) < 0
	}
}

// requestQuantity reproduces k8s.io/kubernetes/pkg/api/v1/resource
// GetResourceRequestQuantity: effective pod requests (init containers and
// sidecars included; pod-level requests replace container ones when the
// PodLevelResources gate is on and they are set), overhead excluded, then the
// overhead added only when the total is non-zero.
func requestQuantity(pod *v1.Pod, name v1.ResourceName, gates FeatureGates) resource.Quantity {
	var q resource.Quantity
	switch name {
	case v1.ResourceMemory, v1.ResourceStorage, v1.ResourceEphemeralStorage:
		q = resource.Quantity{Format: resource.BinarySI}
	default:
		q = resource.Quantity{Format: resource.DecimalSI}
	}
	if plainSum(pod) {
		// Fast path, same result: without init containers or pod-level
		// resources PodRequests is the sum over the containers.
		if r, ok := sumContainers(pod, name, false); ok {
			q.Add(r)
		}
	} else {
		podLevel := gates.PodLevelResources && resourcehelper.IsPodLevelResourcesSet(pod)
		if r, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{SkipContainerLevelResources: podLevel, ExcludeOverhead: true})[name]; ok {
			q.Add(r)
		}
	}
	if pod.Spec.Overhead != nil {
		if o, ok := pod.Spec.Overhead[name]; ok && !q.IsZero() {
			q.Add(o)
		}
	}
	return q
}

// plainSum reports whether a pod's effective requests and limits are the plain
// sum over its containers: no init containers (sidecar and init rules) and no
// pod-level resources. component-helpers allocates maps for every call; the
// engine calls it for every pod on every synchronize, so it takes this fast
// path when it gives the same answer.
func plainSum(pod *v1.Pod) bool {
	return len(pod.Spec.InitContainers) == 0 && pod.Spec.Resources == nil
}

// sumContainers adds the containers' requests (or limits) of name the way
// component-helpers' addResourceList does: the first value is copied (keeping
// its format), later ones added. ok is false when no container sets it.
func sumContainers(pod *v1.Pod, name v1.ResourceName, limits bool) (sum resource.Quantity, ok bool) {
	for i := range pod.Spec.Containers {
		list := pod.Spec.Containers[i].Resources.Requests
		if limits {
			list = pod.Spec.Containers[i].Resources.Limits
		}
		v, has := list[name]
		if !has {
			continue
		}
		if !ok {
			sum, ok = v.DeepCopy(), true
		} else {
			sum.Add(v)
		}
	}
	return sum, ok
}

// podLimit is resourcehelper.PodLimits(pod, {})[name].
func podLimit(pod *v1.Pod, name v1.ResourceName) (resource.Quantity, bool) {
	if !plainSum(pod) {
		l, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[name]
		return l, ok
	}
	l, ok := sumContainers(pod, name, true)
	if ok && pod.Spec.Overhead != nil && !l.IsZero() {
		if o, has := pod.Spec.Overhead[name]; has {
			l.Add(o)
		}
	}
	return l, ok
}

func memoryUsage(m *statsv1alpha1.MemoryStats) resource.Quantity {
	if m == nil || m.WorkingSetBytes == nil {
		return resource.Quantity{Format: resource.BinarySI}
	}
	return *resource.NewQuantity(int64(*m.WorkingSetBytes), resource.BinarySI)
}

func fsUsed(fs *statsv1alpha1.FsStats) int64 {
	if fs == nil || fs.UsedBytes == nil {
		return 0
	}
	return int64(*fs.UsedBytes)
}

func fsInodesUsed(fs *statsv1alpha1.FsStats) int64 {
	if fs == nil || fs.InodesUsed == nil {
		return 0
	}
	return int64(*fs.InodesUsed)
}

// isLocalEphemeralVolume is pkg/volume/util IsLocalEphemeralVolume.
func isLocalEphemeralVolume(v *v1.Volume) bool {
	return v.GitRepo != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) ||
		v.ConfigMap != nil
}

// podDiskUsage sums the measured filesystems' bytes and inodes (podDiskUsage).
func podDiskUsage(ps *statsv1alpha1.PodStats, f *podFacts, measure fsStats) (bytes, inodes int64) {
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if measure&fsRoot != 0 {
			bytes += fsUsed(c.Rootfs)
			inodes += fsInodesUsed(c.Rootfs)
		}
		if measure&fsLogs != 0 {
			bytes += fsUsed(c.Logs)
			inodes += fsInodesUsed(c.Logs)
		}
	}
	if measure&fsLocalVolumes != 0 {
		for _, name := range f.localVolumes {
			for j := range ps.VolumeStats {
				if ps.VolumeStats[j].Name == name {
					bytes += fsUsed(&ps.VolumeStats[j].FsStats)
					inodes += fsInodesUsed(&ps.VolumeStats[j].FsStats)
					break
				}
			}
		}
	}
	return bytes, inodes
}

// rankPods orders pods for eviction on signal s exactly as the kubelet's rank
// function: the same comparisons through sort.Sort on the same input order,
// so ties come out as the kubelet's would for that order. facts[i] are the
// facts of pods[i].
func rankPods(pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, s Signal, fs Filesystems) ranked {
	return rankPodsInto(nil, pods, facts, stats, s, fs)
}

// rankPodsInto is rankPods reusing buf's storage (the engine keeps it
// between synchronizes; a ranked result is only read before the next one).
func rankPodsInto(buf *ranked, pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, s Signal, fs Filesystems) ranked {
	return rankPodsWith(buf, pods, facts, stats, s, fs, rankOptions{})
}

// rankOptions are the profile's changes to a ranking (zero: the kubelet's).
type rankOptions struct {
	// swap counts a pod's swap usage as memory usage (Profile.SwapAware).
	swap bool
	// demoted, when set, says which pods rank after the others
	// (Profile.LoopBreaker); i indexes pods.
	demoted func(i int) bool
}

// rankPodsWith is rankPodsInto with the profile's options.
func rankPodsWith(buf *ranked, pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, s Signal, fs Filesystems, opt rankOptions) ranked {
	kind, measure, res := rankFor(s, fs)
	var keys []rankKey
	var order []int32
	if buf != nil && cap(buf.keys) >= len(pods) {
		keys, order = buf.keys[:len(pods)], buf.order[:len(pods)]
		clear(keys)
	} else {
		keys, order = make([]rankKey, len(pods)), make([]int32, len(pods))
	}
	for i, p := range pods {
		f := facts[i]
		k := &keys[i]
		k.pod = p
		k.priority = f.priority
		k.swap = -1
		if opt.demoted != nil {
			k.demoted = opt.demoted(i)
		}
		ps, found := stats[string(p.UID)]
		k.found = found
		switch kind {
		case rankMemory:
			k.request = f.memRequest
			if found {
				k.usage = memoryUsage(ps.Memory)
				if opt.swap && ps.Swap != nil && ps.Swap.SwapUsageBytes != nil {
					k.swap = int64(*ps.Swap.SwapUsageBytes)
					k.usage.Add(*resource.NewQuantity(k.swap, resource.BinarySI))
				}
				k.exceeds = k.usage.Cmp(k.request) == 1
				k.delta = k.usage.DeepCopy()
				k.delta.Sub(k.request)
			}
		case rankPID:
			if found && ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
				k.procs = *ps.ProcessStats.ProcessCount
			}
		case rankDisk:
			if res == ResourceInodes {
				k.request = f.inodesRequest
			} else {
				k.request = f.ephRequest
			}
			if found {
				b, in := podDiskUsage(ps, f, measure)
				if res == ResourceInodes {
					k.usage = *resource.NewQuantity(in, resource.DecimalSI)
				} else {
					k.usage = *resource.NewQuantity(b, resource.BinarySI)
				}
				k.exceeds = k.usage.Cmp(k.request) == 1
				// Quirk: the ephemeral-storage request is subtracted even for inodes.
				k.delta = k.usage.DeepCopy()
				k.delta.Sub(f.ephRequest)
			}
		}
	}
	for i := range order {
		order[i] = int32(i)
	}
	sort.Sort(&rankSorter{kind: kind, keys: keys, order: order})
	r := ranked{keys: keys, order: order}
	if buf != nil {
		*buf = r
	}
	return r
}

// ranked is the result of rankPods: at(i) is the i-th pod to evict.
type ranked struct {
	keys  []rankKey
	order []int32
}

func (r ranked) len() int          { return len(r.order) }
func (r ranked) at(i int) *rankKey { return &r.keys[r.order[i]] }
func (r ranked) names() (out []string) {
	for i := range r.order {
		out = append(out, r.at(i).pod.Name)
	}
	return out
}
