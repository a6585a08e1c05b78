package v1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

func TestMain(m *testing.M) {
	cgrouptest.RunHogIfChild()
	os.Exit(m.Run())
}

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The fixtures were captured on this kernel (Linux 6.18, hybrid hierarchy)
// from a cgroup holding a 24 MiB anonymous hog plus 4 MiB of page cache; see
// testdata/README.
func TestParseMemoryStatCapturedHog(t *testing.T) {
	s, err := parseMemoryStat(open(t, "memory.stat.hog"))
	if err != nil {
		t.Fatal(err)
	}
	usage, err := parseMemoryUsageInBytes(open(t, "memory.usage_in_bytes.hog"))
	if err != nil {
		t.Fatal(err)
	}
	if usage != 41095168 || s.TotalInactiveFile != 4194304 || s.TotalRSS != 36392960 || s.TotalCache != 4194304 {
		t.Fatalf("usage %d, stat %+v", usage, s)
	}
	if s.HierarchicalMemoryLimit != 64<<20 || !s.HasTotals {
		t.Errorf("hierarchical_memory_limit %d", s.HierarchicalMemoryLimit)
	}
	if got, want := WorkingSet(usage, &s), uint64(41095168-4194304); got != want {
		t.Errorf("working set %d, want %d", got, want)
	}
	if v, ok := s.Get("hierarchical_memsw_limit"); !ok || v != Unlimited {
		t.Errorf("hierarchical_memsw_limit %d %v", v, ok)
	}
	if len(s.Entries) < 40 {
		t.Errorf("only %d entries kept", len(s.Entries))
	}
}

func TestParseMemoryStatRootAndOddities(t *testing.T) {
	s, err := parseMemoryStat(open(t, "memory.stat.root"))
	if err != nil || !s.HasTotals || s.TotalInactiveFile == 0 {
		t.Fatalf("root: %+v %v", s, err)
	}
	// Unknown keys are kept, negatives clamp, inactive_file above usage
	// floors the working set at 0 (the kubelet never reports a negative).
	s, err = parseMemoryStat(strings.NewReader("total_inactive_file 500\ntotal_rss -4096\nfuture_key 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get("future_key"); !ok || v != 9 || s.TotalRSS != 0 {
		t.Errorf("got %+v", s)
	}
	if ws := WorkingSet(100, &s); ws != 0 {
		t.Errorf("working set %d, want 0", ws)
	}
	for _, bad := range []string{"", "cache\n", "cache 1\nrss x1\n"} {
		_, err := parseMemoryStat(strings.NewReader(bad))
		var pe *cgroup.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a parse error", bad, err)
		}
	}
}

func TestParseSmallFiles(t *testing.T) {
	if v, err := parseMemoryLimitInBytes(open(t, "memory.limit_in_bytes.unlimited")); err != nil || v != Unlimited {
		t.Errorf("unlimited: %d %v", v, err)
	}
	if v, err := parseMemoryLimitInBytes(open(t, "memory.limit_in_bytes.64m")); err != nil || v != 64<<20 {
		t.Errorf("64m: %d %v", v, err)
	}
	o, err := parseMemoryOOMControl(open(t, "memory.oom_control"))
	if err != nil || o.OOMKillDisable || o.UnderOOM || !o.HasOOMKill || o.OOMKill != 0 {
		t.Errorf("oom_control: %+v %v", o, err)
	}
	o, err = parseMemoryOOMControl(strings.NewReader("oom_kill_disable 1\nunder_oom 1\noom_kill 3\n"))
	if err != nil || !o.OOMKillDisable || !o.UnderOOM || o.OOMKill != 3 {
		t.Errorf("oom_control: %+v %v", o, err)
	}
	c, err := parseCPUStat(open(t, "cpu.stat"))
	if err != nil || len(c.Entries) != 5 {
		t.Errorf("cpu.stat: %+v %v", c, err)
	}
	c, err = parseCPUStat(strings.NewReader("nr_periods 38\nnr_throttled 37\nthrottled_time 1592698000\n"))
	if err != nil || c.NrPeriods != 38 || c.NrThrottled != 37 || c.ThrottledTimeNs != 1592698000 {
		t.Errorf("cpu.stat: %+v %v", c, err)
	}
	if v, err := parsePidsMax(open(t, "pids.max.max")); err != nil || v != cgroup.Max {
		t.Errorf("pids.max max: %d %v", v, err)
	}
	if v, err := parsePidsMax(open(t, "pids.max.100")); err != nil || v != 100 {
		t.Errorf("pids.max 100: %d %v", v, err)
	}
	if v, err := parseCPUAcctUsage(open(t, "cpuacct.usage")); err != nil || v == 0 {
		t.Errorf("cpuacct.usage: %d %v", v, err)
	}
}

