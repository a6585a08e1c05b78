package kube

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/host"
)

// DiskSource gives the disk part of the kubelet's Summary (node and image
// filesystems, the pods' ephemeral storage with the containers' writable
// layers, which only the runtime knows).
type DiskSource interface {
	Summary(ctx context.Context) (*statsapi.Summary, error)
}

// Stats reads the Summary on a Kubernetes node, for the Observer. Memory and
// PIDs come from evictd's own collector, fresh on every call: the pod cgroups under
// kubepods (either cgroup driver, v1 or v2) matched to the informer's pods by
// UID, named as the kubelet's Summary names them (the pod's namespace and
// name, container names from its container statuses, no sandbox container).
// The "pods" system container is the kubepods cgroup, whose memory limit the
// kubelet sets to the node's allocatable memory, so allocatableMemory.available
// is computed as the kubelet computes it.
//
// Disk signals come from Disk (the kubelet's Summary); without it, or while it
// fails, the Summary carries no filesystem stats, so disk thresholds are not
// evaluated (one log line per change between the two states).
//
// Cgroups and pods that do not match yet are not errors:
//   - a pod cgroup whose UID the informer does not list (a pod being
//     created, or one deleted from the API whose cgroup lingers) is left
//     out of the Summary; its memory still counts in the node's and the
//     "pods" container's, as in the kubelet's Summary;
//   - an active pod without a cgroup yet has no stats, and the engine ranks
//     it as the kubelet ranks a pod its Summary does not cover.
type Stats struct {
	Collector *collect.Collector
	Disk      DiskSource // nil: disk thresholds are not evaluated
	Log       *slog.Logger

	mu       sync.Mutex
	index    podIndexes        // replaced, never mutated, per call
	seen     map[string]string // pod UID → its cgroup directory, at the last discovery
	diskErr  string            // the last disk-source state ("" = fine)
	diskSeen bool
}

type podIndex struct {
	pod        *v1.Pod
	containers map[string]string // runtime container ID → container name
}

// NewCollector returns a collector configured for Kubernetes mode: the
// kubepods cgroup (detected, or podsCgroup when set), eviction-only reads,
// and pods and containers named through s's index.
func (s *Stats) NewCollector(cfg collect.Config) (*collect.Collector, error) {
	cfg.EvictionOnly = true
	cfg.WorkloadRoot = ""
	cfg.PodRef = s.podRef
	cfg.ContainerName = s.containerName
	c, err := collect.New(cfg)
	if err != nil {
		return nil, err
	}
	s.Collector = c
	return c, nil
}

func (s *Stats) current() podIndexes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

func (s *Stats) podRef(w collect.Workload) statsapi.PodReference { return s.current().podRef(w) }

func (s *Stats) containerName(w collect.Workload, c collect.Container) string {
	return s.current().containerName(w, c, "")
}

// podIndexes are pods by UID, with their containers by runtime ID.
type podIndexes map[string]*podIndex

func (idx podIndexes) podRef(w collect.Workload) statsapi.PodReference {
	if pi := idx[w.PodUID]; pi != nil {
		return statsapi.PodReference{Name: pi.pod.Name, Namespace: pi.pod.Namespace, UID: string(pi.pod.UID)}
	}
	return statsapi.PodReference{Name: w.Name, UID: w.PodUID}
}

// containerName names a container cgroup by its pod's container statuses; ""
// (left out) for the sandbox and for a container the status does not list
// yet; unknown for a pod not in the index.
func (idx podIndexes) containerName(w collect.Workload, c collect.Container, unknown string) string {
	if pi := idx[w.PodUID]; pi != nil {
		return pi.containers[c.ID]
	}
	return unknown
}

// NameFromPods makes a collector name the pods it finds under kubepods as
// the kubelet's Summary names them, from a pod list (the informer's, or
// `kubectl get pods -o json`): namespace and name from the pod, container
// names from its container statuses, the sandbox (which no status lists)
// left out of the containers. A pod cgroup the list does not have keeps
// the collector's default naming (directory name, containers by ID).
func NameFromPods(cfg *collect.Config, pods []*v1.Pod) {
	idx := indexPods(pods)
	cfg.PodRef = idx.podRef
	cfg.ContainerName = func(w collect.Workload, c collect.Container) string { return idx.containerName(w, c, c.ID) }
}

