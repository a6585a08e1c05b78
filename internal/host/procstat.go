package host

import (
	"bytes"
	"io"
	"strconv"
)

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h):
// set once a task has begun do_exit. Such a task can no longer fork, and
// the kernel no longer moves it between cgroups (cgroup_migrate_add_task
// skips it).
const pfExiting = 0x4

// ProcStat is what evictd reads of /proc/<pid>/stat.
type ProcStat struct {
	State byte   // R, S, D, Z, T, t, X, I, …
	Flags uint64 // the task's PF_* flags
}

// Exiting reports whether the task has begun to exit (PF_EXITING) or is
// already a zombie or dead.
func (s ProcStat) Exiting() bool {
	return s.Flags&pfExiting != 0 || s.State == 'Z' || s.State == 'X'
}

// ReadProcStat reads <procRoot>/<pid>/stat; a thread ID works as well as a
// process ID. A task that is gone is an error wrapping fs.ErrNotExist (or
// ESRCH while it is being reaped).
func ReadProcStat(procRoot string, pid int) (ProcStat, error) {
	return readFile(procRoot+"/"+strconv.Itoa(pid)+"/stat", "", parseProcStat)
}

// parseProcStat parses "pid (comm) state ppid pgrp session tty_nr tpgid
// flags …". comm may hold spaces and parentheses, so the fields are counted
// from the last ')'.
func parseProcStat(r io.Reader) (ProcStat, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return ProcStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ProcStat{}, &ParseError{Line: 1, Token: trunc(b), Err: errFormat}
	}
	f := bytes.Fields(b[i+1:])
	// The kernel's task states are ASCII letters (R, S, D, Z, T, t, X, I, …);
	// anything else is not a stat line.
	if len(f) < 7 || len(f[0]) != 1 || f[0][0] <= ' ' || f[0][0] > '~' {
		return ProcStat{}, &ParseError{Line: 1, Token: trunc(b[i+1:]), Err: errFormat}
	}
	flags, err := parseUint(f[6])
	if err != nil {
		return ProcStat{}, &ParseError{Line: 1, Token: string(f[6]), Err: err}
	}
	return ProcStat{State: f[0][0], Flags: flags}, nil
}

// trunc keeps an error's token short.
func trunc(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
