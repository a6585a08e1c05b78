// Package cgrouptest helps tests work on REAL cgroups: it makes cgroups under
// a unique name, runs memory hogs inside them (the test binary re-executed as
// a child that allocates and touches N MiB), and removes everything on
// cleanup — children killed, directories removed bottom-up — even when the
// test fails.
//
// A test package that uses hogs must call RunHogIfChild first thing in its
// TestMain.
package cgrouptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// V1Memory is where this machine mounts the v1 memory controller.
const V1Memory = "/sys/fs/cgroup/memory"

const hogEnv = "EVICTD_CGROUPTEST_HOG_MIB"

// RunHogIfChild turns the process into a hog when it was started by
// StartHog: it waits for "go" on stdin (so the parent can move it into its
// cgroups before it allocates), allocates and touches the MiB asked for,
// prints "ready", and holds the memory until stdin closes. Otherwise it
// returns at once.
func RunHogIfChild() {
	v := os.Getenv(hogEnv)
	if v == "" {
		return
	}
	mib, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hog: bad", hogEnv, v)
		os.Exit(3)
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(4)
	}
	mem := make([]byte, mib<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1 // touch every page so it is charged
	}
	fmt.Println("ready")
	_, _ = in.ReadString('\n') // until the parent closes stdin
	mem[len(mem)/2]++          // keep mem alive until here
	os.Exit(0)
}

// EnvRequireReal, set to "1", says the real-cgroup tier must run here: a
// test that cannot (not root, no v1 memory controller, a kernel feature
// missing) fails instead of skipping. The unit tier sets it in CI
// (scripts/test.sh), whose machine is root with the v1 memory controller, so
// that a tier where every real test skipped cannot pass. It has no effect in
// the cgroup v2 VM, where v1 tests skip by design.
const EnvRequireReal = "EVICTD_REQUIRE_REAL_CGROUP"

// NeedReal states that a real-cgroup test needs something: when ok is false
// the test skips with the reason, or fails when EnvRequireReal is set.
func NeedReal(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	why := fmt.Sprintf(format, args...)
	if os.Getenv(EnvRequireReal) == "1" && os.Getenv(EnvInVM) != "1" {
		t.Fatalf("%s=1 requires the real-cgroup tests to run, but this one needs %s", EnvRequireReal, why)
	}
	t.Skipf("needs %s (real cgroup v1 tier)", why)
}

// RequireV1Memory skips the test unless it runs as root with a writable v1 memory
// controller at V1Memory: the real-cgroup tier runs on our machines as root.
// With EnvRequireReal set it fails instead.
func RequireV1Memory(t testing.TB) {
	t.Helper()
	NeedReal(t, os.Geteuid() == 0, "root to create cgroups")
	_, err := os.Stat(filepath.Join(V1Memory, "memory.usage_in_bytes"))
	NeedReal(t, err == nil, "the cgroup v1 memory controller at %s: %v", V1Memory, err)
}

// UniqueName returns a name no other test run uses.
func UniqueName(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("evictd-test-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano()%1e9)
}

// Mkdirs creates root/rel (and the parents below root) and removes every
// directory it created on cleanup, deepest first.
func Mkdirs(t testing.TB, root, rel string) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	var created []string
	p := root
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o755); err == nil {
			created = append(created, p)
		} else if !os.IsExist(err) {
			t.Fatalf("mkdir %s: %v", p, err)
		}
	}
	t.Cleanup(func() { RemoveTree(t, created...) })
	return dir
}

// RemoveTree removes cgroup directories (and any left below them) deepest
// first, retrying briefly while killed children are still exiting.
func RemoveTree(t testing.TB, dirs ...string) {
	var all []string
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	for _, d := range all {
		var err error
		for i := 0; i < 100; i++ {
			if err = os.Remove(d); err == nil || os.IsNotExist(err) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("cleanup: rmdir %s: %v", d, err)
		}
	}
}

// Hog is a running memory hog.
type Hog struct {
	Cmd *exec.Cmd
	PID int
}

