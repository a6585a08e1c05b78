// Package vmtest is what tests that need a real cgroup v2 kernel use to say
// so. Such tests run in the VM tier (scripts/test-vm.sh, `make test-vm`),
// where test/vm/cmd/vmexec boots a kernel with a pure cgroup2 hierarchy and
// sets EVICTD_TEST_VM=1, and also on the host with the rest of `go test ./...`.
//
// The rule the helpers enforce: on the host a missing feature skips the test
// with the reason; in the VM the feature must be there, so its absence fails
// the test (a skip there would hide a broken harness or kernel).
//
//	func TestMain(m *testing.M) { vmtest.Main(m) } // enables StartHelper
//
//	func TestSomething(t *testing.T) {
//		root := vmtest.Cgroup2(t, "memory")  // skip on the host, fail in the VM
//		cg := vmtest.NewCgroup(t, root)      // removed (and killed) at cleanup
//		vmtest.WriteFile(t, cg, "memory.max", "64M")
//		hog := vmtest.StartHelper(t, cg, "hog", "32")
//		...
//	}
package vmtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// EnvInVM is set to "1" by the VM's /init for the test binary.
const EnvInVM = "EVICTD_TEST_VM"

// EnvOutDir names a directory whose files the harness copies back to the
// host's $EVICTD_VM_OUTDIR after the test binary exits. It is set in the VM
// only when the host sets it (scripts/vm-capture.sh does).
const EnvOutDir = "EVICTD_VM_OUTDIR"

// InVM reports whether the test runs inside the harness VM.
func InVM() bool { return os.Getenv(EnvInVM) == "1" }

// Need states that the test needs something: when ok is false the test is
// skipped on the host with the reason, and fails in the VM.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	why := fmt.Sprintf(format, args...)
	if InVM() {
		t.Fatalf("the VM must provide this, but: %s", why)
	}
	t.Skipf("needs %s; runs in the cgroup v2 VM tier (make test-vm)", why)
}

// Cgroup2 returns the mount point of a cgroup v2 hierarchy whose root has the
// given controllers enabled for its children, e.g. "/sys/fs/cgroup" in the
// VM. It also requires root, since tests create cgroups there. On the host
// without such a hierarchy (ours has the memory controller on v1) it skips.
func Cgroup2(t testing.TB, controllers ...string) string {
	t.Helper()
	Need(t, os.Geteuid() == 0, "root (creates cgroups)")
	mounts, err := cgroup2Mounts()
	Need(t, err == nil, "/proc/self/mountinfo readable: %v", err)
	Need(t, len(mounts) > 0, "a cgroup2 mount (none in /proc/self/mountinfo)")
	var seen []string
	for _, m := range mounts {
		enabled, err := os.ReadFile(filepath.Join(m, "cgroup.subtree_control"))
		if err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		have := strings.Fields(string(enabled))
		if containsAll(have, controllers) {
			return m
		}
		seen = append(seen, fmt.Sprintf("%s enables %q", m, have))
	}
	Need(t, false, "a cgroup2 hierarchy enabling %v for children (found: %s)", controllers, strings.Join(seen, "; "))
	return ""
}

// PSI requires pressure stall information (/proc/pressure/*).
func PSI(t testing.TB) {
	t.Helper()
	_, err := os.Stat("/proc/pressure/memory")
	Need(t, err == nil, "PSI (/proc/pressure/memory: %v)", err)
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// cgroup2Mounts lists the mount points of cgroup2 file systems.
func cgroup2Mounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		// "36 25 0:31 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw,nsdelegate"
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && qf[0] == "cgroup2" {
			out = append(out, unescapeMount(pf[4]))
		}
	}
	return out, nil
}

// MountOptions returns the super-block options of the cgroup2 mount at
// mountPoint, e.g. ["rw" "nsdelegate" "memory_recursiveprot"].
func MountOptions(t testing.TB, mountPoint string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 3 && qf[0] == "cgroup2" && unescapeMount(pf[4]) == mountPoint {
			return strings.Split(qf[2], ",")
		}
	}
	t.Fatalf("no cgroup2 mount at %s", mountPoint)
	return nil
}

var octalEscape = regexp.MustCompile(`\\[0-7]{3}`)

func unescapeMount(s string) string {
	return octalEscape.ReplaceAllStringFunc(s, func(e string) string {
		v, _ := strconv.ParseUint(e[1:], 8, 8)
		return string(rune(v))
	})
}

var cgroupSeq atomic.Int64

