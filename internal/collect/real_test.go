package collect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/host"
)

func TestMain(m *testing.M) {
	cgrouptest.RunHogIfChild()
	os.Exit(m.Run())
}

// kernelWorkingSet reads usage_in_bytes − total_inactive_file the plain way.
func kernelWorkingSet(t *testing.T, dir string) uint64 {
	t.Helper()
	u := cgrouptest.ReadUint(t, filepath.Join(dir, "memory.usage_in_bytes"))
	in := cgrouptest.ReadKeyed(t, filepath.Join(dir, "memory.stat"))["total_inactive_file"]
	if in > u {
		return 0
	}
	return u - in
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestRealKubepodsTreeV1 builds kubepods-shaped trees with both drivers'
// names on this machine's v1 memory controller, runs hogs in the container
// cgroups, and checks the Summary against the kernel's own files.
func TestRealKubepodsTreeV1(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	const (
		cid1 = "1111111111111111111111111111111111111111111111111111111111111111"
		cid2 = "2222222222222222222222222222222222222222222222222222222222222222"
		cid3 = "3333333333333333333333333333333333333333333333333333333333333333"
	)
	mem := cgrouptest.V1Memory
	for _, tc := range []struct {
		driver, pods string
		containers   map[string]int // container cgroup (relative to base) → hog MiB
		wantIDs      []string
	}{
		{"cgroupfs", "kubepods", map[string]int{
			"kubepods/burstable/pod" + uidA + "/" + cid1: 16,
			"kubepods/burstable/pod" + uidA + "/" + cid2: 24,
			"kubepods/pod" + uidC + "/" + cid3:           32,
		}, []string{cid1, cid2, cid3}},
		{"systemd", "kubepods.slice", map[string]int{
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uidA, "-", "_") + ".slice/cri-containerd-" + cid1 + ".scope": 16,
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uidA, "-", "_") + ".slice/cri-containerd-" + cid2 + ".scope": 24,
			"kubepods.slice/kubepods-pod" + strings.ReplaceAll(uidC, "-", "_") + ".slice/cri-containerd-" + cid3 + ".scope":                                    32,
		}, []string{cid1, cid2, cid3}},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			podsRel := "/" + base + "-" + tc.driver + "/" + tc.pods
			podsDir := cgrouptest.Mkdirs(t, mem, strings.TrimPrefix(podsRel, "/"))
			if err := cgroupv1.WriteMemoryLimitInBytes(podsDir, 1<<30); err != nil {
				t.Fatal(err)
			}
			dirs := map[string]string{}
			for rel, mib := range tc.containers {
				d := cgrouptest.Mkdirs(t, mem, base+"-"+tc.driver+"/"+rel)
				dirs[rel] = d
				cgrouptest.StartHog(t, mib, d)
			}
			tmp := t.TempDir()
			c, err := New(Config{PodsCgroup: podsRel, KubeletRoot: tmp, PodLogsRoot: tmp,
				Clock: func() time.Time { return time.Unix(1800000000, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Pods) != 2 {
				t.Fatalf("%d pods, want 2", len(s.Pods))
			}
			const slack = 1 << 20
			seen := map[string]bool{}
			for _, p := range s.Pods {
				var podMiB int
				for _, ct := range p.Containers {
					seen[ct.Name] = true
					var dir string
					var mib int
					for rel, d := range dirs {
						if strings.Contains(rel, ct.Name) {
							dir, mib = d, tc.containers[rel]
						}
					}
					podMiB += mib
					ws := *ct.Memory.WorkingSetBytes
					if k := kernelWorkingSet(t, dir); absDiff(ws, k) > slack {
						t.Errorf("container %s: working set %d, kernel files say %d", ct.Name, ws, k)
					}
					if ws < uint64(mib)<<20 {
						t.Errorf("container %s: working set %d below its %d MiB hog", ct.Name, ws, mib)
					}
					if !ct.Memory.Time.Equal(&s.Node.Memory.Time) || ct.Memory.Time.Unix() != 1800000000 {
						t.Errorf("container stats time %v: not the injected clock", ct.Memory.Time)
					}
				}
				if ws := *p.Memory.WorkingSetBytes; ws < uint64(podMiB)<<20 {
					t.Errorf("pod %s: working set %d below its hogs' %d MiB", p.PodRef.UID, ws, podMiB)
				}
				if n := *p.ProcessStats.ProcessCount; n != uint64(len(p.Containers)) {
					t.Errorf("pod %s: %d processes, want %d (one hog per container)", p.PodRef.UID, n, len(p.Containers))
				}
			}
			for _, id := range tc.wantIDs {
				if !seen[id] {
					t.Errorf("container %s not in the Summary", id)
				}
			}
			pods := s.Node.SystemContainers[0]
			kws := kernelWorkingSet(t, podsDir)
			if pods.Name != "pods" || absDiff(*pods.Memory.WorkingSetBytes, kws) > slack || *pods.Memory.WorkingSetBytes < 72<<20 {
				t.Errorf("pods container working set %d, kernel %d", *pods.Memory.WorkingSetBytes, kws)
			}
			if *pods.Memory.AvailableBytes != (1<<30)-*pods.Memory.WorkingSetBytes {
				t.Errorf("pods available %d: not limit − working set", *pods.Memory.AvailableBytes)
			}
			mi, err := host.ReadMeminfo("/proc")
			if err != nil {
				t.Fatal(err)
			}
			n := s.Node.Memory
			if *n.AvailableBytes != mi.MemTotal-*n.WorkingSetBytes {
				t.Errorf("node available %d != MemTotal %d − working set %d", *n.AvailableBytes, mi.MemTotal, *n.WorkingSetBytes)
			}
			// Other engineers share this machine: the node's working set
			// moves between two reads, so compare loosely.
			if k := kernelWorkingSet(t, mem); absDiff(*n.WorkingSetBytes, k) > 256<<20 {
				t.Errorf("node working set %d, kernel %d", *n.WorkingSetBytes, k)
			}
			hm, err := c.ReadPodsCgroupMemory()
			if err != nil || absDiff(hm.WorkingSet, kws) > slack {
				t.Errorf("ReadPodsCgroupMemory %+v %v, kernel working set %d", hm, err, kws)
			}
			if s.Node.Rlimit == nil || *s.Node.Rlimit.MaxPID <= 0 || *s.Node.Rlimit.NumOfRunningProcesses <= 0 {
				t.Errorf("rlimit %+v", s.Node.Rlimit)
			}
			if s.Node.Fs == nil || *s.Node.Fs.CapacityBytes == 0 || *s.Node.Fs.Inodes == 0 {
				t.Errorf("node fs %+v", s.Node.Fs)
			}
		})
	}
}

