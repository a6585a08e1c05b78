package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// childEnv makes the test binary run one test's body as a child, so that a
// test can see whether Need skipped or failed it.
const childEnv = "EVICTD_VMTEST_SELFTEST_CHILD"

func TestNeedSkipsOnHostAndFailsInVM(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		Need(t, false, "a feature this kernel lacks")
		t.Log("not reached")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		inVM     string
		wantFail bool
		wantText string
	}{
		{"", false, "needs a feature this kernel lacks; runs in the cgroup v2 VM tier"},
		{"1", true, "the VM must provide this, but: a feature this kernel lacks"},
	} {
		cmd := exec.Command(exe, "-test.run=^TestNeedSkipsOnHostAndFailsInVM$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", EnvInVM+"="+tc.inVM)
		out, err := cmd.CombinedOutput()
		failed := err != nil
		if failed != tc.wantFail || !strings.Contains(string(out), tc.wantText) || strings.Contains(string(out), "not reached") {
			t.Errorf("%s=%q: failed=%v, want %v; output:\n%s", EnvInVM, tc.inVM, failed, tc.wantFail, out)
		}
		if !tc.wantFail && !strings.Contains(string(out), "--- SKIP") {
			t.Errorf("on the host Need must skip; output:\n%s", out)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/sys/fs/cgroup/with\040space`); got != "/sys/fs/cgroup/with space" {
		t.Errorf("got %q", got)
	}
}

// TestStartHelperIntoCgroup runs wherever a cgroup2 hierarchy is mounted,
// with or without controllers (our hosts have a controller-less one at
// /sys/fs/cgroup/unified): CLONE_INTO_CGROUP needs no controller.
func TestStartHelperIntoCgroup(t *testing.T) {
	Need(t, os.Geteuid() == 0, "root (creates cgroups)")
	mounts, err := cgroup2Mounts()
	if err != nil {
		t.Fatal(err)
	}
	Need(t, len(mounts) > 0, "a cgroup2 mount")
	root := mounts[0]
	cg := NewCgroup(t, root)
	h := StartHelper(t, cg, "sleep")
	h.Ready(t, time.Minute)
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(h.Pid()), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	want := "0::/" + filepath.Base(cg)
	if !strings.Contains(string(b), want) {
		t.Errorf("/proc/%d/cgroup = %q, want a line %q", h.Pid(), b, want)
	}
	if err := h.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if sig := KilledBy(h.Wait(t, time.Minute)); sig != syscall.SIGKILL {
		t.Errorf("KilledBy = %v, want SIGKILL", sig)
	}
}

func TestStartHelperUnknownFails(t *testing.T) {
	Need(t, os.Geteuid() == 0, "root (creates cgroups)")
	mounts, err := cgroup2Mounts()
	if err != nil {
		t.Fatal(err)
	}
	Need(t, len(mounts) > 0, "a cgroup2 mount")
	h := StartHelper(t, NewCgroup(t, mounts[0]), "no-such-helper")
	st := h.Wait(t, time.Minute)
	if st.ExitCode() != 2 {
		t.Errorf("unknown helper exited with %v, want exit status 2", st)
	}
}