// NewCgroup creates a new, empty child cgroup of parent named after the test
// and returns its path. At cleanup it kills whatever still runs in it
// (cgroup.kill), waits for it to empty and removes it.
func NewCgroup(t testing.TB, parent string) string {
	t.Helper()
	name := fmt.Sprintf("evictd-%s-%d-%d", sanitize(t.Name()), os.Getpid(), cgroupSeq.Add(1))
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroup(t, dir) })
	return dir
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// removeCgroup empties and removes dir and its children, deepest first.
func removeCgroup(t testing.TB, dir string) {
	t.Helper()
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
		deadline := time.Now().Add(cleanupWait)
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				t.Errorf("removing cgroup %s: %v", d, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// cleanupWait bounds how long cleanup waits for killed processes to leave a
// cgroup; software-emulated VMs are slow, so it is generous.
const cleanupWait = 20 * time.Second

// ReadFile returns the content of a file in cgroup dir, failing the test on
// error.
func ReadFile(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

// WriteFile writes value to a file in cgroup dir, failing the test on error.
func WriteFile(t testing.TB, dir, name, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		t.Fatalf("writing %q to %s: %v", value, filepath.Join(dir, name), err)
	}
}

// ReadUint reads a single-number file such as memory.current.
func ReadUint(t testing.TB, dir, name string) uint64 {
	t.Helper()
	s := strings.TrimSpace(ReadFile(t, dir, name))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number: %v", name, s, err)
	}
	return v
}

// ReadKeyed reads a flat keyed file such as memory.events or cgroup.events
// ("key value" lines). A minimal test-side reader, independent of the
// production parsers it helps to test.
func ReadKeyed(t testing.TB, dir, name string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(ReadFile(t, dir, name))))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("%s: line %q is not \"key value\"", name, sc.Text())
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: line %q: %v", name, sc.Text(), err)
		}
		out[f[0]] = v
	}
	return out
}

// zramDevice is the swap device the VM's /init provides (modules loaded from
// the Debian kernel package by scripts/vm-deps.sh).
const zramDevice = "zram0"

// Swap turns on size (e.g. "256M") of compressed-RAM swap for the rest of the
// test, so that reclaim can push anonymous memory out: without it the VM has
// no swap, and memory.low / memory.min / memory.high protection and
// throttling cannot be seen in memory.current. Swap is system-wide, so tests
// using it must not run in parallel with others. Turned off at cleanup.
// Skips on the host (never touches the host's swap); fails in the VM if zram
// is missing.
func Swap(t testing.TB, size string) {
	t.Helper()
	Need(t, InVM(), "the VM's zram device (Swap never changes a host's swap)")
	sys := filepath.Join("/sys/block", zramDevice)
	_, err := os.Stat(sys)
	Need(t, err == nil, "zram (%s: %v)", sys, err)
	dev := "/dev/" + zramDevice
	WriteFile(t, sys, "disksize", size)
	t.Cleanup(func() {
		if out, err := exec.Command("swapoff", dev).CombinedOutput(); err != nil {
			t.Errorf("swapoff %s: %v: %s", dev, err, out)
		}
		WriteFile(t, sys, "reset", "1")
	})
	for _, args := range [][]string{{"mkswap", dev}, {"swapon", dev}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
}

// FileFS mounts a fresh ext2 filesystem (busybox mke2fs, the ext4 driver) of
// size (e.g. "192M") on a hot-added zram block device at a new directory for
// the rest of the test, and returns the mount point. The VM has no disk: its
// root is the initramfs in RAM, whose pages the kernel can never reclaim, so
// page cache a test wants reclaimable — clean file pages the kernel may
// drop — needs a filesystem with a device under it. Skips on the host
// (never touches a host's block devices); fails in the VM if zram is missing.
func FileFS(t testing.TB, size string) string {
	t.Helper()
	Need(t, InVM(), "the VM's zram devices (FileFS never makes block devices on a host)")
	const ctl = "/sys/class/zram-control"
	_, err := os.Stat(ctl)
	Need(t, err == nil, "zram hot_add (%s: %v)", ctl, err)
	b, err := os.ReadFile(filepath.Join(ctl, "hot_add"))
	if err != nil {
		t.Fatalf("zram hot_add: %v", err)
	}
	id := strings.TrimSpace(string(b))
	name := "zram" + id
	sys := filepath.Join("/sys/block", name)
	dev := "/dev/" + name
	dir := t.TempDir()
	mounted := false
	t.Cleanup(func() {
		if mounted {
			if err := unix.Unmount(dir, 0); err != nil {
				t.Errorf("unmounting %s: %v", dir, err)
			}
		}
		_ = os.WriteFile(filepath.Join(sys, "reset"), []byte("1"), 0)
		_ = os.WriteFile(filepath.Join(ctl, "hot_remove"), []byte(id), 0)
	})
	WriteFile(t, sys, "disksize", size)
	// 4 KiB blocks: zram's logical block size is a page, and ext4 refuses
	// mke2fs's default of 1 KiB on it ("bad block size 1024").
	if out, err := exec.Command("mke2fs", "-b", "4096", dev).CombinedOutput(); err != nil {
		t.Fatalf("mke2fs %s: %v: %s", dev, err, out)
	}
	// busybox's mke2fs makes an ext2 layout, which the kernel's ext4
	// driver mounts as "ext2" (CONFIG_EXT4_USE_FOR_EXT2).
	if err := unix.Mount(dev, dir, "ext2", 0, ""); err != nil {
		dmesg, _ := exec.Command("dmesg").CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(dmesg)), "\n")
		t.Fatalf("mounting %s on %s: %v (kernel log: %s)", dev, dir, err, strings.Join(lines[max(0, len(lines)-5):], " | "))
	}
	mounted = true
	return dir
}
