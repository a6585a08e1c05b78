// Package sandbox makes a throwaway cgroup tree that stands for a node's
// pods: a parent with a memory limit and workload children, on cgroup v1
// (memory, and freezer for the kill) or v2. The demo and the real-cgroup tests
// use it; Close kills every process in it and removes every directory it made.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
)

// Mount points of the hierarchies, variables so a test can point elsewhere.
var (
	V2Root      = "/sys/fs/cgroup"
	V1Memory    = "/sys/fs/cgroup/memory"
	V1Freezer   = "/sys/fs/cgroup/freezer"
	V1Pids      = "/sys/fs/cgroup/pids"
	errNoMemcg  = errors.New("no memory cgroup controller found (neither cgroup v2 with memory nor a v1 memory hierarchy)")
	cleanupWait = 5 * time.Second // how long Close waits for killed processes to leave
	// cleanupRmdirWait: how long Close retries a cgroup still busy (its
	// killed processes still charged to it).
	cleanupRmdirWait = time.Second
)

// Mode is the cgroup mode of the memory controller.
type Mode int

const (
	V1 Mode = 1
	V2 Mode = 2
)

func (m Mode) String() string { return "v" + strconv.Itoa(int(m)) }

// DetectMode finds where the memory controller lives.
func DetectMode() (Mode, error) {
	if cs, err := cgroup.ReadCgroupControllers(V2Root); err == nil && slices.Contains(cs, "memory") {
		return V2, nil
	}
	if _, err := os.Stat(filepath.Join(V1Memory, "memory.limit_in_bytes")); err == nil {
		return V1, nil
	}
	return 0, errNoMemcg
}

// Cgroup is one directory of the sandbox in every hierarchy it uses.
type Cgroup struct {
	Name    string
	Rel     string // path relative to the hierarchy roots, e.g. "/evictd-demo-123/web"
	Memory  string // memory cgroup directory (v1 memory hierarchy, or the v2 dir)
	Freezer string // v1 freezer directory; "" on v2
	Pids    string // v1 pids directory ("" on v2, where Memory has the pids controller, and without a v1 pids hierarchy)
}

