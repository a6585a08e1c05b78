package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup"
	v1 "github.com/evictd/evictd/internal/cgroup/v1"
	v2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/host"
)

// Config says where the collector reads. Zero values take the defaults
// named on each field.
type Config struct {
	// NodeName goes into the Summary (default: the hostname).
	NodeName string
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// SysRoot is where /sys is mounted (default "/sys"): the huge page
	// pools under kernel/mm/hugepages (see adjustForHugePages).
	SysRoot string
	// Hierarchy says where each controller lives (default: detected from
	// <ProcRoot>/self/mountinfo).
	Hierarchy *cgroup.Hierarchy
	// PodsCgroup is the kubelet's pod cgroup root relative to the hierarchy
	// root, e.g. "/kubepods.slice" or "/kubepods" (default: whichever
	// exists). Ignored when WorkloadRoot is set.
	PodsCgroup string
	// WorkloadRoot, when set, switches to plain mode for hosts without
	// Kubernetes: every child cgroup of this path (relative to the hierarchy
	// root) is one workload, reported as a pod with that name, and the path
	// itself is reported as the "pods" system container.
	WorkloadRoot string
	// KubeletRoot is the kubelet's root directory: node fs stats come from
	// its filesystem and emptyDir volumes from <KubeletRoot>/pods/<uid>/volumes
	// (default "/var/lib/kubelet"; when it does not exist, node fs is "/").
	KubeletRoot string
	// PodLogsRoot holds the pods' log directories <ns>_<name>_<uid>
	// (default "/var/log/pods").
	PodLogsRoot string
	// ImageFsPath is the container runtime's root, whose filesystem is the
	// imagefs (default: the first of /var/lib/containerd,
	// /var/lib/containers/storage, /var/lib/docker that exists; when none
	// exists or it is on the node fs's device, imagefs = nodefs).
	ImageFsPath string
	// Clock stamps the stats (default time.Now).
	Clock func() time.Time
	// PodRef names a pod workload in the Summary (default: name = the pod
	// cgroup's directory name, namespace "", uid = the pod UID; plain
	// workloads: name = directory name, uid = the cgroup path).
	PodRef func(w Workload) statsapi.PodReference
	// ContainerName names a container (default: its container ID). An
	// empty name leaves the container out of the pod's containers and
	// process count, as the kubelet leaves out the sandbox (pause)
	// container; its memory still counts in the pod's, which is read from
	// the pod cgroup.
	ContainerName func(w Workload, c Container) string
	// Parallelism bounds concurrent pod reads (default min(4, GOMAXPROCS)).
	Parallelism int
	// EvictionOnly makes Summary read only what the kubelet's eviction
	// manager uses (spec §8): node and "pods" memory {available, working
	// set, usage}, fs and imagefs, rlimit, per pod and container working set
	// and usage, process counts and ephemeral storage. It leaves out CPU
	// time, PSI, RSS, page faults, start times, swap and the pods' limits,
	// i.e. per cgroup the limit and CPU accounting files and per node the
	// uptime and three pressure files. The agent sets it: it takes a
	// Summary on every synchronize. `evictd stat --summary` does not.
	EvictionOnly bool
	// ProfileStats adds to an EvictionOnly Summary what the policy profile
	// beyond the kubelet reads (docs/profile.md): the RSS of the node and of
	// the "pods" cgroup (reclaim-first tells file pages from anonymous
	// memory with it), and the swap of the node, the "pods" cgroup and each
	// pod (swap-aware). A full Summary has them anyway.
	ProfileStats bool
}

// Collector reads the live node. It is safe for concurrent use.
type Collector struct {
	cfg        Config
	h          cgroup.Hierarchy
	memRoot    string
	memVersion int
	cpuRoot    string // "" when no cpu accounting controller is mounted
	cpuVersion int
	podsCgroup string // relative; "" when there is neither pods cgroup nor workload root

	// Start times of cgroups seen by the last Summary and this one: a
	// cgroup's creation time does not change, and a stat per cgroup per
	// Summary is a tenth of the Summary's cost.
	startMu               sync.Mutex
	startsPrev, startsCur map[string]metav1.Time
	// The previous Summary's CPU time per cgroup, for usageNanoCores (the
	// rate between two samples, as cAdvisor's CpuInst).
	cpuPrev, cpuCur map[string]cpuSample
}

