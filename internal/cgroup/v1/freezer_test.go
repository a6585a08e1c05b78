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

func TestParseFreezerState(t *testing.T) {
	for file, want := range map[string]FreezerState{"freezer.state.thawed": Thawed, "freezer.state.frozen": Frozen} {
		if got, err := parseFreezerState(open(t, file)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	if got, err := parseFreezerState(strings.NewReader("FREEZING\n")); err != nil || got != Freezing {
		t.Errorf("FREEZING: %q, %v", got, err)
	}
	for _, tc := range []struct {
		in, token string
		err       error
	}{
		{"", "", cgroup.ErrEmpty},
		{"frozen\n", "frozen", ErrUnknownFreezerState},
		{"FROZEN\nTHAWED\n", "THAWED", cgroup.ErrExtra},
	} {
		_, err := parseFreezerState(strings.NewReader(tc.in))
		var pe *cgroup.ParseError
		if !errors.As(err, &pe) || pe.Token != tc.token || !errors.Is(err, tc.err) {
			t.Errorf("parseFreezerState(%q) = %v; want token %q, %v", tc.in, err, tc.token, tc.err)
		}
	}
}

func FuzzParseFreezerState(f *testing.F) {
	cgrouptest.AddSeeds(f, "freezer.state.thawed", "freezer.state.frozen")
	f.Add([]byte("FREEZING"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseFreezerState(cgroup.NewContent(b))
		if err == nil && s != Thawed && s != Freezing && s != Frozen {
			t.Fatalf("state %q", s)
		}
	})
}

// TestRealFreezerState freezes and thaws a real v1 freezer cgroup holding a
// process, reading the state through the reader.
func TestRealFreezerState(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	const freezerRoot = "/sys/fs/cgroup/freezer"
	_, err := os.Stat(freezerRoot + "/cgroup.procs")
	cgrouptest.NeedReal(t, err == nil, "the v1 freezer controller at %s: %v", freezerRoot, err)
	dir := cgrouptest.Mkdirs(t, freezerRoot, cgrouptest.UniqueName(t))
	cgrouptest.StartHog(t, 1, dir)
	if s, err := ReadFreezerState(dir); err != nil || s != Thawed {
		t.Fatalf("new cgroup: %q, %v", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(Frozen), 0); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(Thawed), 0)
	if s, err := ReadFreezerState(dir); err != nil || (s != Frozen && s != Freezing) {
		t.Errorf("after FROZEN: %q, %v", s, err)
	}
	if _, err := ReadFreezerState(freezerRoot); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("root: %v; want not-supported (the root has no freezer.state)", err)
	}
	if _, err := ReadFreezerState(filepath.Join(dir, "gone")); !cgroup.IsVanished(err) {
		t.Errorf("gone: %v; want vanished", err)
	}
}
