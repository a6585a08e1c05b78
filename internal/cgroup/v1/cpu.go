package v1

import (
	"io"

	"github.com/evictd/evictd/internal/cgroup"
)

// CPUStat is the cpu controller's cpu.stat. On v1 throttled_time is in
// NANOSECONDS (v2's throttled_usec is microseconds: seed 003).
type CPUStat struct {
	NrPeriods, NrThrottled uint64
	ThrottledTimeNs        uint64
	Entries                []cgroup.Entry
}

var cpuStatKeys = cgroup.NewKeys("nr_periods", "nr_throttled", "throttled_time", "nr_bursts", "burst_time",
	"wait_sum", "nr_migrations_cold")

// ReadCPUStat reads cpu.stat from a directory of the cpu hierarchy.
func ReadCPUStat(dir string) (CPUStat, error) {
	return cgroup.ReadFile(dir, "cpu.stat", "2.6.24", parseCPUStat)
}

func parseCPUStat(r io.Reader) (CPUStat, error) {
	var s CPUStat
	var err error
	s.Entries, err = cgroup.ParseFlatKeyed(r, cpuStatKeys, make([]cgroup.Entry, 0, 5))
	if err != nil {
		return CPUStat{}, err
	}
	if len(s.Entries) == 0 {
		return CPUStat{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	s.NrPeriods, _ = cgroup.Lookup(s.Entries, "nr_periods")
	s.NrThrottled, _ = cgroup.Lookup(s.Entries, "nr_throttled")
	s.ThrottledTimeNs, _ = cgroup.Lookup(s.Entries, "throttled_time")
	return s, nil
}

// ReadCPUAcctUsage reads cpuacct.usage: the CPU time, in nanoseconds, that
// the cgroup and its descendants used.
func ReadCPUAcctUsage(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "cpuacct.usage", "2.6.24", parseCPUAcctUsage)
}

func parseCPUAcctUsage(r io.Reader) (uint64, error) { return cgroup.ParseSingle(r, cgroup.ParseUint) }

// ReadPidsCurrent reads pids.current from the pids hierarchy.
func ReadPidsCurrent(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "pids.current", "4.3", parsePidsCurrent)
}

func parsePidsCurrent(r io.Reader) (uint64, error) { return cgroup.ParseSingle(r, cgroup.ParseUint) }

// ReadPidsMax reads pids.max; "max" reads as cgroup.Max. The root cgroup has
// no pids.max: that reads as a *cgroup.NotSupportedError.
func ReadPidsMax(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "pids.max", "4.3", parsePidsMax)
}

func parsePidsMax(r io.Reader) (uint64, error) { return cgroup.ParseSingle(r, cgroup.ParseLimit) }