type cpuSample struct {
	at      time.Time
	usageNs uint64
}

// New checks the configuration, detects the hierarchy and the pods cgroup,
// and returns a Collector.
func New(cfg Config) (*Collector, error) {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	if cfg.NodeName == "" {
		cfg.NodeName, _ = os.Hostname()
	}
	if cfg.KubeletRoot == "" {
		cfg.KubeletRoot = "/var/lib/kubelet"
	}
	if cfg.PodLogsRoot == "" {
		cfg.PodLogsRoot = "/var/log/pods"
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.PodRef == nil {
		cfg.PodRef = defaultPodRef
	}
	if cfg.ContainerName == nil {
		cfg.ContainerName = func(_ Workload, c Container) string { return c.ID }
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = min(4, runtime.GOMAXPROCS(0))
	}
	c := &Collector{cfg: cfg, startsPrev: map[string]metav1.Time{}, startsCur: map[string]metav1.Time{},
		cpuPrev: map[string]cpuSample{}, cpuCur: map[string]cpuSample{}}
	if cfg.Hierarchy != nil {
		c.h = *cfg.Hierarchy
	} else {
		h, err := cgroup.Detect(cfg.ProcRoot)
		if err != nil {
			return nil, fmt.Errorf("detecting cgroup hierarchy: %w", err)
		}
		c.h = h
	}
	var ok bool
	c.memRoot, c.memVersion, ok = c.h.Controller("memory")
	if !ok {
		return nil, fmt.Errorf("the memory controller is not enabled on this host (cgroup mode %s): evictd cannot read memory usage", c.h.Mode)
	}
	if r, v, ok := c.h.Controller("cpuacct"); ok && v == 1 {
		c.cpuRoot, c.cpuVersion = r, 1
	} else if c.memVersion == 2 {
		c.cpuRoot, c.cpuVersion = c.memRoot, 2 // cpu.stat usage_usec exists without the cpu controller
	}
	switch {
	case cfg.WorkloadRoot != "":
		c.podsCgroup = "/" + strings.Trim(cfg.WorkloadRoot, "/")
		if st, err := os.Stat(c.memRoot + c.podsCgroup); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("workload root %s: not a cgroup directory under %s", cfg.WorkloadRoot, c.memRoot)
		}
	case cfg.PodsCgroup != "":
		c.podsCgroup = "/" + strings.Trim(cfg.PodsCgroup, "/")
		if st, err := os.Stat(c.memRoot + c.podsCgroup); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("pods cgroup %s: not a cgroup directory under %s", cfg.PodsCgroup, c.memRoot)
		}
	default:
		p, err := DetectPodsCgroup(c.memRoot)
		if err != nil && !errors.Is(err, ErrNoPodsCgroup) {
			return nil, err
		}
		c.podsCgroup = p // "" on a host without Kubernetes: node stats only
	}
	return c, nil
}

func defaultPodRef(w Workload) statsapi.PodReference {
	if w.PodUID == "" {
		return statsapi.PodReference{Name: w.Name, UID: w.Cgroup}
	}
	return statsapi.PodReference{Name: w.Name, UID: w.PodUID}
}

// Hierarchy returns the detected cgroup hierarchy.
func (c *Collector) Hierarchy() cgroup.Hierarchy { return c.h }

// MemoryRoot returns the memory controller's mount point and cgroup version.
func (c *Collector) MemoryRoot() (string, int) { return c.memRoot, c.memVersion }

// PodsCgroup returns the pods' parent cgroup (or the workload root) relative
// to the hierarchy root; "" when there is none.
func (c *Collector) PodsCgroup() string { return c.podsCgroup }

