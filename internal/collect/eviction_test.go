package collect

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// evictionView is every Summary field the kubelet's eviction manager reads
// (spec §8), flattened to "path → value" so two Summaries can be compared
// field by field. A nil pointer is "nil", so a field one mode leaves out
// shows up as a difference.
func evictionView(s *statsapi.Summary) map[string]string {
	v := map[string]string{}
	p := func(x *uint64) string {
		if x == nil {
			return "nil"
		}
		return fmt.Sprint(*x)
	}
	mem := func(k string, m *statsapi.MemoryStats) {
		if m == nil {
			v[k] = "nil"
			return
		}
		v[k+".availableBytes"], v[k+".workingSetBytes"], v[k+".usageBytes"] = p(m.AvailableBytes), p(m.WorkingSetBytes), p(m.UsageBytes)
		v[k+".time"] = m.Time.UTC().String()
	}
	fsv := func(k string, f *statsapi.FsStats) {
		if f == nil {
			v[k] = "nil"
			return
		}
		v[k+".availableBytes"], v[k+".capacityBytes"], v[k+".inodesFree"], v[k+".inodes"] = p(f.AvailableBytes), p(f.CapacityBytes), p(f.InodesFree), p(f.Inodes)
		v[k+".usedBytes"], v[k+".inodesUsed"] = p(f.UsedBytes), p(f.InodesUsed)
		v[k+".time"] = f.Time.UTC().String()
	}
	mem("node.memory", s.Node.Memory)
	for _, sc := range s.Node.SystemContainers {
		mem("node."+sc.Name+".memory", sc.Memory)
	}
	fsv("node.fs", s.Node.Fs)
	if s.Node.Runtime != nil {
		fsv("node.imageFs", s.Node.Runtime.ImageFs)
		fsv("node.containerFs", s.Node.Runtime.ContainerFs)
	}
	if r := s.Node.Rlimit; r != nil {
		v["node.rlimit"] = fmt.Sprint(*r.MaxPID, " ", *r.NumOfRunningProcesses)
	}
	for _, pod := range s.Pods {
		k := "pod " + pod.PodRef.UID
		if pod.Memory != nil {
			v[k+".memory.workingSetBytes"] = p(pod.Memory.WorkingSetBytes)
		}
		for _, c := range pod.Containers {
			ck := k + " container " + c.Name
			if c.Memory != nil {
				v[ck+".memory.workingSetBytes"] = p(c.Memory.WorkingSetBytes)
			}
			if c.Rootfs != nil {
				fsv(ck+".rootfs", c.Rootfs)
			}
			if c.Logs != nil {
				fsv(ck+".logs", c.Logs)
			}
		}
		for _, vol := range pod.VolumeStats {
			fsv(k+" volume "+vol.Name, &vol.FsStats)
		}
		if pod.EphemeralStorage != nil {
			v[k+".ephemeral-storage.usedBytes"] = p(pod.EphemeralStorage.UsedBytes)
		}
		if pod.ProcessStats != nil {
			v[k+".process_count"] = p(pod.ProcessStats.ProcessCount)
		}
	}
	return v
}

// diffViews lists the keys whose values differ; fuzzy keys (values that move
// between two reads of a live machine) are compared as numbers within slack.
func diffViews(full, ev map[string]string, fuzzy func(key string) uint64) []string {
	var out []string
	for k, fv := range full {
		evv, ok := ev[k]
		if !ok {
			out = append(out, fmt.Sprintf("%s: full %s, eviction-only has none", k, fv))
			continue
		}
		if fv == evv {
			continue
		}
		if slack := fuzzy(k); slack > 0 {
			var a, b uint64
			if _, err := fmt.Sscan(fv, &a); err == nil {
				if _, err := fmt.Sscan(evv, &b); err == nil && absDiff(a, b) <= slack {
					continue
				}
			}
		}
		out = append(out, fmt.Sprintf("%s: full %s, eviction-only %s", k, fv, evv))
	}
	for k, evv := range ev {
		if _, ok := full[k]; !ok {
			out = append(out, fmt.Sprintf("%s: eviction-only %s, full has none", k, evv))
		}
	}
	sort.Strings(out)
	return out
}

