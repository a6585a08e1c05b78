package cgroup_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// TestWriteFile on a real v1 memory cgroup (the v2 writers are checked in
// the VM tier, internal/cgroup/v2): a value is written and reads back, a
// value the kernel refuses is an *fs.PathError with the errno, a file this
// kernel lacks is a *NotSupportedError, a removed cgroup a *VanishedError.
func TestWriteFile(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	if err := cgroup.WriteFile(dir, "memory.soft_limit_in_bytes", "", "67108864"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memory.soft_limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != "67108864" {
		t.Fatalf("read back %q %v", b, err)
	}
	var pe *fs.PathError
	if err := cgroup.WriteFile(dir, "memory.soft_limit_in_bytes", "", "lots"); !errors.As(err, &pe) {
		t.Errorf("refused value: %v, want an *fs.PathError", err)
	}
	if err := cgroup.WriteFile(dir, "memory.min", "4.18", "0"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("v2 file on v1: %v, want a *NotSupportedError", err)
	}
	if err := cgroup.WriteFile(filepath.Join(dir, "gone"), "memory.soft_limit_in_bytes", "", "0"); !cgroup.IsVanished(err) {
		t.Errorf("missing cgroup: %v, want a *VanishedError", err)
	}
	if got := cgroup.FormatLimit(cgroup.Max); got != "max" {
		t.Errorf("FormatLimit(Max) = %q", got)
	}
}

// TestMkdirRmdirErrors: the one-shot cgroup directory writers type their
// errors as the readers do (checked on a plain directory: the errno is the
// filesystem's, the wrapping is what callers switch on).
func TestMkdirRmdirErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cg")
	if err := cgroup.Mkdir(dir); err != nil {
		t.Fatal(err)
	}
	var pe *fs.PathError
	if err := cgroup.Mkdir(dir); !errors.Is(err, fs.ErrExist) || !errors.As(err, &pe) || pe.Op != "mkdir" {
		t.Errorf("Mkdir of an existing dir: %v, want an *fs.PathError (mkdir) that is fs.ErrExist", err)
	}
	if err := cgroup.Rmdir(dir); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.Rmdir(dir); !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "rmdir" {
		t.Errorf("Rmdir of a gone dir: %v, want an *fs.PathError (rmdir) that is fs.ErrNotExist", err)
	}
}
