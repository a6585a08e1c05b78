package cgroup

import (
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// WriteFile writes value to dir/name in one write(2), as the kernel expects
// of a cgroup control file. Errors are typed as ReadFile's: a missing file in
// an existing dir is a *NotSupportedError naming minKernel, a vanished
// cgroup a *VanishedError; anything else (EACCES, EINVAL: a value the kernel
// refuses) an *fs.PathError with the errno.
func WriteFile(dir, name, minKernel, value string) error {
	path := dir + "/" + name
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return classifyOpenError(dir, path, minKernel, err)
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return nil
	case err == unix.ENODEV || err == unix.ENOENT:
		return &VanishedError{Dir: dir, Err: &fs.PathError{Op: "write", Path: path, Err: err}}
	}
	return &fs.PathError{Op: "write", Path: path, Err: err}
}

// FormatLimit renders a limit as a v2 file holds it: "max" for Max, else
// the decimal number.
func FormatLimit(v uint64) string {
	if v == Max {
		return "max"
	}
	return strconv.FormatUint(v, 10)
}

// cgroupKillSince is the kernel that added cgroup.kill (v2).
const cgroupKillSince = "5.14"

// WriteCgroupProcs moves the process pid (its whole thread group) into dir
// by writing cgroup.procs, on v1 and v2 alike. A task that is already
// exiting is left where it is by the kernel and the write still succeeds
// (cgroup_migrate_add_task skips PF_EXITING tasks); a pid that is gone is
// an *fs.PathError with ESRCH.
func WriteCgroupProcs(dir string, pid int) error {
	return WriteFile(dir, "cgroup.procs", cgroupProcsSince, strconv.Itoa(pid))
}

// WriteCgroupKill writes "1" to a v2 cgroup's cgroup.kill: the kernel kills
// every process of the subtree, and any process forked while it does so.
func WriteCgroupKill(dir string) error {
	return WriteFile(dir, "cgroup.kill", cgroupKillSince, "1")
}

// pidsSince is the kernel that added the pids controller (v1 and v2).
const pidsSince = "4.3"

// WritePidsMax writes pids.max, on v1 and v2 alike (Max writes "max"): a
// fork or clone that would take pids.current above it fails with EAGAIN.
func WritePidsMax(dir string, v uint64) error {
	return WriteFile(dir, "pids.max", pidsSince, FormatLimit(v))
}

// WriteCgroupSubtreeControl enables controllers (e.g. "memory", "pids")
// for dir's children by writing "+memory +pids" to a v2 cgroup's
// cgroup.subtree_control. A controller the parent has not enabled for dir
// is an *fs.PathError with ENOENT or EINVAL; one busy with processes in dir itself
// EBUSY.
func WriteCgroupSubtreeControl(dir string, controllers ...string) error {
	var b []byte
	for i, c := range controllers {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(append(b, '+'), c...)
	}
	return WriteFile(dir, "cgroup.subtree_control", subtreeControlSince, string(b))
}

// subtreeControlSince is the kernel that added cgroup v2 and its
// cgroup.subtree_control.
const subtreeControlSince = "4.5"