// Workloads lists the pods (or, in plain mode, the workloads), sorted by
// cgroup path. It returns none on a host without a pods cgroup.
func (c *Collector) Workloads() ([]Workload, error) {
	switch {
	case c.podsCgroup == "":
		return nil, nil
	case c.cfg.WorkloadRoot != "":
		return DiscoverPlain(c.memRoot, c.podsCgroup)
	default:
		return DiscoverPods(c.memRoot, c.podsCgroup)
	}
}

// ReadPodsCgroupMemory reads the pods' parent cgroup's memory usage and
// inactive file (two files: usage and memory.stat) for the agent's fast poll
// between Summaries. The working set it returns is the one the kubelet
// computes for the "pods" system container.
func (c *Collector) ReadPodsCgroupMemory() (CgroupMemory, error) {
	if c.podsCgroup == "" {
		return CgroupMemory{}, ErrNoPodsCgroup
	}
	return readCgroupMemory(c.memRoot+c.podsCgroup, c.memVersion, false)
}

// ReadCgroupMemory reads the memory of any cgroup, given relative to the
// memory hierarchy's root.
func (c *Collector) ReadCgroupMemory(rel string, withLimit bool) (CgroupMemory, error) {
	return readCgroupMemory(c.memRoot+"/"+strings.Trim(rel, "/"), c.memVersion, withLimit)
}

// Summary reads the node and every workload and returns them in the
// kubelet's /stats/summary shape. A workload that vanishes while it is read
// is left out; a node-level read that fails is an error (a Summary missing
// node memory would silently disable memory eviction).
func (c *Collector) Summary(ctx context.Context) (*statsapi.Summary, error) {
	return c.summary(ctx, nil, false)
}

// SummaryOf is Summary for the given workloads only, instead of every
// workload under the pods cgroup. The agent passes the workloads it may
// evict (those holding a process): the kubelet's eviction manager looks up
// stats only for its active pods, so stats of the others are never read.
func (c *Collector) SummaryOf(ctx context.Context, ws []Workload) (*statsapi.Summary, error) {
	return c.summary(ctx, ws, true)
}

func (c *Collector) summary(ctx context.Context, ws []Workload, given bool) (*statsapi.Summary, error) {
	now := metav1.NewTime(c.cfg.Clock())
	defer c.rotateSamples()
	node, err := c.nodeStats(now)
	if err != nil {
		return nil, err
	}
	s := &statsapi.Summary{Node: node, Pods: []statsapi.PodStats{}}
	if !given {
		if ws, err = c.Workloads(); err != nil {
			return nil, err
		}
	}
	if len(ws) == 0 {
		return s, nil
	}
	logDirs := c.podLogDirs()
	pods := make([]*statsapi.PodStats, len(ws))
	errs := make([]error, len(ws))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.cfg.Parallelism, len(ws)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pods[i], errs[i] = c.podStats(ws[i], logDirs, now)
			}
		}()
	}
feed:
	for i := range ws {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, p := range pods {
		if errs[i] != nil {
			if gone(errs[i]) {
				continue
			}
			return nil, fmt.Errorf("pod cgroup %s: %w", ws[i].Cgroup, errs[i])
		}
		s.Pods = append(s.Pods, *p)
	}
	return s, nil
}

// rotateSamples makes this Summary's remembered start times and CPU samples
// the previous ones; cgroups not seen again are forgotten a Summary later.
func (c *Collector) rotateSamples() {
	c.startMu.Lock()
	c.startsPrev, c.startsCur = c.startsCur, make(map[string]metav1.Time, len(c.startsCur))
	c.cpuPrev, c.cpuCur = c.cpuCur, make(map[string]cpuSample, len(c.cpuCur))
	c.startMu.Unlock()
}

