package host

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// FileID names a file as /proc/locks does: "MAJ:MIN:INODE", the device's
// major and minor numbers in two-digit hex and the inode in decimal.
func FileID(major, minor uint32, ino uint64) string {
	return fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
}

// ReadFlockHolder reads <procRoot>/locks and returns the PID of a process
// holding a flock(2) on the file file (a FileID), and whether one was found.
// Waiters (lines with "->") are not holders.
func ReadFlockHolder(procRoot, file string) (int, bool, error) {
	type holder struct {
		pid   int
		found bool
	}
	h, err := readFile(procRoot+"/locks", "", func(r io.Reader) (holder, error) {
		pid, ok, err := parseFlockHolder(r, file)
		return holder{pid, ok}, err
	})
	return h.pid, h.found, err
}

// parseFlockHolder finds the first FLOCK line on file in /proc/locks:
//
//	1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF
//	1: -> FLOCK  ADVISORY  WRITE 1240 00:2a:5678 0 EOF   (a waiter)
func parseFlockHolder(r io.Reader, file string) (int, bool, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, false, err
	}
	var pid int
	found := false
	err = lines(b, func(n int, l []byte) error {
		f := bytes.Fields(l)
		if found || len(f) < 6 || string(f[1]) != "FLOCK" || string(f[5]) != file {
			return nil
		}
		v, err := parseUint(f[4])
		if err != nil || v == 0 || v > 1<<22 {
			return &ParseError{Line: n, Token: string(f[4]), Err: errFormat}
		}
		pid, found = int(v), true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return pid, found, nil
}

// ReadCmdline reads <procRoot>/<pid>/cmdline: the process's arguments,
// joined by spaces (the kernel separates them with NULs).
func ReadCmdline(procRoot string, pid int) (string, error) {
	return readFile(procRoot+"/"+strconv.Itoa(pid)+"/cmdline", "", parseCmdline)
}

func parseCmdline(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))), nil
}
