package collect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	v1 "github.com/evictd/evictd/internal/cgroup/v1"
	v2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/host"
)

// CgroupStat is what `evictd stat` shows for one cgroup: the numbers people's
// scripts used to read on cgroup v1, read the right way for the cgroup's
// version, with the file and formula each came from.
type CgroupStat struct {
	Cgroup  string `json:"cgroup"` // relative to the hierarchy root
	Version int    `json:"cgroupVersion"`
	PodUID  string `json:"podUID,omitempty"`
	// Kind is "pod", "container", "workload" or "cgroup".
	Kind        string `json:"kind"`
	ContainerID string `json:"containerID,omitempty"`

	UsageBytes        uint64 `json:"usageBytes"`
	InactiveFileBytes uint64 `json:"inactiveFileBytes"`
	WorkingSetBytes   uint64 `json:"workingSetBytes"`
	// WorkingSetFormula names the files: v1 memory.usage_in_bytes −
	// total_inactive_file, v2 memory.current − inactive_file.
	WorkingSetFormula string  `json:"workingSetFormula"`
	LimitBytes        *uint64 `json:"limitBytes,omitempty"` // nil when unlimited

	CPU *CPUThrottling `json:"cpu,omitempty"`
	OOM *OOMCounts     `json:"oom,omitempty"`
	PSI *CgroupPSI     `json:"psi,omitempty"`

	Containers []CgroupStat `json:"containers,omitempty"`
	// Notes explain missing or partial values (e.g. no per-cgroup PSI on v1).
	Notes []string `json:"notes,omitempty"`
}

// CPUThrottling is CFS bandwidth throttling from cpu.stat.
type CPUThrottling struct {
	Periods          uint64  `json:"nrPeriods"`
	ThrottledPeriods uint64  `json:"nrThrottled"`
	ThrottledSeconds float64 `json:"throttledSeconds"`
	// Source names the key and its unit: v1 throttled_time is nanoseconds,
	// v2 throttled_usec microseconds.
	Source string `json:"source"`
}

// OOMCounts are the memory controller's OOM counters.
type OOMCounts struct {
	// Events is how often the cgroup hit its limit and invoked the OOM killer
	// (v2 memory.events "oom"; v1 has no such counter: nil).
	Events *uint64 `json:"oomEvents,omitempty"`
	// Kills is the number of processes the OOM killer killed.
	Kills uint64 `json:"oomKills"`
	// GroupKills is v2's oom_group_kill (6.1+): whole-container kills with
	// memory.oom.group=1, which match restarts caused by OOM.
	GroupKills *uint64 `json:"oomGroupKills,omitempty"`
	Source     string  `json:"source"`
}

// CgroupPSI is a v2 cgroup's pressure (v1 has no per-cgroup PSI).
type CgroupPSI struct {
	Memory *host.Pressure `json:"memory,omitempty"`
	CPU    *host.Pressure `json:"cpu,omitempty"`
	IO     *host.Pressure `json:"io,omitempty"`
}

// StatCgroup reads one cgroup. rel is relative to the hierarchy root; an
// absolute path under the memory controller's mount point is accepted too.
func (c *Collector) StatCgroup(rel string) (CgroupStat, error) {
	rel = c.relPath(rel)
	if st, err := os.Stat(c.memRoot + rel); err != nil || !st.IsDir() {
		return CgroupStat{}, fmt.Errorf("no cgroup %s in the memory hierarchy at %s: %w", rel, c.memRoot, fs.ErrNotExist)
	}
	s := CgroupStat{Cgroup: rel, Version: c.memVersion, Kind: "cgroup"}
	if err := c.fillStat(&s); err != nil {
		return s, err
	}
	return s, nil
}

// relPath turns a path under the memory mount point into one relative to
// the hierarchy root ("/a/b").
func (c *Collector) relPath(p string) string {
	if strings.HasPrefix(p, c.memRoot+"/") {
		p = strings.TrimPrefix(p, c.memRoot)
	}
	return "/" + strings.Trim(p, "/")
}

// ErrNoSuchPod says no pod cgroup has the UID asked for.
var ErrNoSuchPod = errors.New("no pod cgroup with that UID")