func gone(err error) bool { return cgroup.IsVanished(err) || errors.Is(err, fs.ErrNotExist) }

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func (c *Collector) nodeStats(now metav1.Time) (statsapi.NodeStats, error) {
	n := statsapi.NodeStats{NodeName: c.cfg.NodeName}
	proc := c.cfg.ProcRoot
	full := !c.cfg.EvictionOnly
	if !full {
		// eviction never reads the node's start time
	} else if up, err := host.ReadUptime(proc); err == nil {
		n.StartTime = metav1.NewTime(now.Add(-time.Duration(up * float64(time.Second))).Truncate(time.Second))
	}
	mi, err := host.ReadMeminfo(proc)
	if err != nil {
		return n, err
	}
	root, err := readRootMemory(c.memRoot, c.memVersion)
	if err != nil {
		return n, fmt.Errorf("node memory: %w", err)
	}
	// The root cgroup's limit is the machine's memory (cAdvisor's
	// MemoryCapacity = MemTotal): available = capacity − working set,
	// subtracted unsigned as the kubelet does (it wraps if ws > capacity).
	hugePages, err := host.HugePagesBytes(c.cfg.SysRoot)
	if err != nil {
		return n, fmt.Errorf("node memory: huge pages: %w", err)
	}
	n.Memory = &statsapi.MemoryStats{
		Time: now, AvailableBytes: u64(adjustForHugePages(mi.MemTotal-root.WorkingSet, hugePages)), UsageBytes: u64(root.Usage),
		WorkingSetBytes: u64(root.WorkingSet),
	}
	if full {
		n.Memory.RSSBytes, n.Memory.PageFaults, n.Memory.MajorPageFaults = u64(root.RSS), u64(root.Pgfault), u64(root.Pgmajfault)
		c.addNodeExtras(&n, mi, now)
	} else if c.cfg.ProfileStats {
		n.Memory.RSSBytes = u64(root.RSS)
		n.Swap = nodeSwap(mi, now)
	}

	if c.podsCgroup != "" {
		sc, err := c.systemContainer(statsapi.SystemContainerPods, c.podsCgroup, now)
		if err != nil {
			return n, fmt.Errorf("pods cgroup %s: %w", c.podsCgroup, err)
		}
		n.SystemContainers = append(n.SystemContainers, sc)
	}

	nodeFsPath := c.cfg.KubeletRoot
	if _, err := os.Stat(nodeFsPath); err != nil {
		nodeFsPath = "/"
	}
	nfs, err := host.Statfs(nodeFsPath)
	if err != nil {
		return n, err
	}
	n.Fs = toFs(nfs, now)
	ifs := nfs
	if p := c.imageFsPath(); p != "" {
		if u, err := host.Statfs(p); err == nil && u.Device != nfs.Device {
			ifs = u // a dedicated imagefs
		}
	}
	n.Runtime = &statsapi.RuntimeStats{ImageFs: toFs(ifs, now), ContainerFs: toFs(ifs, now)}

	maxPID, err := host.MaxPID(proc)
	if err != nil {
		return n, err
	}
	la, err := host.ReadLoadavg(proc)
	if err != nil {
		return n, err
	}
	n.Rlimit = &statsapi.RlimitStats{Time: now, MaxPID: i64(int64(maxPID)), NumOfRunningProcesses: i64(int64(la.Tasks))}
	return n, nil
}

// adjustForHugePages is the kubelet v1.37's step of the same name
// (pkg/kubelet/server/stats/summary.go, feature HugepageAwareEviction, beta
// and on by default): the node's memory.available less the memory reserved
// for huge pages of every size, floored at 0. MemTotal counts the huge page
// pools, but the memory controller never charges hugetlb pages to the
// working set, so without it a node with huge pages reserved looks that
// much richer and is evicted on later than the kubelet would. Only the
// node's figure: the "pods" container's (allocatableMemory.available) is
// its cgroup's limit less its working set, which the kubelet leaves alone.
//
// The kubelet takes the sizes from the Node's hugepages-<size> capacity,
// i.e. cAdvisor's machine info read when the kubelet started; evictd reads
// the same files (nr_hugepages of each size) at every Summary, so the two
// differ only while the pools were resized after the kubelet's start and
// the kubelet has not been restarted (docs/kubelet-parity.md).
func adjustForHugePages(available, hugePages uint64) uint64 {
	if hugePages == 0 {
		return available
	}
	if available > hugePages {
		return available - hugePages
	}
	// The unadjusted figure still counts huge page memory that regular
	// memory cannot use: below the reservation, regular memory is gone.
	return 0
}