// assertNoExtras checks that an eviction-only Summary really leaves out what
// eviction does not read (so the mode is not a copy of the full one).
func assertNoExtras(t *testing.T, s *statsapi.Summary) {
	t.Helper()
	n := s.Node
	if n.CPU != nil || n.IO != nil || n.Swap != nil || !n.StartTime.IsZero() || n.Memory.PSI != nil || n.Memory.RSSBytes != nil || n.Memory.PageFaults != nil {
		t.Errorf("eviction-only node has extras: cpu %v io %v swap %v start %v memory %+v", n.CPU, n.IO, n.Swap, n.StartTime, n.Memory)
	}
	for _, sc := range n.SystemContainers {
		if sc.CPU != nil || !sc.StartTime.IsZero() || sc.Memory.RSSBytes != nil {
			t.Errorf("eviction-only system container %s has extras: %+v", sc.Name, sc)
		}
	}
	for _, p := range s.Pods {
		if p.CPU != nil || p.IO != nil || !p.StartTime.IsZero() || p.Memory.PSI != nil || p.Memory.RSSBytes != nil || p.Memory.PageFaults != nil || p.Memory.AvailableBytes != nil {
			t.Errorf("eviction-only pod %s has extras: cpu %v start %v memory %+v", p.PodRef.UID, p.CPU, p.StartTime, p.Memory)
		}
		for _, c := range p.Containers {
			if c.CPU != nil || !c.StartTime.IsZero() || c.Memory.RSSBytes != nil || c.Memory.PageFaults != nil {
				t.Errorf("eviction-only container %s has extras: %+v", c.Name, c)
			}
		}
	}
}

// On fixture files nothing moves between two reads: every eviction field
// must be equal, byte for byte — except the free space of the real
// filesystem the fixture lives on, which other work on this machine moves.
func TestEvictionOnlyEqualsFullOnFixtureNode(t *testing.T) {
	cfg := fixtureNode(t)
	full, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EvictionOnly = true
	ev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := full.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	es, err := ev.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fv := evictionView(fs)
	if len(fs.Pods) != 2 || fv["pod "+uidA+".ephemeral-storage.usedBytes"] == "nil" || fv["node.pods.memory.availableBytes"] == "nil" {
		t.Fatalf("fixture Summary lacks what this test compares: %v", fv)
	}
	// The node's filesystems are this machine's real ones, read twice:
	// their free bytes and inodes move with every other process's files
	// between the reads (inodes by 2 once, on a busy machine).
	fsMoves := func(k string) uint64 {
		if !strings.HasPrefix(k, "node.") {
			return 0
		}
		for _, f := range []string{"Fs.", "fs."} {
			switch {
			case strings.HasSuffix(k, f+"availableBytes"), strings.HasSuffix(k, f+"usedBytes"):
				return 1 << 30
			case strings.HasSuffix(k, f+"inodesFree"), strings.HasSuffix(k, f+"inodesUsed"):
				return 1 << 20
			}
		}
		return 0
	}
	for _, d := range diffViews(fv, evictionView(es), fsMoves) {
		t.Error(d)
	}
	assertNoExtras(t, es)
}

