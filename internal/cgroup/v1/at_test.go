package v1

import (
	"errors"
	"os"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// Reads through an opened directory give the same numbers and the same
// typed errors as reads by path: a file this kernel lacks is not-supported,
// and a cgroup removed after OpenDir is vanished (the directory's descriptor
// does not keep its files readable).
func TestReadAtSameAsByPath(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	if err := os.WriteFile(dir+"/memory.limit_in_bytes", []byte("64M"), 0); err != nil {
		t.Fatal(err)
	}
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lim, err := ReadMemoryLimitInBytesAt(d)
	if want, err2 := ReadMemoryLimitInBytes(dir); err != nil || err2 != nil || lim != want || lim != 64<<20 {
		t.Errorf("limit at %d (%v), by path %d (%v)", lim, err, want, err2)
	}
	if _, err := ReadMemoryStatAt(d); err != nil {
		t.Error(err)
	}
	if _, err := cgroup.ReadFileAt(d, "memory.no_such_file", "9.9", parseMemoryUsageInBytes); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("missing file: %v, want not-supported", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMemoryUsageInBytesAt(d); !cgroup.IsVanished(err) {
		t.Errorf("after rmdir: %v, want vanished", err)
	}
	if _, err := cgroup.OpenDir(dir); !cgroup.IsVanished(err) {
		t.Errorf("OpenDir of a removed cgroup: %v, want vanished", err)
	}
}
