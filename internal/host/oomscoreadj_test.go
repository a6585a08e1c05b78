package host

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseOOMScoreAdj(t *testing.T) {
	for in, want := range map[string]int{"0\n": 0, "-997\n": -997, "1000\n": 1000, "-1000": -1000, "938\n": 938, "-0\n": 0} {
		if got, err := parseOOMScoreAdj(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "\n", "-", "1001\n", "-1001\n", "12a\n", "+5\n", "99999999999999999999999\n", "1 2\n"} {
		var pe *ParseError
		if _, err := parseOOMScoreAdj(strings.NewReader(bad)); !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a *ParseError", bad, err)
		}
	}
}

func FuzzParseOOMScoreAdj(f *testing.F) {
	for _, s := range []string{"0\n", "-997\n", "1000\n", "-1000", "x", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseOOMScoreAdj(strings.NewReader(s))
		if err == nil && (v < OOMScoreAdjMin || v > OOMScoreAdjMax) {
			t.Fatalf("%q: %d accepted outside the kernel's range", s, v)
		}
	})
}

// TestOOMScoreAdjRealProcess raises a child's oom_score_adj through /proc
// and reads it back; raising needs no capability.
func TestOOMScoreAdjRealProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	before, err := ReadOOMScoreAdj("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	want := before + 100
	if want > OOMScoreAdjMax {
		want = OOMScoreAdjMax
	}
	if err := WriteOOMScoreAdj("/proc", pid, want); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadOOMScoreAdj("/proc", pid); err != nil || got != want {
		t.Fatalf("after writing %d: %d, %v", want, got, err)
	}
	if err := WriteOOMScoreAdj("/proc", pid, 1001); err == nil {
		t.Error("1001 accepted")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := ReadOOMScoreAdj("/proc", pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read of an exited process: %v, want a ProcessGoneError", err)
	}
	if err := WriteOOMScoreAdj("/proc", pid, 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write to an exited process: %v, want a ProcessGoneError", err)
	}
}

// TestHasCapSysResource agrees with CapEff in /proc/self/status.
func TestHasCapSysResource(t *testing.T) {
	got, err := HasCapSysResource()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			var mask uint64
			for _, c := range strings.TrimSpace(v) {
				d := strings.IndexRune("0123456789abcdef", c)
				mask = mask<<4 | uint64(d)
			}
			if want := mask&(1<<capSysResource) != 0; got != want {
				t.Fatalf("HasCapSysResource %v, CapEff %s says %v", got, strings.TrimSpace(v), want)
			}
			return
		}
	}
	t.Fatal("no CapEff line")
}