// StatWorkloads reads every pod (or plain workload) and its containers; with
// podUID set, only that pod.
func (c *Collector) StatWorkloads(podUID string) ([]CgroupStat, error) {
	ws, err := c.Workloads()
	if err != nil {
		return nil, err
	}
	var out []CgroupStat
	for _, w := range ws {
		if podUID != "" && w.PodUID != podUID {
			continue
		}
		kind := "pod"
		if w.PodUID == "" {
			kind = "workload"
		}
		s := CgroupStat{Cgroup: w.Cgroup, Version: c.memVersion, PodUID: w.PodUID, Kind: kind}
		if err := c.fillStat(&s); err != nil {
			if gone(err) {
				continue
			}
			return nil, err
		}
		for _, ct := range w.Containers {
			cs := CgroupStat{Cgroup: ct.Cgroup, Version: c.memVersion, PodUID: w.PodUID, Kind: "container", ContainerID: ct.ID}
			if err := c.fillStat(&cs); err != nil {
				if gone(err) {
					continue
				}
				return nil, err
			}
			s.Containers = append(s.Containers, cs)
		}
		if c.memVersion == 1 && s.OOM != nil {
			// v1 counts a kill only in the victim's own cgroup: add the
			// current containers' counts so the pod row shows them.
			for _, cs := range s.Containers {
				if cs.OOM != nil {
					s.OOM.Kills += cs.OOM.Kills
				}
			}
			s.OOM.Source = "memory.oom_control oom_kill of the pod cgroup plus its current containers (v1 counts a kill only in the victim's cgroup; a container's count is lost when its cgroup is recreated)"
		}
		out = append(out, s)
	}
	if podUID != "" && len(out) == 0 {
		return nil, fmt.Errorf("%w %s under %s", ErrNoSuchPod, podUID, c.podsCgroup)
	}
	return out, nil
}

func (c *Collector) fillStat(s *CgroupStat) error {
	dir := c.memRoot + s.Cgroup
	m, err := readCgroupMemory(dir, c.memVersion, true)
	if err != nil {
		return err
	}
	s.UsageBytes, s.InactiveFileBytes, s.WorkingSetBytes = m.Usage, m.InactiveFile, m.WorkingSet
	if m.Limit <= memoryUnlimitedAbove {
		s.LimitBytes = u64(m.Limit)
	}
	if c.memVersion == 1 {
		s.WorkingSetFormula = "memory.usage_in_bytes - memory.stat:total_inactive_file"
		if cpuRoot, v, ok := c.h.Controller("cpu"); ok && v == 1 {
			if cs, err := v1.ReadCPUStat(cpuRoot + s.Cgroup); err == nil {
				s.CPU = &CPUThrottling{Periods: cs.NrPeriods, ThrottledPeriods: cs.NrThrottled,
					ThrottledSeconds: float64(cs.ThrottledTimeNs) / 1e9, Source: "cpu.stat throttled_time (nanoseconds)"}
			} else if !gone(err) {
				return err
			} else {
				s.Notes = append(s.Notes, "no cgroup of this path in the cpu hierarchy ("+cpuRoot+")")
			}
		}
		o, err := v1.ReadMemoryOOMControl(dir)
		if err != nil {
			return err
		}
		s.OOM = &OOMCounts{Kills: o.OOMKill, Source: "memory.oom_control oom_kill (this cgroup only; v1 does not add descendants' kills to a parent, so a container's count is lost when its cgroup is recreated)"}
		s.Notes = append(s.Notes, "cgroup v1 has no per-cgroup PSI")
		return nil
	}
	s.WorkingSetFormula = "memory.current - memory.stat:inactive_file"
	if cs, err := v2.ReadCPUStat(dir); err == nil {
		if cs.HasThrottling {
			s.CPU = &CPUThrottling{Periods: cs.NrPeriods, ThrottledPeriods: cs.NrThrottled,
				ThrottledSeconds: float64(cs.ThrottledUsec) / 1e6, Source: "cpu.stat throttled_usec (microseconds)"}
		} else {
			s.Notes = append(s.Notes, "the cpu controller is not enabled for this cgroup: no throttling counters")
		}
	} else {
		return err
	}
	ev, err := v2.ReadMemoryEvents(dir)
	if err != nil {
		return err
	}
	src := "memory.events (this cgroup and its descendants)"
	if s.Kind == "container" {
		src += "; a container's counters restart with its cgroup, read the pod's to count OOM restarts"
	}
	s.OOM = &OOMCounts{Events: u64(ev.OOM), Kills: ev.OOMKill, Source: src}
	if ev.HasOOMGroupKill {
		s.OOM.GroupKills = u64(ev.OOMGroupKill)
	}
	psi := &CgroupPSI{}
	for _, r := range []struct {
		read func(string) (host.Pressure, error)
		dst  **host.Pressure
	}{{v2.ReadMemoryPressure, &psi.Memory}, {v2.ReadCPUPressure, &psi.CPU}, {v2.ReadIOPressure, &psi.IO}} {
		p, err := r.read(dir)
		if err == nil {
			*r.dst = &p
		} else if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	if psi.Memory != nil || psi.CPU != nil || psi.IO != nil {
		s.PSI = psi
	} else {
		s.Notes = append(s.Notes, "no PSI files: kernel without CONFIG_PSI or booted with psi=0")
	}
	return nil
}