// Dirs are the directories a process must join.
func (c Cgroup) Dirs() []string {
	dirs := []string{c.Memory}
	for _, d := range []string{c.Freezer, c.Pids} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Sandbox is a parent cgroup with a memory limit and its children.
type Sandbox struct {
	Mode     Mode
	Parent   Cgroup
	children []Cgroup
}

// New creates the parent cgroup rel (e.g. "/evictd-demo-1234") with a memory
// limit of limitBytes (0: no limit).
func New(rel string, limitBytes int64) (*Sandbox, error) {
	mode, err := DetectMode()
	if err != nil {
		return nil, err
	}
	s := &Sandbox{Mode: mode}
	s.Parent, err = s.mk("parent", rel)
	if err != nil {
		return nil, err
	}
	if mode == V2 {
		// pids too where the hierarchy has it (the PID hold's pids.max).
		ctrl := []string{"memory"}
		if cs, _ := cgroup.ReadCgroupControllers(s.Parent.Memory); slices.Contains(cs, "pids") {
			ctrl = append(ctrl, "pids")
		}
		if err := cgroup.WriteCgroupSubtreeControl(s.Parent.Memory, ctrl...); err != nil {
			s.Close()
			return nil, fmt.Errorf("enable memory controller in %s: %w", s.Parent.Memory, err)
		}
	}
	if limitBytes > 0 {
		if err := s.SetLimit(s.Parent, limitBytes); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Sandbox) mk(name, rel string) (Cgroup, error) {
	c := Cgroup{Name: name, Rel: rel}
	if s.Mode == V2 {
		c.Memory = filepath.Join(V2Root, rel)
	} else {
		c.Memory = filepath.Join(V1Memory, rel)
		if _, err := os.Stat(V1Freezer); err == nil {
			c.Freezer = filepath.Join(V1Freezer, rel)
		}
		if _, err := os.Stat(V1Pids); err == nil {
			c.Pids = filepath.Join(V1Pids, rel)
		}
	}
	for i, d := range c.Dirs() {
		if err := cgroup.Mkdir(d); err != nil {
			// Nothing half-made: the hierarchies done so far are empty.
			return Cgroup{}, errors.Join(fmt.Errorf("create cgroup: %w", err), cgroup.RemoveAll(c.Dirs()[:i], 0))
		}
	}
	return c, nil
}

// Child creates a workload cgroup under the parent.
func (s *Sandbox) Child(name string) (Cgroup, error) {
	c, err := s.mk(name, filepath.Join(s.Parent.Rel, name))
	if err != nil {
		return Cgroup{}, err
	}
	s.children = append(s.children, c)
	return c, nil
}

// Children returns the workload cgroups in creation order.
func (s *Sandbox) Children() []Cgroup { return append([]Cgroup(nil), s.children...) }

// SetLimit sets the memory limit of c (memory.max on v2, memory.limit_in_bytes on v1).
func (s *Sandbox) SetLimit(c Cgroup, bytes int64) error {
	if bytes <= 0 {
		return fmt.Errorf("memory limit of %s: %d bytes is not positive", c.Memory, bytes)
	}
	var err error
	if s.Mode == V2 {
		err = cgroupv2.WriteMemoryMax(c.Memory, uint64(bytes))
	} else {
		err = cgroupv1.WriteMemoryLimitInBytes(c.Memory, uint64(bytes))
	}
	if err != nil {
		return fmt.Errorf("set the memory limit of %s to %d bytes: %w", c.Memory, bytes, err)
	}
	return nil
}

// OOMKills returns the kernel OOM-kill count of c (v1 memory.oom_control
// "oom_kill", v2 memory.events "oom_kill"; hierarchical on v2 only).
func (s *Sandbox) OOMKills(c Cgroup) (uint64, error) {
	if s.Mode == V2 {
		ev, err := cgroupv2.ReadMemoryEvents(c.Memory)
		return ev.OOMKill, err
	}
	oc, err := cgroupv1.ReadMemoryOOMControl(c.Memory)
	return oc.OOMKill, err
}

// OOM is what the kernel OOM killer did in the whole sandbox.
type OOM struct {
	// Kills are the processes it killed: on v1 the counter is per memcg
	// (not hierarchical), so the parent's and each child's are added; on v2
	// memory.events is hierarchical and the parent's is the total.
	Kills uint64 `json:"kills"`
	// UnderOOM: a v1 memcg of the sandbox is in the OOM state now
	// (memory.oom_control under_oom; always false on v2).
	UnderOOM bool `json:"underOOM,omitempty"`
}

// Struck reports whether the OOM killer acted or the sandbox is under OOM.
func (o OOM) Struck() bool { return o.Kills > 0 || o.UnderOOM }

// OOM reads the OOM killer's counters of the parent and every child. A
// counter that cannot be read counts as 0 and its error is returned.
func (s *Sandbox) OOM() (OOM, error) {
	if s.Mode == V2 {
		ev, err := cgroupv2.ReadMemoryEvents(s.Parent.Memory)
		return OOM{Kills: ev.OOMKill}, err
	}
	var o OOM
	var errs []error
	for _, c := range append([]Cgroup{s.Parent}, s.children...) {
		oc, err := cgroupv1.ReadMemoryOOMControl(c.Memory)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		o.Kills += oc.OOMKill
		o.UnderOOM = o.UnderOOM || oc.UnderOOM
	}
	return o, errors.Join(errs...)
}

// Procs lists the processes in dir's cgroup.procs.
func Procs(dir string) ([]int, error) {
	return cgroup.ReadCgroupProcs(dir)
}

// Close kills every process left in the sandbox and removes its cgroups,
// children first. It is safe to call more than once.
func (s *Sandbox) Close() error {
	var errs []error
	all := append(s.Children(), s.Parent)
	for _, c := range all {
		if c.Memory == "" {
			continue
		}
		if c.Freezer != "" {
			// A frozen cgroup cannot be emptied: thaw first.
			if err := cgroupv1.WriteFreezerState(c.Freezer, cgroupv1.Thawed); err != nil && !cgroup.IsVanished(err) {
				errs = append(errs, fmt.Errorf("thaw %s: %w", c.Freezer, err))
			}
		}
		killAll(c.Dirs())
	}
	for _, c := range all {
		// Busy for a moment while killed processes are still charged.
		if err := cgroup.RemoveAll(c.Dirs(), cleanupRmdirWait); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	s.children = nil
	s.Parent = Cgroup{}
	return errors.Join(errs...)
}

func killAll(dirs []string) {
	deadline := time.Now().Add(cleanupWait)
	for time.Now().Before(deadline) {
		n := 0
		for _, d := range dirs {
			pids, _ := Procs(d)
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