// TestRealMemoryCgroup creates a v1 memory cgroup, runs a 32 MiB hog in it
// and compares the readers with the kernel's own files read the plain way.
func TestRealMemoryCgroup(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte("128M"), 0); err != nil {
		t.Fatal(err)
	}
	hog := cgrouptest.StartHog(t, 32, dir)

	usage, err := ReadMemoryUsageInBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := ReadMemoryStat(dir)
	if err != nil {
		t.Fatal(err)
	}
	kUsage := cgrouptest.ReadUint(t, filepath.Join(dir, "memory.usage_in_bytes"))
	kStat := cgrouptest.ReadKeyed(t, filepath.Join(dir, "memory.stat"))
	// The hog is idle, so its charge is stable; allow a few pages of slack
	// for the kernel's own per-cpu batching between the two reads.
	const slack = 1 << 20
	if diff(usage, kUsage) > slack {
		t.Errorf("usage %d, kernel file says %d", usage, kUsage)
	}
	if usage < 32<<20 {
		t.Errorf("usage %d is below the hog's 32 MiB", usage)
	}
	if diff(stat.TotalRSS, kStat["total_rss"]) > slack || stat.TotalRSS < 32<<20 {
		t.Errorf("total_rss %d, kernel %d", stat.TotalRSS, kStat["total_rss"])
	}
	if len(stat.Entries) != len(kStat) {
		t.Errorf("%d entries, kernel file has %d", len(stat.Entries), len(kStat))
	}
	if limit, err := ReadMemoryLimitInBytes(dir); err != nil || limit != 128<<20 {
		t.Errorf("limit %d %v", limit, err)
	}
	if max, err := ReadMemoryMaxUsageInBytes(dir); err != nil || max < usage-slack {
		t.Errorf("max usage %d < usage %d (%v)", max, usage, err)
	}
	pids, err := cgroup.ReadCgroupProcs(dir)
	if err != nil || len(pids) != 1 || pids[0] != hog.PID {
		t.Errorf("cgroup.procs %v %v, want [%d]", pids, err, hog.PID)
	}
	if o, err := ReadMemoryOOMControl(dir); err != nil || !o.HasOOMKill {
		t.Errorf("oom_control %+v %v", o, err)
	}
	// A file this kernel does not have on v1 is not-supported, not 0.
	if _, err := cgroup.ReadFile(dir, "memory.events", "4.5 (cgroup v2)", parseMemoryUsageInBytes); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("memory.events on v1: %v", err)
	}
}

// TestRealOOMKillCounted runs a hog bigger than its cgroup's limit and checks
// oom_kill counts it (kernel 4.13+), so the OOM counter is not a silent 0.
func TestRealOOMKillCounted(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte("16M"), 0); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte("16M"), 0) // no swap escape where memsw exists
	if err := cgrouptest.RunHogToDeath(t, 48, dir); err == nil {
		t.Fatalf("a 48 MiB hog exited cleanly in a 16 MiB cgroup")
	}
	o, err := ReadMemoryOOMControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.OOMKill < 1 {
		t.Errorf("oom_kill = %d after an OOM kill", o.OOMKill)
	}
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestRealPidsAndCPU reads the pids and cpu controllers' files of real
// cgroups and compares them with the kernel's files read the plain way.
func TestRealPidsAndCPU(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	const pidsRoot, cpuRoot = "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"
	_, err := os.Stat(pidsRoot + "/cgroup.procs")
	cgrouptest.NeedReal(t, err == nil, "the v1 pids controller at %s: %v", pidsRoot, err)
	name := cgrouptest.UniqueName(t)
	pids := cgrouptest.Mkdirs(t, pidsRoot, name)
	if err := os.WriteFile(filepath.Join(pids, "pids.max"), []byte("100"), 0); err != nil {
		t.Fatal(err)
	}
	cgrouptest.StartHog(t, 1, pids)
	cur, err := ReadPidsCurrent(pids)
	if err != nil || cur < 1 || cur != cgrouptest.ReadUint(t, filepath.Join(pids, "pids.current")) {
		t.Errorf("pids.current %d %v", cur, err)
	}
	if m, err := ReadPidsMax(pids); err != nil || m != 100 {
		t.Errorf("pids.max %d %v", m, err)
	}
	if _, err := ReadPidsMax(pidsRoot); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("root pids.max: %v, want not-supported (the root has none)", err)
	}
	_, err = os.Stat(cpuRoot + "/cpu.stat")
	cgrouptest.NeedReal(t, err == nil, "the v1 cpu controller at %s: %v", cpuRoot, err)
	s, err := ReadCPUStat(cpuRoot)
	if err != nil {
		t.Fatal(err)
	}
	k := cgrouptest.ReadKeyed(t, cpuRoot+"/cpu.stat")
	if len(s.Entries) != len(k) || s.NrPeriods != k["nr_periods"] || s.ThrottledTimeNs != k["throttled_time"] {
		t.Errorf("cpu.stat %+v, kernel %v", s, k)
	}
}