// addNodeExtras fills what a full Summary has beyond eviction's needs:
// node CPU, PSI, IO pressure and swap.
func (c *Collector) addNodeExtras(n *statsapi.NodeStats, mi host.Meminfo, now metav1.Time) {
	proc := c.cfg.ProcRoot
	n.CPU = c.cpuStats(c.cpuRoot, now)
	if psi, err := host.ReadPressure(proc, "memory"); err == nil {
		n.Memory.PSI = toPSI(psi)
	}
	if n.CPU != nil {
		if psi, err := host.ReadPressure(proc, "cpu"); err == nil {
			n.CPU.PSI = toPSI(psi)
		}
	}
	if psi, err := host.ReadPressure(proc, "io"); err == nil {
		n.IO = &statsapi.IOStats{Time: now, PSI: toPSI(psi)}
	}
	n.Swap = nodeSwap(mi, now)
}

// nodeSwap is the node's swap from /proc/meminfo (nil without swap).
func nodeSwap(mi host.Meminfo, now metav1.Time) *statsapi.SwapStats {
	if mi.SwapTotal == 0 && mi.SwapFree == 0 {
		return nil
	}
	return &statsapi.SwapStats{Time: now, SwapAvailableBytes: u64(mi.SwapFree), SwapUsageBytes: u64(mi.SwapTotal - mi.SwapFree)}
}

