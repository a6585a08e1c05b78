package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Mkdir creates the cgroup dir, whose parent must exist: a new cgroup of
// the hierarchy, with its controllers' files made by the kernel. An
// existing dir is an *fs.PathError with EEXIST (errors.Is(err,
// fs.ErrExist)).
func Mkdir(dir string) error {
	if err := syscall.Mkdir(dir, 0o755); err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return nil
}

// Rmdir removes the cgroup dir once, without waiting: a cgroup with
// processes or child cgroups is EBUSY, one already gone ENOENT
// (errors.Is(err, fs.ErrNotExist)), each in an *fs.PathError. RemoveAll
// waits for a busy one.
func Rmdir(dir string) error {
	if err := syscall.Rmdir(dir); err != nil {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// MkdirAll creates the cgroup dir and any missing parents (each a new cgroup
// of the hierarchy) and returns the directories it created, parents first,
// for RemoveAll to take down again.
func MkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := Mkdir(missing[i]); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, err
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// rmdirPoll is how often RemoveAll retries a cgroup that is still busy.
const rmdirPoll = 10 * time.Millisecond

// RemoveAll removes the cgroups dirs (as MkdirAll returned them), children
// first. A cgroup is busy (EBUSY) while a task is still leaving it, so each
// removal is retried for up to wait; one that is gone already is fine. The
// first other error, or EBUSY after the wait, is returned once the rest
// have been tried.
func RemoveAll(dirs []string, wait time.Duration) error {
	var first error
	for i := len(dirs) - 1; i >= 0; i-- {
		deadline := time.Now().Add(wait)
		for {
			err := syscall.Rmdir(dirs[i])
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				if first == nil {
					first = &fs.PathError{Op: "rmdir", Path: dirs[i], Err: err}
				}
				break
			}
			time.Sleep(rmdirPoll)
		}
	}
	return first
}
