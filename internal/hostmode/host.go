package hostmode

import (
	"context"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/protect"
	"github.com/evictd/evictd/internal/workload"
)

// Pods lists host-mode workloads: the cgroups under the workload root,
// described by the workloads file. Only cgroups holding at least one process
// are active: an emptied cgroup is a terminated pod, so a workload evicted
// once is not picked again while its directory lingers.
//
// The list of cgroups (and the Pods built from it) is kept between calls
// while an inotify watch on the root says no child cgroup was created,
// removed or renamed; cgroupfs does not update a directory's mtime, so the
// watch is the cheap check. Whether each workload holds a process is read on
// every call. Without inotify every call lists the root again.
type Pods struct {
	File       *workload.File
	Root       string // absolute workload root directory
	SelfCgroup string // evictd's own memory cgroup (absolute), never evicted
	// V2 says the root is on cgroup v2, where cgroup.events tells whether a
	// subtree holds a process in one read; on v1 (false) cgroup.procs and
	// the link count do.
	V2 bool

	mu          sync.Mutex
	watch       *dirWatch // nil before the first call or without inotify
	noWatch     bool      // inotify could not watch the root: list every time
	cached      []workload.Workload
	discoveries int // how often the root was listed (tests)
}

// Workloads lists the active workloads.
func (h *Pods) Workloads() ([]workload.Workload, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watch != nil && h.watch.ino != cgroup.DirInode(h.Root) {
		// The root was removed (and perhaps created again): the watch is
		// on the dead directory, and cgroupfs sends no event for its
		// removal. Watch the root created in its place from now on.
		h.watch.close()
		h.watch, h.cached = nil, nil
	}
	if h.watch == nil && !h.noWatch {
		// Watch before listing, so a change during the listing is seen
		// (as a spurious change) by the next call. Without a root to
		// watch, list every time and try again at the next call.
		if w, err := newDirWatch(h.Root); err == nil {
			h.watch = w
			h.cached = nil
		}
	}
	ws := h.cached
	if ws == nil || h.watch == nil || h.watch.changed() {
		var err error
		h.discoveries++
		if ws, err = workload.Discover(h.File, h.Root, h.SelfCgroup); err != nil {
			h.cached = nil
			return nil, err
		}
		if h.watch != nil {
			h.cached = ws
		}
	}
	out := make([]workload.Workload, 0, len(ws))
	for _, w := range ws {
		if populated(w.Cgroup, h.V2) {
			out = append(out, w)
		}
	}
	return out, nil
}

// All lists every workload cgroup under the root, active or not (from the
// cached listing while the root's watch says nothing changed).
func (h *Pods) All() ([]workload.Workload, error) {
	if _, err := h.Workloads(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cached != nil {
		return h.cached, nil
	}
	return workload.Discover(h.File, h.Root, h.SelfCgroup)
}

// Stats reads host mode's Summary: the collector's (the agent configures it
// eviction-only) of the node and of the workloads of one listing
// (Observer.Observe). The kubelet's eviction manager looks up stats only for
// its active pods, so an empty cgroup's stats would never be used: not
// reading them saves most of an idle host's synchronize.
type Stats struct {
	Collector *collect.Collector
	RootRel   string // the workload root relative to the hierarchy root, "/…"
}

// SummaryOf reads the Summary of the node and of ws.
func (s *Stats) SummaryOf(ctx context.Context, ws []workload.Workload) (*statsapi.Summary, error) {
	cws := make([]collect.Workload, len(ws))
	for i, w := range ws {
		// As collect.DiscoverPlain names them: a direct child of the root.
		cws[i] = collect.Workload{Name: w.Rel, Cgroup: path.Join(s.RootRel, w.Rel)}
	}
	sort.Slice(cws, func(i, j int) bool { return cws[i].Cgroup < cws[j].Cgroup })
	return s.Collector.SummaryOf(ctx, cws)
}

// Observer is host mode's agent.Observer: one listing of the active
// workloads per synchronize (Pods.Workloads), their protection values kept
// from it when memory QoS is on, and the Summary of the same listing. When
// the listing fails, the Summary is the node's alone: with no pods the
// engine ranks nobody, and the node's signals are still evaluated.
type Observer struct {
	Workloads *Pods
	Stats     *Stats
	Protector *protect.Protector // nil: memory QoS is off
}

// Observe implements agent.Observer.
func (o *Observer) Observe(ctx context.Context) agent.Observation {
	ws, perr := o.list()
	sum, serr := o.Stats.SummaryOf(ctx, ws)
	obs := agent.Observation{PodsErr: perr, Summary: sum, SummaryErr: serr,
		Restat: func(ctx context.Context) (*statsapi.Summary, error) { return o.Stats.SummaryOf(ctx, ws) }}
	if perr == nil {
		obs.Pods = workload.Pods(ws)
	}
	return obs
}

// Pods implements agent.Observer.
func (o *Observer) Pods(ctx context.Context) ([]*v1.Pod, error) {
	ws, err := o.list()
	if err != nil {
		return nil, err
	}
	return workload.Pods(ws), nil
}

// list lists the active workloads; with memory QoS on, every listing (each
// synchronize, and so the first one after the workloads file is reloaded)
// also keeps their protection values.
func (o *Observer) list() ([]workload.Workload, error) {
	ws, err := o.Workloads.Workloads()
	if err != nil {
		return nil, err
	}
	if o.Protector != nil {
		o.Protector.Apply(ws)
	}
	return ws, nil
}

// Close stops the watch on the workload root; later calls list the root
// every time.
func (h *Pods) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cached, h.noWatch = nil, true
	if h.watch == nil {
		return nil
	}
	err := h.watch.close()
	h.watch = nil
	return err
}

