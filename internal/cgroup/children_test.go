package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// Children agrees with os.ReadDir's directories, also across several
// getdents buffers (long names) and beside files and symlinks; and a
// real v1 cgroup's children are found among its control files.
func TestChildrenMatchesReadDir(t *testing.T) {
	dirs := []string{t.TempDir()}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && os.Geteuid() == 0 {
		dirs = append(dirs, cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t)))
	}
	for _, root := range dirs {
		for i := range 150 {
			name := fmt.Sprintf("d%03d-%s", i, strings.Repeat("x", 60))
			if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 && !strings.HasPrefix(root, "/sys/") {
				if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(name, filepath.Join(root, fmt.Sprintf("l%03d", i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := Children(root)
		if err != nil {
			t.Fatal(err)
		}
		es, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, e := range es {
			if e.IsDir() {
				want = append(want, e.Name())
			}
		}
		if !slices.Equal(got, want) || len(got) != 150 {
			t.Errorf("%s: Children %d entries, os.ReadDir dirs %d; equal %v", root, len(got), len(want), slices.Equal(got, want))
		}
	}
	if _, err := Children(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v, want not-exist", err)
	}
}
