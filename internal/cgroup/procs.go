package cgroup

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
)

// cgroupProcsSince is the kernel that added cgroup.procs (v1; v2 has had it
// from its start in 4.5).
const cgroupProcsSince = "2.6.24"

// ErrNotPID is wrapped by the *ParseError for a cgroup.procs token that is
// not a PID (a decimal in 1..2^31-1).
var ErrNotPID = errors.New("not a PID")

// ReadCgroupProcs reads cgroup.procs: the PIDs of the processes in this
// cgroup only (not its descendants), on v1 and v2 alike. A token that is not
// a PID is a *ParseError naming the file and the token; a cgroup removed
// under us is a *VanishedError.
func ReadCgroupProcs(dir string) ([]int, error) {
	return ReadFile(dir, "cgroup.procs", cgroupProcsSince, parseCgroupProcs)
}

// ReadCgroupProcsAt is ReadCgroupProcs in an opened cgroup directory.
func ReadCgroupProcsAt(d *Dir) ([]int, error) {
	return ReadFileAt(d, "cgroup.procs", cgroupProcsSince, parseCgroupProcs)
}

// ReadCgroupProcsRecursive reads cgroup.procs of dir and of every cgroup
// below it. A descendant removed during the walk is skipped (its processes
// are gone); dir itself gone is a *VanishedError, which callers that kill
// treat as "nothing left".
func ReadCgroupProcsRecursive(dir string) ([]int, error) {
	return readRecursive(dir, ReadCgroupProcs)
}

// ReadTasks reads a v1 cgroup's tasks file: the thread IDs of every thread
// in this cgroup only, one per line. Unlike cgroup.procs it lists the
// threads of a group whose leader has exited (or sits in another cgroup of
// a hierarchy) and never an exited leader. v2 has cgroup.threads instead.
func ReadTasks(dir string) ([]int, error) {
	return ReadFile(dir, "tasks", cgroupProcsSince, parseCgroupProcs)
}

// ReadTasksRecursive is ReadTasks of dir and every cgroup below it, with
// ReadCgroupProcsRecursive's errors.
func ReadTasksRecursive(dir string) ([]int, error) {
	return readRecursive(dir, ReadTasks)
}

// WriteTasks moves the one thread tid into dir through a v1 tasks file. A
// thread that is already exiting stays where it is and the write still
// succeeds; a thread that is gone is an *fs.PathError with ESRCH.
func WriteTasks(dir string, tid int) error {
	return WriteFile(dir, "tasks", cgroupProcsSince, strconv.Itoa(tid))
}

func readRecursive(dir string, read func(string) ([]int, error)) ([]int, error) {
	var pids []int
	err := WalkCgroups(dir, func(d string) error {
		ps, err := read(d)
		pids = append(pids, ps...)
		return err
	})
	return pids, err
}

// WalkCgroups calls fn for dir and every cgroup below it, parents first. A
// descendant removed during the walk (or whose fn returns a
// *VanishedError) is skipped; dir itself gone is a *VanishedError.
func WalkCgroups(dir string, fn func(dir string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if p == dir {
					return &VanishedError{Dir: dir, Err: err}
				}
				return nil // a child cgroup removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if err := fn(p); err != nil {
			if p != dir && IsVanished(err) {
				return filepath.SkipDir
			}
			return err
		}
		return nil
	})
}

// ReadCgroupProcsCount counts the PIDs in cgroup.procs without keeping
// them (the Summary's process counts), with ReadCgroupProcs's errors.
func ReadCgroupProcsCount(dir string) (uint64, error) {
	return ReadFile(dir, "cgroup.procs", cgroupProcsSince, parseCgroupProcsCount)
}

// ReadCgroupProcsCountAt is ReadCgroupProcsCount in an opened cgroup directory.
func ReadCgroupProcsCountAt(d *Dir) (uint64, error) {
	return ReadFileAt(d, "cgroup.procs", cgroupProcsSince, parseCgroupProcsCount)
}

// parseCgroupProcs parses cgroup.procs (or v1 tasks): one PID per line.
func parseCgroupProcs(r io.Reader) ([]int, error) {
	b, err := Bytes(r)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, bytes.Count(b, []byte{'\n'}))
	if err := scanCgroupProcs(b, func(pid int) { pids = append(pids, pid) }); err != nil {
		return nil, err
	}
	return pids, nil
}

// parseCgroupProcsCount is parseCgroupProcs that only counts.
func parseCgroupProcsCount(r io.Reader) (uint64, error) {
	b, err := Bytes(r)
	if err != nil {
		return 0, err
	}
	var n uint64
	if err := scanCgroupProcs(b, func(int) { n++ }); err != nil {
		return 0, err
	}
	return n, nil
}

// scanCgroupProcs calls each for every PID of cgroup.procs content b; a token
// that is not a PID is a *ParseError naming the line and token.
func scanCgroupProcs(b []byte, each func(pid int)) error {
	for line := 1; len(b) > 0; line++ {
		var l []byte
		l, b = nextLine(b)
		if len(l) == 0 {
			continue
		}
		v, err := ParseUint(l)
		if err != nil || v == 0 || v > math.MaxInt32 || l[0] == '-' {
			return &ParseError{Line: line, Token: string(l), Err: ErrNotPID}
		}
		each(int(v))
	}
	return nil
}
