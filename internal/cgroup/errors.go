// Package cgroup holds what the cgroup v1 and v2 readers share: the typed
// errors every reader returns, the one-read file helper, the small token
// parsers (numbers, "max", flat-keyed files) and the detection of which
// hierarchy serves which controller on this host.
//
// The per-version readers live in the v1 and v2 subpackages; they are named
// after the kernel file they read. A reader never returns a silent 0: a value
// it could not get is an error of one of the types below.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
)

// NotSupportedError says that this kernel does not provide a file: the cgroup
// directory exists but the file does not. MinKernel names the first kernel
// that has it (or the config option that enables it), so the user can tell an
// old kernel from a broken setup.
type NotSupportedError struct {
	Path      string // the file that is missing
	MinKernel string // e.g. "5.19" or "4.20 with CONFIG_PSI"
}

func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("%s: not supported by this kernel (needs Linux %s or later)", e.Path, e.MinKernel)
}

// Is makes errors.Is(err, errors.ErrUnsupported) true.
func (e *NotSupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

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
// file, the 1-based line and the offending token.
type ParseError struct {
	Path  string
	Line  int
	Token string
	Err   error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: bad token %q: %v", e.Path, e.Line, e.Token, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// IsVanished reports whether err says that a cgroup went away.
func IsVanished(err error) bool {
	var v *VanishedError
	return errors.As(err, &v)
}
