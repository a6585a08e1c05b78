package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The range the kernel accepts in /proc/<pid>/oom_score_adj
// (OOM_SCORE_ADJ_MIN, OOM_SCORE_ADJ_MAX in include/uapi/linux/oom.h).
const (
	OOMScoreAdjMin = -1000
	OOMScoreAdjMax = 1000
)

// ProcessGoneError says the process exited (its /proc directory is gone, or
// the kernel answered ESRCH). errors.Is(err, fs.ErrNotExist) is true: callers
// skip that process only.
type ProcessGoneError struct {
	PID int
	Err error
}

func (e *ProcessGoneError) Error() string {
	return fmt.Sprintf("process %d is gone: %v", e.PID, e.Err)
}

// Unwrap returns the underlying error.
func (e *ProcessGoneError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, fs.ErrNotExist) true whatever the errno was.
func (e *ProcessGoneError) Is(target error) bool { return target == fs.ErrNotExist }

func oomScoreAdjPath(procRoot string, pid int) string {
	return procRoot + "/" + strconv.Itoa(pid) + "/oom_score_adj"
}

// ReadOOMScoreAdj reads <procRoot>/<pid>/oom_score_adj. A process that
// exited is a *ProcessGoneError.
func ReadOOMScoreAdj(procRoot string, pid int) (int, error) {
	v, err := readFile(oomScoreAdjPath(procRoot, pid), "", parseOOMScoreAdj)
	return v, goneErr(pid, err)
}

// parseOOMScoreAdj parses one decimal in [-1000, 1000] and a newline.
func parseOOMScoreAdj(r io.Reader) (int, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return 0, &ParseError{Line: 1, Err: errMissing}
	}
	neg := t[0] == '-'
	digits := t
	if neg {
		digits = t[1:]
	}
	if len(digits) > 4 {
		return 0, &ParseError{Line: 1, Token: string(t), Err: errNotNumber}
	}
	u, err := parseUint(digits)
	if err != nil {
		return 0, &ParseError{Line: 1, Token: string(t), Err: err}
	}
	v := int(u)
	if neg {
		v = -v
	}
	if v < OOMScoreAdjMin || v > OOMScoreAdjMax {
		return 0, &ParseError{Line: 1, Token: string(t), Err: errors.New("outside [-1000, 1000]")}
	}
	return v, nil
}

// WriteOOMScoreAdj writes v to <procRoot>/<pid>/oom_score_adj. Lowering a
// value below the process's floor (oom_score_adj_min: 0 unless a process
// holding CAP_SYS_RESOURCE set it) needs CAP_SYS_RESOURCE; without it the
// kernel answers EACCES (errors.Is(err, fs.ErrPermission)). A process that
// exited is a *ProcessGoneError.
func WriteOOMScoreAdj(procRoot string, pid, v int) error {
	if v < OOMScoreAdjMin || v > OOMScoreAdjMax {
		return fmt.Errorf("oom_score_adj %d of process %d: outside [-1000, 1000]", v, pid)
	}
	p := oomScoreAdjPath(procRoot, pid)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return goneErr(pid, err)
	}
	_, err = f.Write(strconv.AppendInt(nil, int64(v), 10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return goneErr(pid, err)
}

// goneErr turns ENOENT and ESRCH into a *ProcessGoneError.
func goneErr(pid int, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return &ProcessGoneError{PID: pid, Err: err}
	}
	return err
}

// capSysResource is CAP_SYS_RESOURCE's bit (include/uapi/linux/capability.h).
const capSysResource = unix.CAP_SYS_RESOURCE

// HasCapSysResource reports whether this process has CAP_SYS_RESOURCE in its
// effective set: without it no oom_score_adj can be lowered below a
// process's floor, so the Guaranteed −997 and evictd's own −999 cannot be
// written.
func HasCapSysResource() (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	return data[capSysResource/32].Effective&(1<<(capSysResource%32)) != 0, nil
}
