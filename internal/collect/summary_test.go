package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output (review the diff!)")

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// v1Cgroup writes the files a v1 memory cgroup has that the collector reads.
func v1Cgroup(t testing.TB, dir string, usage, inactiveFile, rss, pgfault, limit uint64, procs string) {
	t.Helper()
	write(t, filepath.Join(dir, "memory.usage_in_bytes"), fmt.Sprintf("%d\n", usage))
	write(t, filepath.Join(dir, "memory.limit_in_bytes"), fmt.Sprintf("%d\n", limit))
	write(t, filepath.Join(dir, "memory.stat"), fmt.Sprintf(
		"cache 0\nrss 0\npgfault %d\npgmajfault 1\ninactive_file 0\nhierarchical_memory_limit %d\ntotal_cache %d\ntotal_rss %d\ntotal_inactive_file %d\ntotal_active_file 0\ntotal_pgfault %d\n",
		pgfault, limit, inactiveFile, rss, inactiveFile, pgfault*2))
	write(t, filepath.Join(dir, "cgroup.procs"), procs)
}

// fixtureNode builds a node with a cgroupfs kubepods tree on cgroup v1 (files
// in the format captured in ../cgroup/v1/testdata) and a /proc, and returns a
// Config pointing at them.
func fixtureNode(t testing.TB) Config {
	t.Helper()
	base := t.TempDir()
	mem := filepath.Join(base, "memory")
	proc := filepath.Join(base, "proc")
	const gi = 1 << 30
	meminfo, err := os.ReadFile("testdata/meminfo") // captured on our machine: MemTotal 24683656 kB
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(proc, "meminfo"), string(meminfo))
	write(t, filepath.Join(proc, "loadavg"), "0.16 0.18 0.09 2/1000 7230\n")
	write(t, filepath.Join(proc, "sys/kernel/pid_max"), "32768\n")
	write(t, filepath.Join(proc, "sys/kernel/threads-max"), "192729\n")
	write(t, filepath.Join(proc, "uptime"), "530.32 631.36\n")
	write(t, filepath.Join(proc, "pressure/memory"), "some avg10=1.50 avg60=0.50 avg300=0.10 total=1000\nfull avg10=1.00 avg60=0.25 avg300=0.05 total=500\n")
	write(t, filepath.Join(proc, "pressure/cpu"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")

	v1Cgroup(t, mem, 6*gi, 2*gi, 3*gi, 100, 9223372036854771712, "1\n")
	// kubepods limited to node allocatable (enforceNodeAllocatable=pods).
	v1Cgroup(t, filepath.Join(mem, "kubepods"), 3*gi, gi/2, 2*gi, 50, 20*gi, "")
	v1Cgroup(t, filepath.Join(mem, "kubepods/burstable/pod"+uidA), gi, gi/4, 700<<20, 20, 9223372036854771712, "")
	v1Cgroup(t, filepath.Join(mem, "kubepods/burstable/pod"+uidA+"/c1"), 600<<20, 100<<20, 450<<20, 10, 9223372036854771712, "101\n102\n")
	v1Cgroup(t, filepath.Join(mem, "kubepods/burstable/pod"+uidA+"/c2"), 400<<20, 500<<20, 250<<20, 10, 9223372036854771712, "103\n")
	// A Guaranteed pod whose working set is above its limit: availableBytes
	// wraps around, as the kubelet's unsigned subtraction does.
	v1Cgroup(t, filepath.Join(mem, "kubepods/pod"+uidC), 300<<20, 0, 300<<20, 5, 256<<20, "")
	v1Cgroup(t, filepath.Join(mem, "kubepods/pod"+uidC+"/c4"), 300<<20, 0, 300<<20, 5, 256<<20, "104\n")

	kubelet := filepath.Join(base, "kubelet")
	write(t, filepath.Join(kubelet, "pods", uidA, "volumes", emptyDirPlugin, "scratch", "data"), string(bytes.Repeat([]byte("x"), 8192)))
	logs := filepath.Join(base, "logs")
	write(t, filepath.Join(logs, "default_web_"+uidA, "c1", "0.log"), "hello\n")

	// cpuacct.usage (ns) for the node, the pods cgroup, pod A and c1 only:
	// the other cgroups read as absent and get no CPU stats.
	cpu := filepath.Join(base, "cpuacct")
	for rel, ns := range map[string]string{"": "900000000000", "kubepods": "300000000000",
		"kubepods/burstable/pod" + uidA: "200000000000", "kubepods/burstable/pod" + uidA + "/c1": "150000000000"} {
		write(t, filepath.Join(cpu, rel, "cpuacct.usage"), ns+"\n")
	}

	return Config{
		NodeName:    "node-a",
		ProcRoot:    proc,
		SysRoot:     filepath.Join(base, "sys"), // no huge pages (TestSummaryHugePages adds some)
		Hierarchy:   &cgroup.Hierarchy{Mode: cgroup.Legacy, V1: map[string]string{"memory": mem, "cpuacct": cpu}},
		KubeletRoot: kubelet,
		PodLogsRoot: logs,
		ImageFsPath: kubelet,
		Clock:       func() time.Time { return time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC) },
	}
}

