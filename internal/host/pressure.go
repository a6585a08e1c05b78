package host

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// PSILine is one line of a pressure file. Avg* are percentages of wall time;
// TotalUs is the cumulative stall time in MICROSECONDS, as the kernel writes it.
type PSILine struct {
	Avg10   float64 `json:"avg10"`
	Avg60   float64 `json:"avg60"`
	Avg300  float64 `json:"avg300"`
	TotalUs uint64  `json:"totalMicroseconds"`
}

// Pressure is a PSI file (/proc/pressure/<resource> or a v2 cgroup's
// <resource>.pressure). HasFull is false where the kernel writes no "full"
// line (the system-wide cpu file before 5.13).
type Pressure struct {
	Some    PSILine `json:"some"`
	Full    PSILine `json:"full"`
	HasFull bool    `json:"hasFull"`
}

// ReadPressure reads <procRoot>/pressure/<resource> (resource: cpu, memory,
// io, irq).
func ReadPressure(procRoot, resource string) (Pressure, error) {
	return readFile(procRoot+"/pressure/"+resource, "4.20 with CONFIG_PSI and without psi=0", ParsePressure)
}

// ParsePressure parses the PSI format, shared by /proc/pressure/* and cgroup
// v2's *.pressure files:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func ParsePressure(r io.Reader) (Pressure, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Pressure{}, err
	}
	var p Pressure
	haveSome := false
	err = lines(b, func(n int, l []byte) error {
		f := bytes.Fields(l)
		if len(f) == 0 {
			return nil
		}
		var dst *PSILine
		switch string(f[0]) {
		case "some":
			dst, haveSome = &p.Some, true
		case "full":
			dst, p.HasFull = &p.Full, true
		default:
			return &ParseError{Line: n, Token: string(f[0]), Err: errFormat}
		}
		seen := 0
		for _, kv := range f[1:] {
			eq := bytes.IndexByte(kv, '=')
			if eq <= 0 {
				return &ParseError{Line: n, Token: string(kv), Err: errFormat}
			}
			k, v := string(kv[:eq]), kv[eq+1:]
			var err error
			switch k {
			case "avg10":
				dst.Avg10, err = parsePercent(v)
			case "avg60":
				dst.Avg60, err = parsePercent(v)
			case "avg300":
				dst.Avg300, err = parsePercent(v)
			case "total":
				dst.TotalUs, err = parseUint(v)
			default:
				continue // a future key: keep parsing the ones we know
			}
			if err != nil {
				return &ParseError{Line: n, Token: string(kv), Err: err}
			}
			seen++
		}
		if seen != 4 {
			return &ParseError{Line: n, Token: string(l), Err: errMissing}
		}
		return nil
	})
	if err != nil {
		return Pressure{}, err
	}
	if !haveSome {
		return Pressure{}, &ParseError{Line: 1, Token: "some", Err: errMissing}
	}
	return p, nil
}

func parsePercent(b []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || v < 0 || v != v {
		return 0, errNotNumber
	}
	return v, nil
}

// psiSince is the kernel that added PSI, which a kernel can also turn off
// at boot.
const psiSince = "4.20 with CONFIG_PSI and without psi=0"

// OpenPressureTrigger writes the trigger "some <stall µs> <window µs>" to
// the pressure file at path (/proc/pressure/memory, or a cgroup v2
// cgroup's memory.pressure) and returns its open descriptor: the trigger
// lives as long as it stays open, and the kernel wakes poll(POLLPRI) on it
// whenever tasks stalled on memory for stall within a window. The caller
// validates stall and window (the kernel refuses a window that is not a
// multiple of 2 s from a writer without CAP_SYS_RESOURCE: EINVAL) and
// closes the descriptor. A missing file is a *NotSupportedError (no PSI);
// anything else an *fs.PathError with the errno.
func OpenPressureTrigger(path string, stall, window time.Duration) (int, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.ENOENT {
		return -1, &NotSupportedError{Path: path, MinKernel: psiSince}
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// The kernel wants the trigger with its terminating NUL.
	spec := strconv.AppendInt(append(strconv.AppendInt([]byte("some "), stall.Microseconds(), 10), ' '), window.Microseconds(), 10)
	spec = append(spec, 0)
	for {
		_, err = unix.Write(fd, spec)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("trigger %q: %w", spec[:len(spec)-1], err)}
	}
	return fd, nil
}