func (c *Collector) imageFsPath() string {
	if c.cfg.ImageFsPath != "" {
		return c.cfg.ImageFsPath
	}
	for _, p := range []string{"/var/lib/containerd", "/var/lib/containers/storage", "/var/lib/docker"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (c *Collector) systemContainer(name, rel string, now metav1.Time) (statsapi.ContainerStats, error) {
	dir := c.memRoot + rel
	m, err := readCgroupMemory(dir, c.memVersion, true)
	if err != nil {
		return statsapi.ContainerStats{}, err
	}
	if c.cfg.EvictionOnly {
		sc := statsapi.ContainerStats{Name: name, Memory: evictionMemory(m, now)}
		if c.cfg.ProfileStats {
			sc.Memory.RSSBytes = u64(m.RSS)
			sc.Swap = c.cgroupSwap(dir, m, now)
		}
		return sc, nil
	}
	sc := statsapi.ContainerStats{Name: name, StartTime: cgroupStartTime(dir), Memory: toMemory(m, now), Swap: c.cgroupSwap(dir, m, now)}
	if c.cpuRoot != "" {
		sc.CPU = c.cpuStats(c.cpuRoot+rel, now)
	}
	return sc, nil
}

// cgroupSwap is a cgroup's swap for the Summary: the usage and, on v2 with
// a memory.swap.max below "max", what is left of it (nil when the kernel
// does not account swap).
func (c *Collector) cgroupSwap(dir string, m CgroupMemory, now metav1.Time) *statsapi.SwapStats {
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	if readSwapAt(d, c.memVersion, &m) != nil || !m.HasSwap {
		return nil
	}
	sw := &statsapi.SwapStats{Time: now, SwapUsageBytes: u64(m.Swap)}
	if c.memVersion == 2 {
		if max, err := v2.ReadMemorySwapMaxAt(d); err == nil && max != cgroup.Max && max >= m.Swap {
			sw.SwapAvailableBytes = u64(max - m.Swap)
		}
	}
	return sw
}

// toMemory converts a cgroup's memory to the Summary's, with availableBytes
// only for a real limit (≤ 2^62), subtracted unsigned like the kubelet.
func toMemory(m CgroupMemory, now metav1.Time) *statsapi.MemoryStats {
	ms := &statsapi.MemoryStats{Time: now, UsageBytes: u64(m.Usage), WorkingSetBytes: u64(m.WorkingSet),
		RSSBytes: u64(m.RSS), PageFaults: u64(m.Pgfault), MajorPageFaults: u64(m.Pgmajfault)}
	if m.HasLimit && m.Limit <= memoryUnlimitedAbove {
		ms.AvailableBytes = u64(m.Limit - m.WorkingSet)
	}
	return ms
}

// evictionMemory is toMemory without what eviction does not read (RSS and
// page faults).
func evictionMemory(m CgroupMemory, now metav1.Time) *statsapi.MemoryStats {
	ms := toMemory(m, now)
	ms.RSSBytes, ms.PageFaults, ms.MajorPageFaults = nil, nil, nil
	return ms
}

// cpuStats reads cumulative CPU time; nil when it cannot be read (CPU is
// not an eviction signal, so it never fails the Summary).
func (c *Collector) cpuStats(dir string, now metav1.Time) *statsapi.CPUStats {
	var ns uint64
	switch c.cpuVersion {
	case 1:
		v, err := v1.ReadCPUAcctUsage(dir)
		if err != nil {
			return nil
		}
		ns = v
	case 2:
		s, err := v2.ReadCPUStat(dir)
		if err != nil {
			return nil
		}
		ns = s.UsageUsec * 1000
	default:
		return nil
	}
	cs := &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u64(ns)}
	c.startMu.Lock()
	prev, ok := c.cpuPrev[dir]
	c.cpuCur[dir] = cpuSample{at: now.Time, usageNs: ns}
	c.startMu.Unlock()
	// The rate since the previous Summary; none on the first one, or when
	// the counter went backwards (the cgroup was recreated).
	if dt := now.Sub(prev.at); ok && dt > 0 && ns >= prev.usageNs {
		cs.UsageNanoCores = u64(uint64(float64(ns-prev.usageNs) / dt.Seconds()))
	}
	return cs
}

// toPSI converts kernel PSI (totals in µs) to the Summary's PSIStats, whose
// total the API documents in nanoseconds.
func toPSI(p host.Pressure) *statsapi.PSIStats {
	conv := func(l host.PSILine) statsapi.PSIData {
		return statsapi.PSIData{Total: l.TotalUs * 1000, Avg10: l.Avg10, Avg60: l.Avg60, Avg300: l.Avg300}
	}
	s := &statsapi.PSIStats{Some: conv(p.Some)}
	if p.HasFull {
		s.Full = conv(p.Full)
	}
	return s
}

func toFs(u host.FsUsage, now metav1.Time) *statsapi.FsStats {
	return &statsapi.FsStats{Time: now, AvailableBytes: u64(u.AvailableBytes), CapacityBytes: u64(u.CapacityBytes),
		UsedBytes: u64(u.UsedBytes), InodesFree: u64(u.InodesFree), Inodes: u64(u.Inodes), InodesUsed: u64(u.InodesUsed)}
}

// startTime is cgroupStartTime, remembered across Summaries.
func (c *Collector) startTime(dir string) metav1.Time {
	c.startMu.Lock()
	t, ok := c.startsCur[dir]
	if !ok {
		if t, ok = c.startsPrev[dir]; ok {
			c.startsCur[dir] = t
		}
	}
	c.startMu.Unlock()
	if ok {
		return t
	}
	t = cgroupStartTime(dir)
	c.startMu.Lock()
	c.startsCur[dir] = t
	c.startMu.Unlock()
	return t
}

// cgroupStartTime approximates a cgroup's creation time by its directory's
// modification time (cgroupfs has no birth time); zero if unknown.
func cgroupStartTime(dir string) metav1.Time {
	st, err := os.Stat(dir)
	if err != nil {
		return metav1.Time{}
	}
	return metav1.NewTime(st.ModTime().Truncate(time.Second))
}

func (c *Collector) podStats(w Workload, logDirs map[string]string, now metav1.Time) (*statsapi.PodStats, error) {
	full := !c.cfg.EvictionOnly
	dir := c.memRoot + w.Cgroup
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	// Eviction reads a pod's working set, never its limit (only the "pods"
	// system container's availableBytes depends on a limit).
	m, err := readCgroupMemoryAt(d, c.memVersion, full)
	if err != nil {
		return nil, err
	}
	p := &statsapi.PodStats{PodRef: c.cfg.PodRef(w), Containers: make([]statsapi.ContainerStats, 0, len(w.Containers))}
	if full {
		p.StartTime, p.Memory = c.startTime(dir), toMemory(m, now)
		if c.cpuRoot != "" {
			p.CPU = c.cpuStats(c.cpuRoot+w.Cgroup, now)
		}
	} else {
		p.Memory = evictionMemory(m, now)
	}
	if full || c.cfg.ProfileStats {
		if err := readSwapAt(d, c.memVersion, &m); err != nil && !gone(err) {
			return nil, err
		}
		if m.HasSwap {
			p.Swap = &statsapi.SwapStats{Time: now, SwapUsageBytes: u64(m.Swap)}
		}
	}
	var procs uint64
	if full && c.memVersion == 2 {
		if psi, err := v2.ReadMemoryPressure(dir); err == nil {
			p.Memory.PSI = toPSI(psi)
		}
		if p.CPU != nil {
			if psi, err := v2.ReadCPUPressure(dir); err == nil {
				p.CPU.PSI = toPSI(psi)
			}
		}
		if psi, err := v2.ReadIOPressure(dir); err == nil {
			p.IO = &statsapi.IOStats{Time: now, PSI: toPSI(psi)}
		}
	}
	for _, ct := range w.Containers {
		name := c.cfg.ContainerName(w, ct)
		if name == "" {
			continue
		}
		cdir := c.memRoot + ct.Cgroup
		cd, err := cgroup.OpenDir(cdir)
		var cm CgroupMemory
		if err == nil {
			cm, err = readCgroupMemoryAt(cd, c.memVersion, false)
		}
		if err != nil {
			if cd != nil {
				cd.Close()
			}
			if gone(err) {
				continue // the container ended; the pod is still there
			}
			return nil, fmt.Errorf("container %s: %w", ct.ID, err)
		}
		cs := statsapi.ContainerStats{Name: name}
		if full {
			cs.StartTime, cs.Memory = c.startTime(cdir), toMemory(cm, now)
			if c.cpuRoot != "" {
				cs.CPU = c.cpuStats(c.cpuRoot+ct.Cgroup, now)
			}
		} else {
			cs.Memory = evictionMemory(cm, now)
		}
		p.Containers = append(p.Containers, cs)
		n, err := cgroup.ReadCgroupProcsCountAt(cd)
		cd.Close()
		if err != nil && !gone(err) {
			return nil, fmt.Errorf("container %s: %w", ct.ID, err)
		}
		procs += n
	}
	if w.PodUID == "" {
		// A plain workload has no containers; it may nest its processes in
		// sub-cgroups of its own.
		if procs, err = countProcsTreeAt(d); err != nil {
			return nil, err
		}
	}
	// A pod's count is the sum of its containers' cgroup.procs lines, as the
	// kubelet sums cAdvisor's per-container ProcessCount.
	p.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(procs)}
	if w.PodUID != "" {
		c.addEphemeralStorage(p, w, logDirs, now)
	}
	return p, nil
}

// countProcsTreeAt counts the processes in d and every cgroup below it.
func countProcsTreeAt(d *cgroup.Dir) (uint64, error) {
	n, err := cgroup.ReadCgroupProcsCountAt(d)
	if err != nil {
		return 0, err
	}
	// cgroupfs (kernfs) counts a directory's subdirectories in its link
	// count: 2 links means no child cgroup, and one fstat saves listing the
	// dozens of control files.
	if links, err := d.Nlink(); err == nil && links == 2 {
		return n, nil
	}
	subs, err := cgroup.Children(d.Path)
	if err != nil {
		return 0, err
	}
	for _, s := range subs {
		k, err := countProcsTree(filepath.Join(d.Path, s))
		if err != nil {
			if gone(err) {
				continue
			}
			return 0, err
		}
		n += k
	}
	return n, nil
}

// countProcsTree counts the processes in dir and every cgroup below it.
func countProcsTree(dir string) (uint64, error) {
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return countProcsTreeAt(d)
}
