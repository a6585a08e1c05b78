package host

import (
	"bytes"
	"io"
	"math"
	"os"
	"strconv"
)

// Loadavg is /proc/loadavg: "0.16 0.18 0.09 2/98 7230".
type Loadavg struct {
	Load1, Load5, Load15 float64
	Runnable             uint64 // scheduling entities currently runnable
	Tasks                uint64 // all tasks (threads) on the host: the kubelet's rlimit.curproc
	LastPID              uint64
}

// ReadLoadavg reads <procRoot>/loadavg.
func ReadLoadavg(procRoot string) (Loadavg, error) {
	return readFile(procRoot+"/loadavg", "", parseLoadavg)
}

func parseLoadavg(r io.Reader) (Loadavg, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Loadavg{}, err
	}
	f := bytes.Fields(b)
	if len(f) != 5 {
		return Loadavg{}, &ParseError{Line: 1, Token: string(bytes.TrimSpace(b)), Err: errFormat}
	}
	var l Loadavg
	for i, dst := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		if *dst, err = parsePercent(f[i]); err != nil {
			return Loadavg{}, &ParseError{Line: 1, Token: string(f[i]), Err: err}
		}
	}
	slash := bytes.IndexByte(f[3], '/')
	if slash <= 0 {
		return Loadavg{}, &ParseError{Line: 1, Token: string(f[3]), Err: errFormat}
	}
	if l.Runnable, err = parseUint(f[3][:slash]); err != nil {
		return Loadavg{}, &ParseError{Line: 1, Token: string(f[3]), Err: err}
	}
	if l.Tasks, err = parseUint(f[3][slash+1:]); err != nil {
		return Loadavg{}, &ParseError{Line: 1, Token: string(f[3]), Err: err}
	}
	if l.LastPID, err = parseUint(f[4]); err != nil {
		return Loadavg{}, &ParseError{Line: 1, Token: string(f[4]), Err: err}
	}
	return l, nil
}

// ReadPidMax reads <procRoot>/sys/kernel/pid_max.
func ReadPidMax(procRoot string) (uint64, error) {
	return readFile(procRoot+"/sys/kernel/pid_max", "", parseSingleUint)
}

// ReadThreadsMax reads <procRoot>/sys/kernel/threads-max.
func ReadThreadsMax(procRoot string) (uint64, error) {
	return readFile(procRoot+"/sys/kernel/threads-max", "", parseSingleUint)
}

// MaxPID is the kubelet's rlimit.maxpid (pkg/kubelet/stats/pidlimit):
// min(pid_max, threads-max).
func MaxPID(procRoot string) (uint64, error) {
	pm, err := ReadPidMax(procRoot)
	if err != nil {
		return 0, err
	}
	tm, err := ReadThreadsMax(procRoot)
	if err != nil {
		return 0, err
	}
	return min(pm, tm), nil
}

func parseSingleUint(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	t := bytes.TrimSpace(b)
	v, err := parseUint(t)
	if err != nil {
		return 0, &ParseError{Line: 1, Token: string(t), Err: err}
	}
	return v, nil
}

// ReadUptime reads the first field of <procRoot>/uptime: seconds since boot.
func ReadUptime(procRoot string) (float64, error) {
	return readFile(procRoot+"/uptime", "", parseUptime)
}

func parseUptime(r io.Reader) (float64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, &ParseError{Line: 1, Err: errMissing}
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, &ParseError{Line: 1, Token: string(f[0]), Err: errNotNumber}
	}
	return v, nil
}

// ReadTaskIDs lists the thread IDs of process pid ("self" for this one):
// the entries of <procRoot>/<pid>/task.
func ReadTaskIDs(procRoot, pid string) ([]int, error) {
	ents, err := os.ReadDir(procRoot + "/" + pid + "/task")
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}
