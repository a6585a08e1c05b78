package host

import (
	"bytes"
	"io"
)

// oomKillSince is the kernel that added /proc/vmstat's oom_kill.
const oomKillSince = "4.13"

// ReadVMStatOOMKill reads the oom_kill line of <procRoot>/vmstat: how many
// processes the kernel OOM killer has killed since boot, node-wide and for
// any reason (a cgroup's limit or the whole machine). One read tells
// whether any OOM kill happened since the last one.
func ReadVMStatOOMKill(procRoot string) (uint64, error) {
	return readFile(procRoot+"/vmstat", oomKillSince, parseVMStatOOMKill)
}

func parseVMStatOOMKill(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	var v uint64
	found := false
	err = lines(b, func(n int, l []byte) error {
		k, val, ok := bytes.Cut(l, []byte{' '})
		if !ok || string(k) != "oom_kill" {
			return nil
		}
		if found {
			return &ParseError{Line: n, Token: string(l), Err: errFormat}
		}
		x, err := parseUint(bytes.TrimSpace(val))
		if err != nil {
			return &ParseError{Line: n, Token: string(val), Err: err}
		}
		v, found = x, true
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, &NotSupportedError{Path: "vmstat oom_kill", MinKernel: oomKillSince}
	}
	return v, nil
}