func indexPods(pods []*v1.Pod) podIndexes {
	idx := make(podIndexes, len(pods))
	for _, p := range pods {
		pi := &podIndex{pod: p, containers: map[string]string{}}
		for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
			for i := range list {
				if id := containerID(list[i].ContainerID); id != "" {
					pi.containers[id] = list[i].Name
				}
			}
		}
		idx[string(p.UID)] = pi
		// A static pod's cgroup is named by the UID the kubelet gave it (the
		// hash of its file); the API shows its mirror pod, with another UID
		// and that hash in the mirror annotation.
		if h := p.Annotations[v1.MirrorPodAnnotationKey]; h != "" && h != string(p.UID) {
			idx[h] = pi
		}
	}
	return idx
}

// containerID strips the runtime scheme of a status's containerID
// ("containerd://<id>", "cri-o://<id>", "docker://<id>").
func containerID(s string) string {
	if _, id, ok := strings.Cut(s, "://"); ok {
		return id
	}
	return s
}

// SummaryOf reads the Summary of pods, the active pods of one listing
// (Observer.Observe): the pod cgroups they name, named after them.
func (s *Stats) SummaryOf(ctx context.Context, pods []*v1.Pod) (*statsapi.Summary, error) {
	idx := indexPods(pods)
	ws, err := s.Collector.Workloads()
	if err != nil {
		return nil, err
	}
	kept := ws[:0:0]
	for _, w := range ws {
		if _, ok := idx[w.PodUID]; ok {
			kept = append(kept, w)
		}
	}
	s.mu.Lock()
	s.index, s.seen = idx, s.dirsOf(ws)
	s.mu.Unlock()
	sum, err := s.Collector.SummaryOf(ctx, kept)
	if err != nil {
		return nil, err
	}
	s.addDisk(ctx, sum)
	return sum, nil
}

// addDisk replaces the collector's filesystem stats by the kubelet's, or
// removes them when the kubelet's Summary is not available.
func (s *Stats) addDisk(ctx context.Context, sum *statsapi.Summary) {
	var ks *statsapi.Summary
	state := "no disk source configured"
	if s.Disk != nil {
		var err error
		if ks, err = s.Disk.Summary(ctx); err != nil {
			ks, state = nil, err.Error()
		} else {
			state = ""
		}
	}
	s.logDiskState(state)
	if ks == nil {
		stripDisk(sum)
		return
	}
	mergeDisk(sum, ks)
}

func (s *Stats) logDiskState(state string) {
	if s.diskSeen && state == s.diskErr {
		return
	}
	log := s.log()
	switch {
	case state == "":
		log.Info("disk stats from the kubelet's Summary: disk thresholds evaluated")
	default:
		log.Warn("no disk stats: disk thresholds (nodefs, imagefs, containerfs) are not evaluated", "reason", state)
	}
	s.diskErr, s.diskSeen = state, true
}

// stripDisk removes every filesystem figure, so no disk signal is observed.
func stripDisk(sum *statsapi.Summary) {
	sum.Node.Fs, sum.Node.Runtime = nil, nil
	for i := range sum.Pods {
		p := &sum.Pods[i]
		p.EphemeralStorage, p.VolumeStats = nil, nil
		for j := range p.Containers {
			p.Containers[j].Rootfs, p.Containers[j].Logs = nil, nil
		}
	}
}

// mergeDisk takes the node's filesystems and each pod's storage from the
// kubelet's Summary ks, matching pods by UID and containers by name.
func mergeDisk(sum, ks *statsapi.Summary) {
	stripDisk(sum)
	sum.Node.Fs, sum.Node.Runtime = ks.Node.Fs, ks.Node.Runtime
	byUID := make(map[string]*statsapi.PodStats, len(ks.Pods))
	for i := range ks.Pods {
		byUID[ks.Pods[i].PodRef.UID] = &ks.Pods[i]
	}
	for i := range sum.Pods {
		p := &sum.Pods[i]
		kp := byUID[p.PodRef.UID]
		if kp == nil {
			continue
		}
		p.EphemeralStorage, p.VolumeStats = kp.EphemeralStorage, kp.VolumeStats
		kc := make(map[string]*statsapi.ContainerStats, len(kp.Containers))
		for j := range kp.Containers {
			kc[kp.Containers[j].Name] = &kp.Containers[j]
		}
		for j := range p.Containers {
			if c := kc[p.Containers[j].Name]; c != nil {
				p.Containers[j].Rootfs, p.Containers[j].Logs = c.Rootfs, c.Logs
			}
		}
	}
}

// PodCgroup returns the absolute cgroup directory (memory hierarchy) of the
// pod with this UID, from a fresh discovery of the kubepods tree.
func (s *Stats) PodCgroup(uid types.UID) (string, bool) {
	ws, err := s.Collector.Workloads()
	if err != nil {
		return "", false
	}
	root, _ := s.Collector.MemoryRoot()
	for _, w := range ws {
		if w.PodUID == string(uid) {
			return root + w.Cgroup, true
		}
	}
	return "", false
}