// TestRealPlainWorkloadRoot: without Kubernetes, each child cgroup of a
// workload root is one workload.
func TestRealPlainWorkloadRoot(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	web := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, base+"/web")
	cgrouptest.Mkdirs(t, cgrouptest.V1Memory, base+"/idle")
	cgrouptest.StartHog(t, 20, web)
	c, err := New(Config{WorkloadRoot: base, KubeletRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || s.Pods[1].PodRef.Name != "web" || *s.Pods[1].Memory.WorkingSetBytes < 20<<20 || *s.Pods[1].ProcessStats.ProcessCount != 1 {
		t.Fatalf("plain workloads %+v", s.Pods)
	}
	if s.Node.SystemContainers[0].Name != "pods" {
		t.Errorf("workload root not reported as the pods container")
	}
}

// TestRealStatV1 checks what `evictd stat` shows on v1: the working set from
// the v1 formula, throttling in seconds from nanoseconds, and an OOM kill in
// a container counted in that container's cgroup.
func TestRealStatV1(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	base := cgrouptest.UniqueName(t)
	pod := base + "/kubepods/burstable/pod" + uidA
	live := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pod+"/live")
	oomed := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pod+"/oomed")
	if err := cgroupv1.WriteMemoryLimitInBytes(oomed, 16<<20); err != nil {
		t.Fatal(err)
	}
	// No swap escape where swap is accounted (memsw exists).
	if err := cgroupv1.WriteMemoryMemswLimitInBytes(oomed, 16<<20); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal(err)
	}
	cgrouptest.StartHog(t, 24, live)
	if err := cgrouptest.RunHogToDeath(t, 48, oomed); err == nil {
		t.Fatal("a 48 MiB hog exited cleanly under a 16 MiB limit")
	}
	c, err := New(Config{PodsCgroup: base + "/kubepods", KubeletRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := c.StatWorkloads(uidA)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || len(stats[0].Containers) != 2 || stats[0].Kind != "pod" {
		t.Fatalf("stats %+v", stats)
	}
	for _, cs := range stats[0].Containers {
		dir := filepath.Join(cgrouptest.V1Memory, cs.Cgroup)
		if k := kernelWorkingSet(t, dir); absDiff(cs.WorkingSetBytes, k) > 1<<20 {
			t.Errorf("%s: working set %d, kernel %d", cs.ContainerID, cs.WorkingSetBytes, k)
		}
		switch cs.ContainerID {
		case "live":
			if cs.WorkingSetBytes < 24<<20 || cs.OOM.Kills != 0 {
				t.Errorf("live: %+v", cs)
			}
		case "oomed":
			if cs.OOM.Kills < 1 || cs.LimitBytes == nil || *cs.LimitBytes != 16<<20 {
				t.Errorf("oomed: kills %d limit %v", cs.OOM.Kills, cs.LimitBytes)
			}
		}
	}
	if k := stats[0].OOM.Kills; k < 1 {
		t.Errorf("pod row OOM kills %d: the container's kill must be added on v1", k)
	}
	if _, err := c.StatWorkloads("00000000-0000-0000-0000-000000000000"); !errors.Is(err, ErrNoSuchPod) {
		t.Errorf("unknown pod: %v", err)
	}
	one, err := c.StatCgroup(filepath.Join(cgrouptest.V1Memory, pod, "live"))
	if err != nil || one.Cgroup != "/"+pod+"/live" || one.WorkingSetBytes < 24<<20 {
		t.Errorf("StatCgroup by absolute path: %+v %v", one, err)
	}
	if _, err := c.StatCgroup("/" + base + "/no-such"); !gone(err) {
		t.Errorf("missing cgroup: %v, want not-exist", err)
	}
}

// TestRealKubepodsTreeV2 is the v2 tier of the Summary and stat: a
// systemd-driver kubepods tree in a pure cgroup v2 hierarchy with hogs, and a
// container OOM-killed whose kill survives in the POD's memory.events. It
// skips on this host (memory on v1) and runs in the VM.
func TestRealKubepodsTreeV2(t *testing.T) {
	root := cgrouptest.RequireV2Memory(t)
	base := cgrouptest.UniqueName(t)
	podRel := base + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uidA, "-", "_") + ".slice"
	live := cgrouptest.Mkdirs(t, root, podRel+"/cri-containerd-live.scope")
	oomed := cgrouptest.Mkdirs(t, root, podRel+"/cri-containerd-oomed.scope")
	cgrouptest.EnableV2Controllers(t, root, podRel)
	if err := cgroupv2.WriteMemoryMax(oomed, 16<<20); err != nil {
		t.Fatal(err)
	}
	if err := cgroupv2.WriteMemorySwapMax(oomed, 0); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal(err)
	}
	cgrouptest.StartHog(t, 24, live)
	if err := cgrouptest.RunHogToDeath(t, 48, oomed); err == nil {
		t.Fatal("a 48 MiB hog exited cleanly under memory.max=16M")
	}
	c, err := New(Config{PodsCgroup: base + "/kubepods.slice", KubeletRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, v := c.MemoryRoot(); v != 2 {
		t.Fatalf("memory on cgroup v%d, want 2", v)
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 2 {
		t.Fatalf("pods %+v", s.Pods)
	}
	for _, ct := range s.Pods[0].Containers {
		dir := filepath.Join(root, podRel, "cri-containerd-"+ct.Name+".scope")
		cur := cgrouptest.ReadUint(t, filepath.Join(dir, "memory.current"))
		inactive := cgrouptest.ReadKeyed(t, filepath.Join(dir, "memory.stat"))["inactive_file"]
		if k := cur - min(cur, inactive); absDiff(*ct.Memory.WorkingSetBytes, k) > 1<<20 {
			t.Errorf("%s: working set %d, kernel %d", ct.Name, *ct.Memory.WorkingSetBytes, k)
		}
	}
	if s.Pods[0].Memory.PSI == nil {
		t.Errorf("pod memory PSI missing on v2")
	}
	if s.Node.Memory == nil || *s.Node.Memory.UsageBytes == 0 {
		t.Errorf("node memory from the v2 root's memory.stat: %+v", s.Node.Memory)
	}
	stats, err := c.StatWorkloads(uidA)
	if err != nil {
		t.Fatal(err)
	}
	if o := stats[0].OOM; o == nil || o.Kills < 1 {
		t.Errorf("pod-level OOM kills %+v: the container's kill must show at the pod", o)
	}
	if stats[0].CPU == nil && len(stats[0].Notes) == 0 {
		t.Errorf("no throttling and no note")
	}
}

// TestRealDedicatedImageFs mounts a 64 MiB tmpfs as the runtime's root: a
// filesystem on another device becomes the imagefs (and containerfs), while
// the node fs stays the kubelet root's.
func TestRealDedicatedImageFs(t *testing.T) {
	cgrouptest.NeedReal(t, os.Geteuid() == 0, "root to mount a tmpfs")
	cfg := fixtureNode(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,nr_inodes=1000"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	cfg.ImageFsPath = dir
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	img := s.Node.Runtime.ImageFs
	if *img.CapacityBytes != 64<<20 || *img.Inodes != 1000 || *s.Node.Fs.CapacityBytes == 64<<20 {
		t.Errorf("imagefs %d bytes %d inodes; nodefs %d bytes", *img.CapacityBytes, *img.Inodes, *s.Node.Fs.CapacityBytes)
	}
	if s.Node.Runtime.ContainerFs == nil || *s.Node.Runtime.ContainerFs.CapacityBytes != 64<<20 {
		t.Errorf("containerfs %+v, want the imagefs", s.Node.Runtime.ContainerFs)
	}
}