// StartHog starts the test binary as a hog of mib MiB, moves it into each of
// cgroupDirs (one per v1 controller, or one v2 directory) before it
// allocates, and waits until its memory is touched. The hog is killed on
// cleanup (registered before the cgroups' own cleanup runs, so it is gone
// when they are removed, as long as the cgroups were made first).
func StartHog(t testing.TB, mib int, cgroupDirs ...string) *Hog {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", hogEnv, mib))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hog: %v", err)
	}
	h := &Hog{Cmd: cmd, PID: cmd.Process.Pid}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for _, d := range cgroupDirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(h.PID)), 0); err != nil {
			t.Fatalf("moving hog %d into %s: %v", h.PID, d, err)
		}
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatalf("starting hog: %v", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("hog did not get ready: %q %v", line, err)
	}
	return h
}

// ReadUint reads a one-number kernel file the plain way (os.ReadFile +
// strconv), independently of the readers under test.
func ReadUint(t testing.TB, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// ReadKeyed reads a flat-keyed kernel file the plain way into a map.
func ReadKeyed(t testing.TB, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("%s: line %q", path, l)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: line %q: %v", path, l, err)
		}
		m[f[0]] = v
	}
	return m
}

// RunHogToDeath starts a hog of mib MiB in cgroupDirs and waits for it to
// exit; use it with a cgroup whose limit is below mib, where the OOM killer
// ends it. It returns the child's exit error (a kill is expected).
func RunHogToDeath(t testing.TB, mib int, cgroupDirs ...string) error {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", hogEnv, mib))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hog: %v", err)
	}
	for _, d := range cgroupDirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("moving hog into %s: %v", d, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	_, _ = stdin.Write([]byte("go\n"))
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("hog of %d MiB was not killed within 30s", mib)
		return nil
	}
}

// EnvInVM is set to "1" by the VM tier (scripts/test-vm.sh) for test binaries
// it runs in its cgroup v2 kernel.
const EnvInVM = "EVICTD_TEST_VM"

// RequireV2Memory returns the mount point of a cgroup2 hierarchy that
// enables the memory controller for its children. On a host without one (ours:
// memory on v1) it skips with the reason; in the VM tier, which must have it,
// it fails.
func RequireV2Memory(t testing.TB) string {
	t.Helper()
	fail := func(why string) {
		t.Helper()
		if os.Getenv(EnvInVM) == "1" {
			t.Fatalf("the VM must provide a cgroup v2 hierarchy with the memory controller for children, but: %s", why)
		}
		t.Skipf("needs a pure cgroup v2 hierarchy with the memory controller (%s); runs in the VM tier", why)
	}
	if os.Geteuid() != 0 {
		fail("not root")
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fail(err.Error())
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" && f[i+1] == "cgroup2" {
				sc, err := os.ReadFile(filepath.Join(f[4], "cgroup.subtree_control"))
				if err == nil && strings.Contains(" "+strings.TrimSpace(string(sc))+" ", " memory ") {
					if _, err := os.Stat(filepath.Join(f[4], "memory.stat")); err == nil {
						return f[4]
					}
				}
			}
		}
	}
	fail("no cgroup2 mount enables memory for its children")
	return ""
}

// EnableV2Controllers writes "+memory +pids +cpu +io" (those available) to
// cgroup.subtree_control of root/rel and each directory between, so that a
// leaf created below gets those controllers' files.
func EnableV2Controllers(t testing.TB, root, rel string) {
	t.Helper()
	p := root
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for _, part := range parts {
		p = filepath.Join(p, part)
		avail, err := os.ReadFile(filepath.Join(p, "cgroup.controllers"))
		if err != nil {
			t.Fatal(err)
		}
		var en []string
		for _, c := range strings.Fields(string(avail)) {
			if c == "memory" || c == "pids" || c == "cpu" || c == "io" {
				en = append(en, "+"+c)
			}
		}
		if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte(strings.Join(en, " ")), 0); err != nil {
			t.Fatalf("enabling %v in %s: %v", en, p, err)
		}
	}
}

// AddSeeds adds the files testdata/<name> as seeds of a fuzz target:
// fixtures captured from real kernels are the best seeds a parser has. A
// missing fixture fails the target, so a renamed file or a typo cannot drop
// its seed unnoticed.
func AddSeeds(f *testing.F, names ...string) {
	f.Helper()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatalf("fuzz seed: %v", err)
		}
		f.Add(b)
	}
}

// Alive reports whether pid is a running process: a zombie (exited, not yet
// reaped) is not, though it still answers kill(0).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
