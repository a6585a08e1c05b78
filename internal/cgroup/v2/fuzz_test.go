package v2

import (
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// cpu.stat under random input: no panic, and the fields agree with the
// entries they come from.
func FuzzParseCPUStatV2(f *testing.F) {
	cgrouptest.AddSeeds(f, "cpu.stat", "cpu.stat.nocpu")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseCPUStat(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		v, ok := cgroup.Lookup(s.Entries, "throttled_usec")
		if ok && v != s.ThrottledUsec {
			t.Fatalf("throttled_usec %d in the entries, %d in the field", v, s.ThrottledUsec)
		}
	})
}

// cgroup.events and pids.events: no panic on any input.
func FuzzParseEventFiles(f *testing.F) {
	cgrouptest.AddSeeds(f, "cgroup.events", "memory.events")
	f.Add([]byte("max 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseCgroupEvents(strings.NewReader(string(b)))
		parsePidsEvents(strings.NewReader(string(b)))
	})
}
