// Package cgroup holds what the cgroup v1 and v2 readers share: the typed
// errors every reader returns, the one-read file helpers (by path, in an
// opened directory, through a held descriptor), the small token parsers
// (numbers, "max", flat-keyed files), the readers of the files both versions
// have (cgroup.procs, cgroup.controllers), the child-cgroup listing and the
// detection of which hierarchy serves which controller on this host.
//
// The per-version readers live in the v1 and v2 subpackages; they are named
// after the kernel file they read. A reader never returns a silent 0: a value
// it could not get is an error of one of the types below.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/evictd/evictd/internal/host"
)

// NotSupportedError says that this kernel does not provide a file: the cgroup
// directory exists but the file does not. MinKernel names the first kernel
// that has it (or the config option that enables it), so the user can tell an
// old kernel from a broken setup. errors.Is(err, errors.ErrUnsupported) is
// true. It is the host readers' type: one error for every kernel file.
type NotSupportedError = host.NotSupportedError

// VanishedError says the cgroup itself went away (its directory is gone or
// the kernel returned ENODEV while reading): the workload ended. Callers skip
// that cgroup only. errors.Is(err, fs.ErrNotExist) is true.
type VanishedError struct {
	Dir string // the cgroup directory
	Err error  // the underlying error
}

func (e *VanishedError) Error() string {
	return fmt.Sprintf("cgroup %s vanished: %v", e.Dir, e.Err)
}

// Unwrap returns the underlying error.
func (e *VanishedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, fs.ErrNotExist) true whatever the errno was.
func (e *VanishedError) Is(target error) bool { return target == fs.ErrNotExist }

// ParseError says a kernel file had content we could not read: it names the
// file, the 1-based line and the offending token. It is the host readers'
// type, so a caller handles /proc and cgroupfs parse errors alike.
type ParseError = host.ParseError

// IsVanished reports whether err says that a cgroup went away.
func IsVanished(err error) bool {
	var v *VanishedError
	return errors.As(err, &v)
}
