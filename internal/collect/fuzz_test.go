package collect

import (
	"bytes"
	"strings"
	"testing"
)

// The process count of a cgroup.procs file is its number of lines, a last
// line without a newline included, on any input.
func FuzzParseProcCount(f *testing.F) {
	f.Add([]byte("1\n22\n333\n"))
	f.Add([]byte("1\n2"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseProcCount(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(len(bytes.SplitAfter(b, []byte{'\n'})))
		if len(b) == 0 || b[len(b)-1] == '\n' {
			want-- // SplitAfter ends with an empty piece after a final newline
		}
		if n != want {
			t.Fatalf("%q: %d processes, want %d", b, n, want)
		}
	})
}