// PodDir finds pod's cgroup directory (absolute) as cheaply as it can: where
// the last synchronize's discovery found it, else by a fresh discovery. It
// is on the path from a decision to the victim's hold.
func (s *Stats) PodDir(pod *v1.Pod) (string, bool) {
	s.mu.Lock()
	dir, ok := s.seen[cgroupUID(pod)]
	s.mu.Unlock()
	if ok {
		return dir, true
	}
	return s.PodCgroup(types.UID(cgroupUID(pod)))
}

// NodeOOMKills is the OOMCounter's node count (Observer): /proc/vmstat (the host's, in
// any PID namespace), whose kills outside the pods (a node daemon's) are
// reported too.
func (s *Stats) NodeOOMKills() (uint64, bool, error) {
	n, err := host.ReadVMStatOOMKill("/proc")
	return n, true, err
}

// OOMKillsOf counts the OOM kills of every pod cgroup under kubepods,
// named from all (the informer's pods in any phase, so that a pod that has
// just ended is named) or, for a pod all does not have, by the UID in the
// cgroup's name.
func (s *Stats) OOMKillsOf(all []*v1.Pod) ([]agent.PodOOMKills, error) {
	ws, err := s.Collector.Workloads()
	if err != nil {
		return nil, err
	}
	byUID := make(map[string]*v1.Pod, len(all))
	for _, p := range all {
		byUID[cgroupUID(p)] = p
	}
	root, version := s.Collector.MemoryRoot()
	out := make([]agent.PodOOMKills, 0, len(ws))
	for _, w := range ws {
		k, err := collect.ReadOOMKills(root+w.Cgroup, version == 2)
		if err != nil {
			continue // gone meanwhile
		}
		pod := byUID[w.PodUID]
		if pod == nil {
			pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: w.Name, UID: types.UID(w.PodUID)}}
		}
		out = append(out, agent.PodOOMKills{Pod: pod, Kills: k})
	}
	return out, nil
}

// dirsOf maps the discovered pods' UIDs to their cgroup directories.
func (s *Stats) dirsOf(ws []collect.Workload) map[string]string {
	root, _ := s.Collector.MemoryRoot()
	m := make(map[string]string, len(ws))
	for _, w := range ws {
		m[w.PodUID] = root + w.Cgroup
	}
	return m
}

// Vanished returns the pods among pods that have started a container on
// this node (a container ID in their status) but whose pod cgroup is gone:
// the kubelet has stopped them and removed their cgroup, and the API server
// has not heard yet — it is away, or the pod's status is on its way. The
// kubelet no longer counts them among its active pods; with no stats, the
// ranking would put them first. (A pod that has started no container may
// have no cgroup yet: it is not vanished.) It is called for every pod list
// the agent takes, before the stats, so it looks fresh but cheap: a pod is
// checked by the existence of the directory the last discovery found it
// in, and only pods not found that way by a fresh discovery, which must
// find some pod cgroup to be believed.
func (s *Stats) Vanished(pods []*v1.Pod) map[types.UID]bool {
	s.mu.Lock()
	seen := s.seen
	s.mu.Unlock()
	var check []*v1.Pod
	for _, p := range pods {
		if !started(p) {
			continue
		}
		if dir, ok := seen[cgroupUID(p)]; ok {
			if _, err := os.Stat(dir); err == nil {
				continue
			}
		}
		check = append(check, p)
	}
	if len(check) == 0 {
		return nil
	}
	ws, err := s.Collector.Workloads()
	if err != nil || len(ws) == 0 {
		return nil
	}
	now := s.dirsOf(ws)
	s.mu.Lock()
	s.seen = now
	s.mu.Unlock()
	var out map[types.UID]bool
	for _, p := range check {
		if _, ok := now[cgroupUID(p)]; !ok {
			if out == nil {
				out = map[types.UID]bool{}
			}
			out[p.UID] = true
			s.log().Info("a pod the API lists as running has no cgroup on this node any more: not ranked (the kubelet has stopped it)",
				"pod", p.Namespace+"/"+p.Name, "uid", p.UID)
		}
	}
	return out
}

// started reports whether the pod's status names a container the runtime
// created.
func started(p *v1.Pod) bool {
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for i := range list {
			if containerID(list[i].ContainerID) != "" {
				return true
			}
		}
	}
	return false
}

// cgroupUID is the UID the pod's cgroup is named by: a static pod's, which
// the API shows in its mirror pod's annotation, or the pod's own.
func cgroupUID(p *v1.Pod) string {
	if h := p.Annotations[v1.MirrorPodAnnotationKey]; h != "" {
		return h
	}
	return string(p.UID)
}

func (s *Stats) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}