// normalize clears what depends on the machine running the test (statfs of
// the temp dir, directory times, du's block rounding) so the rest can be
// compared with the reviewed golden file; those fields are checked apart.
func normalize(s *statsapi.Summary) {
	s.Node.Fs, s.Node.Runtime = nil, nil
	for i := range s.Node.SystemContainers {
		s.Node.SystemContainers[i].StartTime = metav1.Time{}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		p.StartTime = metav1.Time{}
		for j := range p.Containers {
			p.Containers[j].StartTime = metav1.Time{}
			if l := p.Containers[j].Logs; l != nil {
				l.UsedBytes = nil
			}
		}
		for j := range p.VolumeStats {
			p.VolumeStats[j].UsedBytes = nil
		}
		if p.EphemeralStorage != nil {
			p.EphemeralStorage.UsedBytes = nil
		}
	}
}

func TestSummaryGoldenOnFixtureNode(t *testing.T) {
	cfg := fixtureNode(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.PodsCgroup() != "/kubepods" {
		t.Fatalf("pods cgroup %q", c.PodsCgroup())
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Machine-dependent parts, checked against their definitions.
	if s.Node.Fs == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || *s.Node.Runtime.ImageFs.CapacityBytes != *s.Node.Fs.CapacityBytes {
		t.Errorf("fs %+v runtime %+v: imagefs on the same device must equal nodefs", s.Node.Fs, s.Node.Runtime)
	}
	if es := s.Pods[0].EphemeralStorage; es == nil || *es.UsedBytes < 8192 || *es.InodesUsed < 5 {
		t.Errorf("pod A ephemeral storage %+v", es)
	}
	normalize(s)
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := "testdata/summary.golden.json"
	if *update {
		write(t, golden, string(got))
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update and review the file)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Summary differs from %s; got:\n%s", golden, got)
	}
}

// The numbers the kubelet's eviction manager reads, spelled out (the golden
// file holds them too; this says why they are what they are).
func TestSummaryKubeletArithmetic(t *testing.T) {
	c, err := New(fixtureNode(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const gi = 1 << 30
	memTotal := uint64(24683656 * 1024)
	n := s.Node.Memory
	if *n.WorkingSetBytes != 4*gi || *n.UsageBytes != 6*gi || *n.AvailableBytes != memTotal-4*gi {
		t.Errorf("node memory %d %d %d", *n.UsageBytes, *n.WorkingSetBytes, *n.AvailableBytes)
	}
	if n.PSI == nil || n.PSI.Some.Total != 1000*1000 || n.PSI.Full.Avg10 != 1.0 {
		t.Errorf("node memory PSI %+v (totals µs→ns)", n.PSI)
	}
	pods := s.Node.SystemContainers[0]
	if pods.Name != "pods" || *pods.Memory.WorkingSetBytes != 3*gi-gi/2 || *pods.Memory.AvailableBytes != 20*gi-(3*gi-gi/2) {
		t.Errorf("pods container %+v", pods.Memory)
	}
	if *s.Node.Rlimit.MaxPID != 32768 || *s.Node.Rlimit.NumOfRunningProcesses != 1000 {
		t.Errorf("rlimit %+v", s.Node.Rlimit)
	}
	if len(s.Pods) != 2 {
		t.Fatalf("%d pods", len(s.Pods))
	}
	a := s.Pods[0] // /kubepods/burstable/pod<uidA> sorts first
	if a.PodRef.UID != uidA || *a.Memory.WorkingSetBytes != gi-gi/4 || a.Memory.AvailableBytes != nil {
		t.Errorf("pod A %+v %+v", a.PodRef, a.Memory)
	}
	if *a.ProcessStats.ProcessCount != 3 || len(a.Containers) != 2 {
		t.Errorf("pod A procs %d containers %d", *a.ProcessStats.ProcessCount, len(a.Containers))
	}
	// c2's inactive_file (500Mi) exceeds its usage (400Mi): floored at 0.
	if a.Containers[1].Name != "c2" || *a.Containers[1].Memory.WorkingSetBytes != 0 {
		t.Errorf("c2 %+v", a.Containers[1].Memory)
	}
	if len(a.VolumeStats) != 1 || a.VolumeStats[0].Name != "scratch" || a.Containers[0].Logs == nil {
		t.Errorf("pod A volumes %+v logs %+v", a.VolumeStats, a.Containers[0].Logs)
	}
	g := s.Pods[1]
	lim, ws := uint64(256<<20), uint64(300<<20)
	if want := lim - ws; *g.Memory.AvailableBytes != want {
		t.Errorf("guaranteed pod available %d, want the unsigned wrap %d", *g.Memory.AvailableBytes, want)
	}
	if r, _ := c.ReadPodsCgroupMemory(); r.Usage != 3*gi || r.InactiveFile != gi/2 || r.WorkingSet != 3*gi-gi/2 {
		t.Errorf("ReadPodsCgroupMemory %+v", r)
	}
}

// usageNanoCores is the rate between two Summaries, on the injected clock.
func TestSummaryUsageNanoCores(t *testing.T) {
	cfg := fixtureNode(t)
	now := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	cfg.Clock = func() time.Time { return now }
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.CPU == nil || *s.Node.CPU.UsageCoreNanoSeconds != 900e9 || s.Node.CPU.UsageNanoCores != nil {
		t.Fatalf("first Summary: node cpu %+v (no rate without a previous sample)", s.Node.CPU)
	}
	// 10 s later the node used 15 more CPU-seconds: 1.5 cores.
	now = now.Add(10 * time.Second)
	write(t, filepath.Join(cfg.Hierarchy.V1["cpuacct"], "cpuacct.usage"), "915000000000\n")
	if s, err = c.Summary(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.Node.CPU.UsageNanoCores; n == nil || *n != 1500000000 {
		t.Errorf("node usageNanoCores %v, want 1.5e9", n)
	}
	if n := s.Pods[0].CPU.UsageNanoCores; n == nil || *n != 0 {
		t.Errorf("idle pod usageNanoCores %v, want 0", n)
	}
	// Also on a node without pods.
	cfg.PodsCgroup, cfg.Hierarchy.V1["memory"] = "", t.TempDir()
	for _, f := range []string{"memory.usage_in_bytes", "memory.stat"} {
		b, _ := os.ReadFile(filepath.Join(fixtureMem(t, c), f))
		write(t, filepath.Join(cfg.Hierarchy.V1["memory"], f), string(b))
	}
	c2, err := New(cfg)
	if err != nil || c2.PodsCgroup() != "" {
		t.Fatalf("%v %q", err, c2.PodsCgroup())
	}
	for i := range 2 {
		now = now.Add(10 * time.Second)
		write(t, filepath.Join(cfg.Hierarchy.V1["cpuacct"], "cpuacct.usage"), fmt.Sprintf("%d\n", 915000000000+(i+1)*5000000000))
		if s, err = c2.Summary(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Node.CPU.UsageNanoCores; n == nil || *n != 500000000 || len(s.Pods) != 0 {
		t.Errorf("node without pods: usageNanoCores %v, want 0.5e9", n)
	}
}

func fixtureMem(t *testing.T, c *Collector) string {
	t.Helper()
	r, _ := c.MemoryRoot()
	return r
}

func TestSummaryFailsLoudlyOnBadFiles(t *testing.T) {
	cfg := fixtureNode(t)
	mem := cfg.Hierarchy.V1["memory"]
	write(t, filepath.Join(mem, "kubepods/pod"+uidC+"/memory.stat"), "total_rss 1\ntotal_inactive_file oops\n")
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Summary(context.Background())
	var pe *cgroup.ParseError
	if err == nil || !errors.As(err, &pe) || pe.Line != 2 || pe.Token != "oops" {
		t.Fatalf("got %v, want a parse error naming line 2 and the token", err)
	}
	// A pod whose cgroup vanished is skipped, not an error.
	write(t, filepath.Join(mem, "kubepods/pod"+uidC+"/memory.stat"), "total_rss 1\n")
	if err := os.RemoveAll(filepath.Join(mem, "kubepods/burstable/pod"+uidA)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Summary(context.Background())
	if err != nil || len(s.Pods) != 1 {
		t.Fatalf("after removal: %v pods, %v", len(s.Pods), err)
	}
}

// BenchmarkSummaryFixtureNode is the Summary builder's user-space cost on
// the fixture node (files on a normal filesystem, so no cgroup kernel work):
// what evictd adds on top of the kernel's time generating the files.
func BenchmarkSummaryFixtureNode(b *testing.B) {
	cfg := fixtureNode(b)
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Summary(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// The kubelet's adjustForHugePages cases (summary_hugepages_test.go of
// k8s.io/kubernetes v1.37.2), on evictd's step of the same name.
func TestAdjustForHugePages(t *testing.T) {
	const gi = 1 << 30
	for _, c := range []struct {
		name                      string
		available, hugePages, out uint64
	}{
		{"no huge pages", 10000, 0, 10000},
		{"subtracted", 10 * gi, 4 * gi, 6 * gi},
		{"several sizes (summed by the caller)", 10 * gi, 2*gi + 1*gi, 7 * gi},
		{"more than available: 0", 2 * gi, 4 * gi, 0},
		{"equal: 0", 4 * gi, 4 * gi, 0},
		// The kubelet subtracts unsigned: a working set above MemTotal
		// wraps around, and the adjustment applies to the wrapped value.
		{"wrapped", ^uint64(0) - 10, gi, ^uint64(0) - 10 - gi},
	} {
		if got := adjustForHugePages(c.available, c.hugePages); got != c.out {
			t.Errorf("%s: adjustForHugePages(%d, %d) = %d, want %d", c.name, c.available, c.hugePages, got, c.out)
		}
	}
}

// With huge pages reserved the node's memory.available (and so its
// capacity, available + working set, as the kubelet observes it) drops by
// the pools' size, every size counted; the pods' allocatable figure does
// not move; a pool file that cannot be read fails the Summary instead of
// silently counting no huge pages.
func TestSummaryHugePages(t *testing.T) {
	cfg := fixtureNode(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hp := filepath.Join(cfg.SysRoot, "kernel/mm/hugepages")
	write(t, filepath.Join(hp, "hugepages-2048kB/nr_hugepages"), "64\n")
	write(t, filepath.Join(hp, "hugepages-1048576kB/nr_hugepages"), "1\n")
	after, err := c.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const reserved = 64*2<<20 + 1<<30
	if got, want := *after.Node.Memory.AvailableBytes, *before.Node.Memory.AvailableBytes-reserved; got != want {
		t.Errorf("node availableBytes %d with %d bytes of huge pages, want %d", got, uint64(reserved), want)
	}
	if *after.Node.Memory.WorkingSetBytes != *before.Node.Memory.WorkingSetBytes {
		t.Errorf("working set moved: %d → %d", *before.Node.Memory.WorkingSetBytes, *after.Node.Memory.WorkingSetBytes)
	}
	if b, a := before.Node.SystemContainers[0].Memory, after.Node.SystemContainers[0].Memory; *a.AvailableBytes != *b.AvailableBytes {
		t.Errorf("pods availableBytes moved: %d → %d (the kubelet adjusts the node's only)", *b.AvailableBytes, *a.AvailableBytes)
	}
	write(t, filepath.Join(hp, "hugepages-2048kB/nr_hugepages"), "lots\n")
	if _, err := c.Summary(context.Background()); err == nil || !strings.Contains(err.Error(), "nr_hugepages") {
		t.Errorf("a malformed nr_hugepages: error %v, want one naming the file", err)
	}
}
