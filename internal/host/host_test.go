package host

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// vmProc holds copies of files the VM tier captured (../cgroup/v2/testdata/captured/proc):
// each package carries its own testdata, which is all the VM tier ships.
const vmProc = "testdata/vm/"

func TestParseMeminfoCaptured(t *testing.T) {
	// Captured on this machine (24 GiB) and in the VM (512 MiB).
	m, err := parseMeminfo(open(t, "testdata/meminfo"))
	if err != nil || m.MemTotal != 24683656*1024 || m.MemFree == 0 || m.MemAvailable == 0 {
		t.Fatalf("%+v %v", m.MemTotal, err)
	}
	if len(m.Entries) < 40 {
		t.Errorf("only %d entries", len(m.Entries))
	}
	m, err = parseMeminfo(open(t, vmProc+"meminfo"))
	if err != nil || m.MemTotal == 0 || m.MemTotal > 512<<20 {
		t.Fatalf("vm meminfo %d %v", m.MemTotal, err)
	}
	// HugePages_Total has no unit: kept as a count, not ×1024.
	m, err = parseMeminfo(strings.NewReader("MemTotal:       1000 kB\nHugePages_Total:       3\n"))
	if err != nil || m.MemTotal != 1024000 || m.Entries[1].Bytes != 3 {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{"MemFree: 1 kB\n", "MemTotal: x kB\n", "MemTotal 1 kB\n", "MemTotal: 1 MB\n"} {
		var pe *ParseError
		if _, err := parseMeminfo(strings.NewReader(bad)); !errors.As(err, &pe) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParsePressureCaptured(t *testing.T) {
	p, err := ParsePressure(open(t, vmProc+"pressure.memory"))
	if err != nil || !p.HasFull {
		t.Fatalf("%+v %v", p, err)
	}
	p, err = ParsePressure(open(t, "testdata/pressure.cpu"))
	if err != nil || p.Some.Avg10 != 74.48 || p.Some.TotalUs != 228568914 {
		t.Fatalf("%+v %v", p, err)
	}
	// The system-wide cpu file before 5.13 has no full line.
	p, err = ParsePressure(strings.NewReader("some avg10=0.10 avg60=0.20 avg300=0.30 total=42\n"))
	if err != nil || p.HasFull || p.Some.Avg300 != 0.30 || p.Some.TotalUs != 42 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range []string{"", "full avg10=0 avg60=0 avg300=0 total=0\n", "some avg10=x avg60=0 avg300=0 total=0\n",
		"some avg10=0 avg60=0 avg300=0\n", "other avg10=0\n", "some avg10=-1 avg60=0 avg300=0 total=0\n"} {
		if _, err := ParsePressure(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseLoadavg(t *testing.T) {
	l, err := parseLoadavg(open(t, "testdata/loadavg"))
	if err != nil || l.Tasks != 123 || l.Runnable != 4 {
		t.Fatalf("%+v %v", l, err)
	}
	for _, bad := range []string{"", "0.1 0.2 0.3 2 7230\n", "0.1 0.2 0.3 2/x 7230\n", "0.1 0.2 0.3 2/3\n"} {
		if _, err := parseLoadavg(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	ms, err := ParseMountinfo(open(t, "testdata/mountinfo.hybrid"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		if m.MountPoint == "/sys/fs/cgroup/memory" {
			found = m.FSType == "cgroup" && m.SuperOptions == "rw,memory"
		}
	}
	if !found {
		t.Errorf("memory mount not parsed: %+v", ms)
	}
	ms, err = ParseMountinfo(strings.NewReader(`36 35 98:0 /mnt1 /mnt\0402 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue` + "\n"))
	if err != nil || len(ms) != 1 || ms[0].MountPoint != "/mnt 2" || ms[0].FSType != "ext3" || ms[0].Major != 98 {
		t.Fatalf("%+v %v", ms, err)
	}
	if _, err := ParseMountinfo(strings.NewReader("36 35 98:0 /mnt1 /mnt2 rw ext3\n")); err == nil {
		t.Error("no separator: no error")
	}
}

// TestLiveHost reads this machine's files and checks them against each
// other and the kernel's own statements.
func TestLiveHost(t *testing.T) {
	m, err := ReadMeminfo("/proc")
	if err != nil || m.MemTotal == 0 || m.MemAvailable > m.MemTotal {
		t.Fatalf("meminfo %+v %v", m.MemTotal, err)
	}
	l, err := ReadLoadavg("/proc")
	if err != nil || l.Tasks == 0 {
		t.Fatalf("loadavg %+v %v", l, err)
	}
	pm, err := ReadPidMax("/proc")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := ReadThreadsMax("/proc")
	if err != nil {
		t.Fatal(err)
	}
	mp, err := MaxPID("/proc")
	if err != nil || mp != min(pm, tm) || mp == 0 {
		t.Fatalf("maxpid %d (pid_max %d threads-max %d) %v", mp, pm, tm, err)
	}
	if _, err := os.Stat("/proc/pressure/memory"); err == nil {
		if _, err := ReadPressure("/proc", "memory"); err != nil {
			t.Errorf("pressure: %v", err)
		}
	}
	if _, err := ReadPressure("/proc", "no-such-resource"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("missing pressure file: %v, want not-supported", err)
	}
	fs, err := Statfs("/")
	if err != nil || fs.CapacityBytes == 0 || fs.AvailableBytes > fs.CapacityBytes || fs.Inodes < fs.InodesFree {
		t.Errorf("statfs / %+v %v", fs, err)
	}
	if up, err := ReadUptime("/proc"); err != nil || up <= 0 {
		t.Errorf("uptime %v %v", up, err)
	}
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure(strings.NewReader(string(b)))
		if err == nil && (p.Some.Avg10 < 0 || p.Some.Avg10 != p.Some.Avg10) {
			t.Fatalf("bad avg %v", p.Some.Avg10)
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	if b, err := os.ReadFile("testdata/meminfo"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeminfo(strings.NewReader(string(b)))
		if err == nil && len(m.Entries) == 0 {
			t.Fatal("no entries without error")
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	if b, err := os.ReadFile("testdata/mountinfo.hybrid"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseMountinfo(strings.NewReader(string(b))) })
}

func FuzzParseLoadavg(f *testing.F) {
	f.Add([]byte("0.16 0.18 0.09 2/98 7230\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLoadavg(strings.NewReader(string(b)))
		if err == nil && (l.Load1 < 0 || l.Load1 != l.Load1) {
			t.Fatalf("load %v", l.Load1)
		}
	})
}

func TestParseProcCgroup(t *testing.T) {
	cs, err := parseProcCgroup(open(t, "testdata/self.cgroup.hybrid"))
	if err != nil || len(cs) != 10 {
		t.Fatalf("hybrid: %+v %v", cs, err)
	}
	if c := cs[5]; c.HierarchyID != 4 || len(c.Controllers) != 1 || c.Controllers[0] != "memory" || !strings.HasPrefix(c.Path, "/") {
		t.Errorf("memory line %+v", c)
	}
	if c := cs[9]; c.HierarchyID != 0 || c.Controllers != nil || c.Path != "/" {
		t.Errorf("v2 line %+v", c)
	}
	cs, err = parseProcCgroup(open(t, vmProc+"self.cgroup"))
	if err != nil || len(cs) != 1 || cs[0].HierarchyID != 0 || cs[0].Path != "/" {
		t.Fatalf("vm: %+v %v", cs, err)
	}
	cs, err = parseProcCgroup(strings.NewReader("3:cpu,cpuacct:/a:b\n"))
	if err != nil || len(cs[0].Controllers) != 2 || cs[0].Path != "/a:b" {
		t.Errorf("colon in path: %+v %v", cs, err)
	}
	for _, tc := range []struct{ in, token string }{
		{"0:/\n", "0:/"}, {"x::/\n", "x"}, {"0::\n", ""}, {"0::rel\n", "rel"},
	} {
		_, err := parseProcCgroup(strings.NewReader(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Token != tc.token || pe.Line != 1 {
			t.Errorf("parseProcCgroup(%q) = %v; want a parse error on token %q", tc.in, err, tc.token)
		}
	}
}

// The reader on this process's own /proc/self/cgroup: the kernel always
// lists at least the v2 line or a v1 hierarchy.
func TestReadSelfCgroup(t *testing.T) {
	cs, err := ReadSelfCgroup("/proc")
	if err != nil || len(cs) == 0 {
		t.Fatalf("%+v %v", cs, err)
	}
	if _, err := ReadSelfCgroup(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, p := range []string{"testdata/self.cgroup.hybrid", vmProc + "self.cgroup"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := parseProcCgroup(bytes.NewReader(b))
		if err == nil {
			for _, c := range cs {
				if c.HierarchyID < 0 || !strings.HasPrefix(c.Path, "/") {
					t.Fatalf("%+v", c)
				}
			}
		}
	})
}

// The tests run in the host's PID namespace (as the real-cgroup tier
// requires); a child in a new one is not in it.
func TestInInitPIDNamespace(t *testing.T) {
	in, err := InInitPIDNamespace("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Skip("this test runs in a PID namespace of its own (a container)")
	}
	if _, err := InInitPIDNamespace("/nonexistent"); err == nil || !strings.Contains(err.Error(), "/nonexistent/self/ns/pid") {
		t.Errorf("missing proc root: %v, want an error naming the path", err)
	}
	out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "readlink", "/proc/self/ns/pid").CombinedOutput()
	if err != nil {
		t.Skipf("unshare --pid: %v %s", err, out)
	}
	if strings.Contains(string(out), fmt.Sprint(initPIDNamespaceIno)) {
		t.Errorf("a child in a new PID namespace reads %s, the host's", out)
	}
}

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    ProcStat
		exiting bool
	}{
		{"1234 (hog) R 1 1234 1234 0 -1 4194560 98 0\n", ProcStat{State: 'R', Flags: 4194560}, false},
		// comm with spaces and a ')': fields count from the last ')'.
		{"7 (a) b) (c) S 1 7 7 0 -1 4194308 0\n", ProcStat{State: 'S', Flags: 4194308}, true},
		{"8 (z) Z 1 8 8 0 -1 4227072 0\n", ProcStat{State: 'Z', Flags: 4227072}, true},
	} {
		got, err := parseProcStat(strings.NewReader(tc.in))
		if err != nil || got != tc.want || got.Exiting() != tc.exiting {
			t.Errorf("%q: %+v exiting=%v %v; want %+v exiting=%v", tc.in, got, got.Exiting(), err, tc.want, tc.exiting)
		}
	}
	for _, bad := range []string{"", "1 hog R 1", "1 (hog) R 1 2 3", "1 (hog) RR 1 2 3 4 5 6", "1 (hog) R 1 2 3 4 5 x"} {
		if _, err := parseProcStat(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// This process is alive and not exiting.
	s, err := ReadProcStat("/proc", os.Getpid())
	if err != nil || s.Exiting() || s.State == 0 {
		t.Fatalf("self: %+v %v", s, err)
	}
}

func TestParseVMStatOOMKill(t *testing.T) {
	v, err := parseVMStatOOMKill(strings.NewReader("nr_free_pages 12\noom_kill 3\npgfault 9\n"))
	if err != nil || v != 3 {
		t.Fatalf("%d %v", v, err)
	}
	for _, bad := range []string{"nr_free_pages 1\n", "oom_kill x\n", "oom_kill 1\noom_kill 1\n"} {
		if _, err := parseVMStatOOMKill(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ReadVMStatOOMKill("/proc"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPressureTriggerErrors: no pressure file is "not supported" (no
// PSI), naming the file; a refused trigger is the errno in an *fs.PathError
// (a regular file takes any write, so the refusal is checked on the real
// file: a window the kernel refuses).
func TestOpenPressureTriggerErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "memory")
	_, err := OpenPressureTrigger(missing, 150*time.Millisecond, 2*time.Second)
	var ns *NotSupportedError
	if !errors.As(err, &ns) || ns.Path != missing || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("missing pressure file: %v, want a *NotSupportedError naming %s", err, missing)
	}
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Skipf("no /proc/pressure/memory here (%v): the kernel's refusal is not checked", err)
	}
	// 1 s is below the 2 s unit the kernel allows an unprivileged writer;
	// with CAP_SYS_RESOURCE it is accepted, so only a refusal is checked.
	fd, err := OpenPressureTrigger("/proc/pressure/memory", 150*time.Millisecond, 1500*time.Millisecond)
	if err == nil {
		unix.Close(fd)
		t.Skip("the kernel accepted a 1.5 s window (privileged writer): no refusal to check")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("refused trigger: %v, want an *fs.PathError with EINVAL", err)
	}
}