// dirWatch is an inotify watch on one directory's entries.
type dirWatch struct {
	fd  int
	ino uint64 // the directory's inode: another one at its path means it was recreated
}

func newDirWatch(dir string) (*dirWatch, error) {
	ino := cgroup.DirInode(dir)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	const mask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &dirWatch{fd: fd, ino: ino}, nil
}

// changed drains the pending events and reports whether there were any.
// Anything unexpected (an error, a queue overflow, the watch removed with
// the root) counts as a change: the caller then lists the root again.
func (w *dirWatch) changed() bool {
	var buf [4096]byte
	got := false
	for {
		n, err := unix.Read(w.fd, buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return got
		case err != nil || n <= 0:
			return true
		}
		got = true
	}
}

func (w *dirWatch) close() error { return unix.Close(w.fd) }

// populated reports whether a cgroup subtree holds a process, as cheaply as
// the kernel allows: on v2 one read of cgroup.events ("populated 1"); on v1
// one read of cgroup.procs when the cgroup itself holds one, else its link
// count, and only for a cgroup with children a walk of its descendants.
func populated(dir string, v2 bool) bool {
	if v2 {
		ev, err := cgroupv2.ReadCgroupEvents(dir)
		return err == nil && ev.Populated
	}
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	pids, err := cgroup.ReadCgroupProcsAt(d)
	if err != nil {
		return false
	}
	if len(pids) > 0 {
		return true
	}
	// kernfs counts a directory's subdirectories in its link count, so a
	// cgroup with 2 links has no children and, with no process of its own,
	// is empty — one fstat instead of a walk.
	if n, err := d.Nlink(); err == nil && n == 2 {
		return false
	}
	pids, err = cgroup.ReadCgroupProcsRecursive(dir)
	return err == nil && len(pids) > 0
}

// Evictor kills a host-mode workload's cgroup, and stops its growth first
// (agent.Holder).
type Evictor struct {
	Killer *actuate.Killer
}

// Hold implements agent.Holder on the workload's cgroup.
func (h *Evictor) Hold(pod *v1.Pod, r actuate.Resource) (*actuate.Hold, error) {
	dir := pod.Annotations[workload.CgroupAnnotation]
	if dir == "" {
		return nil, fmt.Errorf("pod %s/%s has no %s annotation", pod.Namespace, pod.Name, workload.CgroupAnnotation)
	}
	return h.Killer.Hold(actuate.Target{Name: pod.Name, Cgroup: dir}, r)
}

// Evict implements agent.Evictor: SIGTERM, then the fork-proof kill at the grace
// deadline, waiting (bounded) until the cgroup is empty.
func (h *Evictor) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, _ policy.Eviction) (agent.EvictResult, error) {
	dir := pod.Annotations[workload.CgroupAnnotation]
	if dir == "" {
		return agent.EvictResult{}, fmt.Errorf("pod %s/%s has no %s annotation", pod.Namespace, pod.Name, workload.CgroupAnnotation)
	}
	res, err := h.Killer.Kill(ctx, actuate.Target{Name: pod.Name, Cgroup: dir}, grace)
	out := agent.EvictResult{Pids: res.Terminated, Gone: res.Gone, DryRun: res.DryRun, Took: res.Elapsed}
	if err != nil && len(res.Terminated) == 0 && res.HardKill == "" {
		err = fmt.Errorf("%w (%w)", err, agent.ErrUntouched) // not a signal sent
	}
	switch {
	case res.DryRun:
		out.Method = "dry-run (would SIGTERM, then " + res.HardKill + ")"
	case res.HardKill == "":
		out.Method = "SIGTERM"
	case len(res.Terminated) > 0:
		out.Method = "SIGTERM, then " + res.HardKill
	default:
		out.Method = res.HardKill
	}
	return out, err
}

// OOMCounter reads the kernel OOM killer's counts for the agent, per
// workload from the cgroups under the workload root (active or not).
type OOMCounter struct {
	Pods *Pods
}

// NodeOOMKills implements agent.OOMCounter: on v2 the workload root's own
// memory.events (hierarchical: exactly the workloads' kills, a removed
// cgroup's included); on v1, which has no such counter, /proc/vmstat, whose
// kills outside the root are other people's business on a shared host.
func (o OOMCounter) NodeOOMKills() (uint64, bool, error) {
	if o.Pods.V2 {
		ev, err := cgroupv2.ReadMemoryEvents(o.Pods.Root)
		return ev.OOMKill, true, err
	}
	n, err := host.ReadVMStatOOMKill("/proc")
	return n, false, err
}

// OOMKills implements agent.OOMCounter.
func (o OOMCounter) OOMKills() ([]agent.PodOOMKills, error) {
	ws, err := o.Pods.All()
	if err != nil {
		return nil, err
	}
	out := make([]agent.PodOOMKills, 0, len(ws))
	for _, w := range ws {
		k, err := collect.ReadOOMKills(w.Cgroup, o.Pods.V2)
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, agent.PodOOMKills{Pod: w.Pod, Kills: k})
	}
	return out, nil
}

// HookReclaimer runs the configured reclaim hooks for a signal.
type HookReclaimer struct {
	Hooks *actuate.Hooks
}

// Reclaim implements agent.Reclaimer.
func (h *HookReclaimer) Reclaim(ctx context.Context, signal policy.Signal, _ []string) {
	h.Hooks.Run(ctx, string(signal))
}
