package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeHugePages(t *testing.T, sys string, dirs map[string]string) {
	t.Helper()
	for d, n := range dirs {
		p := filepath.Join(sys, "kernel/mm/hugepages", d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if n == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(p, "nr_hugepages"), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The two sizes an x86 kernel lists, as the files read (cAdvisor reads the
// same two files for the node's capacity).
func TestReadHugePages(t *testing.T) {
	sys := t.TempDir()
	writeHugePages(t, sys, map[string]string{"hugepages-2048kB": "16\n", "hugepages-1048576kB": "1\n"})
	hs, err := ReadHugePages(sys)
	if err != nil {
		t.Fatal(err)
	}
	want := []HugePages{{2 << 20, 16}, {1 << 30, 1}}
	if len(hs) != 2 || hs[0] != want[0] || hs[1] != want[1] {
		t.Fatalf("got %+v, want %+v", hs, want)
	}
	total, err := HugePagesBytes(sys)
	if err != nil || total != 32<<20+1<<30 {
		t.Errorf("HugePagesBytes = %d, %v; want %d", total, err, 32<<20+1<<30)
	}
}

// No huge page support (a kernel without CONFIG_HUGETLBFS, a /sys without
// the directory): none, no error.
func TestReadHugePagesNone(t *testing.T) {
	hs, err := ReadHugePages(t.TempDir())
	if err != nil || hs != nil {
		t.Fatalf("got %+v, %v; want none", hs, err)
	}
	if n, err := HugePagesBytes(t.TempDir()); n != 0 || err != nil {
		t.Fatalf("HugePagesBytes = %d, %v", n, err)
	}
}

// Bad input is a clear error naming the file, never a silent zero.
func TestReadHugePagesMalformed(t *testing.T) {
	for name, dirs := range map[string]map[string]string{
		"bad count":    {"hugepages-2048kB": "many\n"},
		"no count":     {"hugepages-2048kB": ""},
		"bad size":     {"hugepages-2MB": "1\n"},
		"zero size":    {"hugepages-0kB": "1\n"},
		"huge size":    {"hugepages-99999999999999999999kB": "1\n"},
		"overflowing":  {"hugepages-1048576kB": "18446744073709551615\n"},
		"size no unit": {"hugepages-2048": "1\n"},
	} {
		t.Run(name, func(t *testing.T) {
			sys := t.TempDir()
			writeHugePages(t, sys, dirs)
			_, err := HugePagesBytes(sys)
			if err == nil {
				t.Fatal("no error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) && !errors.Is(err, os.ErrNotExist) && name != "overflowing" {
				t.Errorf("untyped error %T %v", err, err)
			}
			t.Log(err)
		})
	}
}

// This machine's own /sys reads (whatever it holds).
func TestReadHugePagesLive(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/hugepages"); err != nil {
		t.Skipf("no /sys/kernel/mm/hugepages here: %v", err)
	}
	hs, err := ReadHugePages("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) == 0 {
		t.Fatal("/sys/kernel/mm/hugepages lists no size")
	}
	t.Logf("huge pages: %+v", hs)
}

// A directory name that parses names a whole number of KiB, at least one.
func FuzzParseHugePagesDirName(f *testing.F) {
	f.Add("hugepages-2048kB")
	f.Add("hugepages-1048576kB")
	f.Add("hugepages--1kB")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseHugePagesDirName(s)
		if err == nil && (v == 0 || v%1024 != 0) {
			t.Fatalf("%q: %d bytes accepted", s, v)
		}
	})
}
