package cgroup

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/host"
)

func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"0", 0, false},
		{"41095168", 41095168, false},
		{"9223372036854771712", 9223372036854771712, false},
		{"18446744073709551615", Max, false},
		{"18446744073709551616", 0, true}, // overflow
		{"-4096", 0, false},               // negative counters clamp to 0
		{"-", 0, true},
		{"", 0, true},
		{"12a", 0, true},
		{"max", 0, true}, // only ParseLimit accepts max
		{" 1", 0, true},
	} {
		got, err := ParseUint([]byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseUint(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if v, err := ParseLimit([]byte("max")); err != nil || v != Max {
		t.Errorf("ParseLimit(max) = %d, %v", v, err)
	}
}

func TestParseSingle(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint64
		errLine int // 0: no error
		token   string
	}{
		{"123\n", 123, 0, ""},
		{"max\n", Max, 0, ""},
		{"-1\n", 0, 0, ""},
		{"", 0, 1, ""},
		{"\n", 0, 1, ""},
		{"12x\n", 0, 1, "12x"},
		{"1\n2\n", 0, 2, "2"},
	} {
		got, err := ParseSingle(strings.NewReader(tc.in), ParseLimit)
		if tc.errLine == 0 {
			if err != nil || got != tc.want {
				t.Errorf("ParseSingle(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != tc.errLine || pe.Token != tc.token {
			t.Errorf("ParseSingle(%q) error = %#v; want line %d token %q", tc.in, err, tc.errLine, tc.token)
		}
	}
}

func TestParseFlatKeyedKeepsUnknownKeysAndNamesBadLines(t *testing.T) {
	keys := NewKeys("a")
	got, err := ParseFlatKeyed(strings.NewReader("a 1\nnew_key 7\n\nlimit max\nneg -5\n"), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"a", 1}, {"new_key", 7}, {"limit", Max}, {"neg", 0}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
	for _, tc := range []struct {
		in, token string
		line      int
	}{
		{"a 1\nb\n", "b", 2},
		{"a 1\nb x\n", "x", 2},
		{" 1\n", " 1", 1},
		{"a 1 2\n", "1 2", 1},
	} {
		_, err := ParseFlatKeyed(strings.NewReader(tc.in), keys, nil)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != tc.line || pe.Token != tc.token {
			t.Errorf("ParseFlatKeyed(%q) error = %v; want line %d token %q", tc.in, err, tc.line, tc.token)
		}
	}
}

func TestParseCgroupProcs(t *testing.T) {
	got, err := parseCgroupProcs(strings.NewReader("1\n17361\n"))
	if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 17361 {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := parseCgroupProcs(strings.NewReader("")); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, tc := range []struct {
		in    string
		line  int
		token string
	}{
		{"0\n", 1, "0"}, {"-1\n", 1, "-1"}, {"abc\n", 1, "abc"},
		{"1\n99999999999\n", 2, "99999999999"}, {"1\n 2\n", 2, " 2"},
	} {
		_, err := parseCgroupProcs(strings.NewReader(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != tc.line || pe.Token != tc.token || !errors.Is(err, ErrNotPID) {
			t.Errorf("parseCgroupProcs(%q) = %v; want line %d token %q", tc.in, err, tc.line, tc.token)
		}
	}
}

// The readers name the file and the bad token (actuate's old parser dropped
// bad tokens silently); a removed cgroup is vanished, a removed descendant is
// skipped by the recursive read.
func TestReadCgroupProcs(t *testing.T) {
	dir := t.TempDir()
	child := filepath.Join(dir, "child")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	for d, s := range map[string]string{dir: "7\n", child: "8\n9\n"} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if pids, err := ReadCgroupProcsRecursive(dir); err != nil || !slices.Equal(pids, []int{7, 8, 9}) {
		t.Fatalf("recursive: %v, %v", pids, err)
	}
	if err := os.WriteFile(filepath.Join(child, "cgroup.procs"), []byte("8\nx9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCgroupProcsRecursive(dir)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(child, "cgroup.procs") || pe.Token != "x9" || pe.Line != 2 {
		t.Fatalf("bad token: %v; want a parse error naming %s and \"x9\"", err, filepath.Join(child, "cgroup.procs"))
	}
	if !strings.Contains(err.Error(), filepath.Join(child, "cgroup.procs")) || !strings.Contains(err.Error(), `"x9"`) {
		t.Errorf("message %q does not name file and token", err)
	}
	if err := os.RemoveAll(child); err != nil {
		t.Fatal(err)
	}
	if pids, err := ReadCgroupProcsRecursive(dir); err != nil || !slices.Equal(pids, []int{7}) {
		t.Fatalf("after child removed: %v, %v", pids, err)
	}
	gone := filepath.Join(dir, "gone")
	if _, err := ReadCgroupProcsRecursive(gone); !IsVanished(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gone: %v; want a vanished error", err)
	}
	if n, err := ReadCgroupProcsCount(dir); err != nil || n != 1 {
		t.Errorf("count: %d, %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("7\n8"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadCgroupProcsCount(dir); err != nil || n != 2 {
		t.Errorf("count without a final newline: %d, %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("7\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadCgroupProcsCount(dir); !errors.Is(err, ErrNotPID) {
		t.Errorf("count with a bad token: %d, %v; want an error", n, err)
	}
	if _, err := ReadCgroupProcs(gone); !IsVanished(err) {
		t.Errorf("gone: %v; want a vanished error", err)
	}
}

func parseOne(r io.Reader) (uint64, error) { return ParseSingle(r, ParseUint) }

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte("4x2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadFile(dir, "ok", "1.0", parseOne); err != nil || v != 42 {
		t.Fatalf("ok: %d, %v", v, err)
	}
	// The directory exists but the file does not: this kernel lacks it.
	_, err := ReadFile(dir, "memory.peak", "5.19", parseOne)
	var ns *NotSupportedError
	if !errors.As(err, &ns) || ns.MinKernel != "5.19" || !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want a not-supported error naming 5.19", err)
	}
	if !strings.Contains(err.Error(), "5.19") {
		t.Errorf("message %q does not name the kernel", err)
	}
	// The cgroup directory is gone: vanished, and fs.ErrNotExist.
	_, err = ReadFile(filepath.Join(dir, "gone"), "memory.stat", "1.0", parseOne)
	if !IsVanished(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gone dir: %v; want a vanished error", err)
	}
	// Malformed: the parse error names path, line and token.
	_, err = ReadFile(dir, "bad", "1.0", parseOne)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "bad") || pe.Line != 1 || pe.Token != "4x2" {
		t.Errorf("bad: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, "bad")+":1") || !strings.Contains(msg, `"4x2"`) {
		t.Errorf("message %q does not name path:line and token", msg)
	}
}

// OpenFd's descriptor reads through ReadFd, again and again; a missing
// file is the errno in a *fs.PathError (notify tells "no such file" from
// other errors by it).
func TestOpenFd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "counter")
	if err := os.WriteFile(path, []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenFd(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for range 2 {
		if v, err := ReadFd(fd, path, parseOne); err != nil || v != 42 {
			t.Fatalf("ReadFd: %d, %v", v, err)
		}
	}
	_, err = OpenFd(filepath.Join(dir, "missing"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "open" || !errors.Is(err, unix.ENOENT) {
		t.Errorf("missing: %v; want an open *fs.PathError with ENOENT", err)
	}
}

func TestReadFileGrowsForLargeFiles(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		b.WriteString("12345\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	pids, err := ReadFile(dir, "cgroup.procs", "1.0", parseCgroupProcs)
	if err != nil || len(pids) != 5000 {
		t.Fatalf("got %d pids, %v", len(pids), err)
	}
}

func mountsFrom(t *testing.T, text string) []host.Mount {
	t.Helper()
	ms, err := host.ParseMountinfo(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestDetectHybridFromThisMachinesMountinfo(t *testing.T) {
	b, err := os.ReadFile("testdata/mountinfo.hybrid")
	if err != nil {
		t.Fatal(err)
	}
	h, err := DetectFromMounts(mountsFrom(t, string(b)), func(string) ([]string, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != Hybrid || h.UnifiedRoot != "/sys/fs/cgroup/unified" {
		t.Fatalf("got %+v", h)
	}
	if root, v, ok := h.Controller("memory"); !ok || v != 1 || root != "/sys/fs/cgroup/memory" {
		t.Errorf("memory: %s v%d %v", root, v, ok)
	}
	if root, v, ok := h.Controller("cpuacct"); !ok || v != 1 || root != "/sys/fs/cgroup/cpuacct" {
		t.Errorf("cpuacct: %s v%d %v", root, v, ok)
	}
	if _, _, ok := h.Controller("systemd"); ok {
		t.Errorf("name=systemd is not a controller")
	}
}

func TestDetectUnifiedAndLegacy(t *testing.T) {
	unified := "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	h, err := DetectFromMounts(mountsFrom(t, unified), func(dir string) ([]string, error) {
		if dir != "/sys/fs/cgroup" {
			t.Errorf("controllers read from %s", dir)
		}
		return []string{"cpuset", "cpu", "io", "memory", "pids"}, nil
	})
	if err != nil || h.Mode != Unified {
		t.Fatalf("%+v %v", h, err)
	}
	if root, v, ok := h.Controller("memory"); !ok || v != 2 || root != "/sys/fs/cgroup" {
		t.Errorf("memory: %s v%d %v", root, v, ok)
	}
	legacy := "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	h, err = DetectFromMounts(mountsFrom(t, legacy), nil)
	if err != nil || h.Mode != Legacy {
		t.Fatalf("%+v %v", h, err)
	}
	if root, _, _ := h.Controller("cpuacct"); root != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Errorf("cpuacct at %s", root)
	}
	if _, err := DetectFromMounts(mountsFrom(t, "1 0 0:1 / / rw - ext4 /dev/vda rw\n"), nil); !errors.Is(err, ErrNoCgroups) {
		t.Errorf("no cgroups: %v", err)
	}
}

func TestDetectThisHost(t *testing.T) {
	h, err := Detect("/proc")
	cgrouptest.NeedReal(t, !errors.Is(err, ErrNoCgroups), "a mounted cgroup filesystem")
	if err != nil {
		t.Fatal(err)
	}
	root, _, ok := h.Controller("memory")
	cgrouptest.NeedReal(t, ok, "the memory controller enabled on this host")
	if _, err := os.Stat(root); err != nil {
		t.Errorf("memory root %s: %v", root, err)
	}
}

func FuzzParseFlatKeyed(f *testing.F) {
	for _, p := range []string{"v1/testdata/memory.stat.hog", "v1/testdata/cpu.stat", "v2/testdata/memory.stat", "v2/testdata/memory.events"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a max\nb -1\n"))
	keys := NewKeys("cache")
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParseFlatKeyed(&Content{b: b}, keys, nil)
		if err == nil {
			for _, e := range es {
				if e.Key == "" || strings.ContainsAny(e.Key, " \n") {
					t.Fatalf("bad key %q", e.Key)
				}
			}
		}
	})
}

func FuzzParseCgroupProcs(f *testing.F) {
	if b, err := os.ReadFile("v1/testdata/cgroup.procs"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("1\n2\n"))
	f.Add([]byte("17361\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, err := parseCgroupProcs(&Content{b: b})
		if err == nil {
			for _, p := range pids {
				if p <= 0 {
					t.Fatalf("pid %d", p)
				}
			}
		}
	})
}

// The VM tier's captured mountinfo (Debian 6.1, pure cgroup v2).
func TestDetectUnifiedFromVMMountinfo(t *testing.T) {
	b, err := os.ReadFile("testdata/mountinfo.unified-vm")
	if err != nil {
		t.Fatal(err)
	}
	h, err := DetectFromMounts(mountsFrom(t, string(b)), func(string) ([]string, error) {
		return []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}, nil
	})
	if err != nil || h.Mode != Unified {
		t.Fatalf("%+v %v", h, err)
	}
	if root, v, ok := h.Controller("memory"); !ok || v != 2 || root != "/sys/fs/cgroup" {
		t.Errorf("memory: %s v%d %v", root, v, ok)
	}
}

func FuzzParseSingle(f *testing.F) {
	for _, s := range []string{"123\n", "max\n", "-1\n", "9223372036854771712\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseSingle(&Content{b: b}, ParseLimit)
		if err != nil && v != 0 {
			t.Fatalf("value %d with error %v", v, err)
		}
	})
}

func FuzzParseControllerList(f *testing.F) {
	f.Add([]byte("cpuset cpu io memory hugetlb pids rdma misc\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseControllerList(&Content{b: b})
		if err == nil {
			for _, c := range cs {
				if c == "" {
					t.Fatal("empty controller name")
				}
			}
		}
	})
}
