package v1

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// The v1 readers' parsers under random input: no panic; an error is a
// *cgroup.ParseError (or says the file is empty); what parses is consistent.

// checkParseErr fails unless err is nil or a typed parse error.
func checkParseErr(t *testing.T, err error) {
	t.Helper()
	var pe *cgroup.ParseError
	if err != nil && !errors.As(err, &pe) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "empty") {
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

func FuzzParseMemoryStatV1(f *testing.F) {
	cgrouptest.AddSeeds(f, "memory.stat.hog", "memory.stat.root")
	f.Add([]byte("total_inactive_file 18446744073709551615\ncache -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseMemoryStat(strings.NewReader(string(b)))
		checkParseErr(t, err)
		if err != nil {
			return
		}
		if v, ok := cgroup.Lookup(s.Entries, "total_inactive_file"); ok && v != s.TotalInactiveFile {
			t.Fatalf("total_inactive_file %d in the entries, %d in the field", v, s.TotalInactiveFile)
		}
	})
}

func FuzzParseMemoryOOMControl(f *testing.F) {
	cgrouptest.AddSeeds(f, "memory.oom_control")
	f.Add([]byte("oom_kill_disable 0\nunder_oom 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseMemoryOOMControl(strings.NewReader(string(b)))
		checkParseErr(t, err)
		if err == nil {
			if v, ok := cgroup.Lookup(o.Entries, "oom_kill"); ok != o.HasOOMKill || (ok && v != o.OOMKill) {
				t.Fatalf("oom_kill entry %d/%v, field %d/%v", v, ok, o.OOMKill, o.HasOOMKill)
			}
		}
	})
}

func FuzzParseCPUStatV1(f *testing.F) {
	cgrouptest.AddSeeds(f, "cpu.stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseCPUStat(strings.NewReader(string(b)))
		checkParseErr(t, err)
		if err == nil {
			if v, ok := cgroup.Lookup(s.Entries, "throttled_time"); ok && v != s.ThrottledTimeNs {
				t.Fatalf("throttled_time %d in the entries, %d in the field", v, s.ThrottledTimeNs)
			}
		}
	})
}

// The single-value files: a value that parses prints back as itself
// (limits may also be the kernel's "unlimited" page-rounded maximum).
func FuzzParseSingleValueFiles(f *testing.F) {
	cgrouptest.AddSeeds(f, "cpuacct.usage", "memory.usage_in_bytes.hog", "memory.limit_in_bytes.64m", "memory.limit_in_bytes.unlimited")
	f.Add([]byte("max\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, parse := range map[string]func(io.Reader) (uint64, error){
			"memory.usage_in_bytes": parseMemoryUsageInBytes, "memory.limit_in_bytes": parseMemoryLimitInBytes,
			"memory.max_usage_in_bytes": parseMemoryMaxUsageInBytes, "cpuacct.usage": parseCPUAcctUsage,
			"pids.current": parsePidsCurrent, "pids.max": parsePidsMax,
		} {
			v, err := parse(strings.NewReader(string(b)))
			checkParseErr(t, err)
			if err != nil || name == "pids.max" || name == "memory.limit_in_bytes" {
				continue
			}
			if again, err := parse(strings.NewReader(strconv.FormatUint(v, 10) + "\n")); err != nil || again != v {
				t.Fatalf("%s: %d does not read back (%d, %v)", name, v, again, err)
			}
		}
	})
}