// On real cgroups: a kubepods tree with running hogs, emptyDir volumes and
// logs, and a plain workload root with a nested sub-cgroup. Memory the
// kernel keeps charging between the two reads is compared within a small
// slack (the node's within what other processes on this shared machine
// move in a moment); everything else must be equal.
func TestRealEvictionOnlyEqualsFull(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	mem := cgrouptest.V1Memory
	const (
		cid1 = "1111111111111111111111111111111111111111111111111111111111111111"
		cid2 = "2222222222222222222222222222222222222222222222222222222222222222"
		cid3 = "3333333333333333333333333333333333333333333333333333333333333333"
	)
	kubelet, logs := t.TempDir(), t.TempDir()
	write(t, filepath.Join(kubelet, "pods", uidA, "volumes", emptyDirPlugin, "scratch", "data"), strings.Repeat("x", 20000))
	write(t, filepath.Join(logs, "default_web_"+uidA, cid1, "0.log"), "hello\n")
	podsDir := cgrouptest.Mkdirs(t, mem, base+"/kubepods")
	write(t, filepath.Join(podsDir, "memory.limit_in_bytes"), "1G")
	for rel, mib := range map[string]int{
		"burstable/pod" + uidA + "/" + cid1: 16,
		"burstable/pod" + uidA + "/" + cid2: 8,
		"pod" + uidC + "/" + cid3:           12,
	} {
		cgrouptest.StartHog(t, mib, cgrouptest.Mkdirs(t, mem, base+"/kubepods/"+rel))
	}
	plainNested := cgrouptest.Mkdirs(t, mem, base+"-plain/batch/worker")
	cgrouptest.StartHog(t, 8, plainNested)
	cgrouptest.StartHog(t, 4, cgrouptest.Mkdirs(t, mem, base+"-plain/web"))
	cgrouptest.Mkdirs(t, mem, base+"-plain/idle")

	for _, tc := range []struct {
		name string
		cfg  Config
		pods int
	}{
		{"kubepods", Config{PodsCgroup: base + "/kubepods", KubeletRoot: kubelet, PodLogsRoot: logs}, 2},
		{"plain", Config{WorkloadRoot: base + "-plain", KubeletRoot: kubelet, PodLogsRoot: logs}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			tc.cfg.EvictionOnly = true
			ev, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := full.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			es, err := ev.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(fs.Pods) != tc.pods || len(es.Pods) != tc.pods {
				t.Fatalf("%d and %d pods, want %d", len(fs.Pods), len(es.Pods), tc.pods)
			}
			fuzzy := func(k string) uint64 {
				switch {
				case strings.HasSuffix(k, ".time"):
					return 0 // two Summaries, two clock reads: compared below
				case strings.HasPrefix(k, "node.memory."):
					return 256 << 20 // the whole machine, shared with other builds
				case strings.HasPrefix(k, "node.fs.") || strings.HasPrefix(k, "node.imageFs.") || strings.HasPrefix(k, "node.containerFs.") || k == "node.rlimit":
					return 1 << 30 // free space and task count move with other builds
				case strings.Contains(k, "memory."):
					return 1 << 20 // idle hogs: the kernel's per-CPU charge batches at most
				}
				return 0
			}
			fv, evv := evictionView(fs), evictionView(es)
			for k := range fv {
				if strings.HasSuffix(k, ".time") || k == "node.rlimit" {
					delete(fv, k)
					if _, ok := evv[k]; !ok {
						t.Errorf("%s missing in eviction-only", k)
					}
					delete(evv, k)
				}
			}
			for _, d := range diffViews(fv, evv, fuzzy) {
				t.Error(d)
			}
			if *fs.Node.Rlimit.MaxPID != *es.Node.Rlimit.MaxPID {
				t.Errorf("rlimit maxpid %d vs %d", *fs.Node.Rlimit.MaxPID, *es.Node.Rlimit.MaxPID)
			}
			assertNoExtras(t, es)
			// The process counts are exact and not zero: one hog per
			// container, and the nested plain workload's hog is counted.
			for _, p := range es.Pods {
				want := uint64(len(p.Containers))
				switch p.PodRef.Name {
				case "batch", "web":
					want = 1
				case "idle":
					want = 0
				}
				if got := *p.ProcessStats.ProcessCount; got != want {
					t.Errorf("pod %s: %d processes, want %d", p.PodRef.Name, got, want)
				}
			}
		})
	}
}
