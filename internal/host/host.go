// Package host reads node-wide kernel facts: /proc/meminfo, PSI under
// /proc/pressure, /proc/loadavg, the PID limits, /proc/uptime, mountinfo and
// statfs. Readers take the proc root (normally "/proc") so tests and
// containers with a host /proc mounted elsewhere can point them at another
// tree; Read… opens, parse… parses any io.Reader.
package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ParseError says a kernel file (/proc, cgroupfs) had content we could not
// read: it names the file, the 1-based line and the offending token.
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

// NotSupportedError says this kernel lacks the file (e.g. PSI before 4.20 or
// with psi=0 on the command line).
type NotSupportedError struct {
	Path      string
	MinKernel string
}

func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("%s: not supported by this kernel (needs Linux %s or later)", e.Path, e.MinKernel)
}

// Is makes errors.Is(err, errors.ErrUnsupported) true.
func (e *NotSupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

var (
	errNotNumber = errors.New("not a decimal number")
	errMissing   = errors.New("required field missing")
	errFormat    = errors.New("unexpected format")
)

// readFile reads path and parses it, filling the path into a *ParseError.
// A missing file with minKernel set is a *NotSupportedError.
func readFile[T any](path, minKernel string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	b, err := os.ReadFile(path)
	if err != nil {
		if minKernel != "" && errors.Is(err, os.ErrNotExist) {
			return zero, &NotSupportedError{Path: path, MinKernel: minKernel}
		}
		return zero, err
	}
	v, err := parse(bytes.NewReader(b))
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Path == "" {
			pe.Path = path
		} else if pe == nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return zero, err
	}
	return v, nil
}

func parseUint(tok []byte) (uint64, error) {
	if len(tok) == 0 || len(tok) > 20 {
		return 0, errNotNumber
	}
	var v uint64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, errNotNumber
		}
		v = v*10 + d
	}
	return v, nil
}

// lines calls fn for each line of b with its 1-based number.
func lines(b []byte, fn func(n int, l []byte) error) error {
	n := 0
	for len(b) > 0 {
		n++
		var l []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			l, b = b, nil
		}
		if err := fn(n, l); err != nil {
			return err
		}
	}
	return nil
}
