package v1

import (
	"os"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// BenchmarkParseMemoryStat is the user-space share of a memory.stat read:
// parsing the captured file (no syscalls).
func BenchmarkParseMemoryStat(b *testing.B) {
	raw, err := os.ReadFile("testdata/memory.stat.hog")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := parseMemoryStat(cgroup.NewContent(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadWorkingSetReal reads usage_in_bytes + memory.stat of a real v1
// cgroup holding a 16 MiB hog: what the agent's fast poll pays per read.
func BenchmarkReadWorkingSetReal(b *testing.B) {
	cgrouptest.RequireV1Memory(b)
	dir := cgrouptest.Mkdirs(b, cgrouptest.V1Memory, cgrouptest.UniqueName(b))
	cgrouptest.StartHog(b, 16, dir)
	b.ReportAllocs()
	for b.Loop() {
		u, err := ReadMemoryUsageInBytes(dir)
		if err != nil {
			b.Fatal(err)
		}
		s, err := ReadMemoryStat(dir)
		if err != nil {
			b.Fatal(err)
		}
		_ = WorkingSet(u, &s)
	}
}
