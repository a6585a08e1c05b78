package initramfs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

type entry struct {
	name         string
	mode         uint32
	rmaj, rmin   uint32
	data         string
	headerOffset int
}

// readNewc is an independent reader of the newc format, strict about the
// magic, the field widths and the 4-byte alignment the kernel relies on.
func readNewc(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("header at offset %d is not 4-byte aligned", off)
		}
		if len(b) < off+110 {
			t.Fatalf("truncated header at offset %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at offset %d", h[:6], off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("field %d at offset %d: %v", i, off, err)
			}
			return uint32(v)
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		nameStart := off + 110
		name := string(b[nameStart : nameStart+int(namesize)-1])
		if b[nameStart+int(namesize)-1] != 0 {
			t.Fatalf("name %q not NUL-terminated", name)
		}
		dataStart := (nameStart + int(namesize) + 3) &^ 3
		data := string(b[dataStart : dataStart+int(size)])
		e := entry{name: name, mode: mode, rmaj: rmaj, rmin: rmin, data: data, headerOffset: off}
		off = (dataStart + int(size) + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	src := t.TempDir()
	if err := os.Chmod(src, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/f.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.CharDev("/dev/console", 0o600, 5, 1))
	must(w.File("/init", 0o755, []byte("abc"))) // 3 bytes: exercises padding
	must(w.Tree("/work/pkg/testdata", src))
	must(w.Dir("/tmp", 0o1777))
	must(w.Close())

	got := map[string]entry{}
	var order []string
	for _, e := range readNewc(t, buf.Bytes()) {
		if _, dup := got[e.name]; dup {
			t.Errorf("%s appears twice", e.name)
		}
		got[e.name] = e
		order = append(order, e.name)
	}
	want := map[string]struct {
		mode uint32
		data string
	}{
		"dev":                         {0o040755, ""},
		"dev/console":                 {0o020600, ""},
		"init":                        {0o100755, "abc"},
		"work":                        {0o040755, ""},
		"work/pkg":                    {0o040755, ""},
		"work/pkg/testdata":           {0o040750, ""},
		"work/pkg/testdata/link":      {0o120777, "sub/f.txt"},
		"work/pkg/testdata/sub":       {0o040755, ""},
		"work/pkg/testdata/sub/f.txt": {0o100640, "hello"},
		"tmp":                         {0o041777 &^ 0o1000, ""}, // Perm() drops the sticky bit
	}
	for name, w := range want {
		e, ok := got[name]
		if !ok {
			t.Errorf("missing %s; have %v", name, order)
			continue
		}
		if e.mode != w.mode || e.data != w.data {
			t.Errorf("%s: mode %o data %q, want mode %o data %q", name, e.mode, e.data, w.mode, w.data)
		}
	}
	if len(got) != len(want) {
		t.Errorf("archive has %v, want %d entries", order, len(want))
	}
	if c := got["dev/console"]; c.rmaj != 5 || c.rmin != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.rmaj, c.rmin)
	}
	// Parents come before their children: the kernel creates entries in order.
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, n := range order {
		if d := filepath.Dir(n); d != "." && pos[d] > pos[n] {
			t.Errorf("%s comes before its parent %s", n, d)
		}
	}
}

func TestWriterRefusesDuplicatesAndRoot(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.File("a", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.File("/a", 0o644, nil); err == nil {
		t.Error("adding /a twice: no error")
	}
	if err := w.File("/", 0o644, nil); err == nil {
		t.Error("adding /: no error")
	}
	if err := w.CopyFile("x", t.TempDir()); err == nil {
		t.Error("CopyFile of a directory: no error")
	}
}
