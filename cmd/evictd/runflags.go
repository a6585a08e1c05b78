package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/notify"
)

// minInterval bounds --interval from below: a synchronize reads the stats of
// every workload, and at --interval 1ns the loop did nothing else (110 % of
// a CPU). The kubelet's period is 10 s; wake-ups, not the timer, make
// evictd fast.
const minInterval = 100 * time.Millisecond

// checkWorkloadRoot refuses a --workload-root that leaves the memory cgroup
// hierarchy ("../.."), and "/" — every top-level cgroup of the host, system
// services included, as evictable workloads — unless the run is a dry run or
// allowRoot (--allow-root-cgroup) says it is meant.
func checkWorkloadRoot(root string, dryRun, allowRoot bool) error {
	for _, el := range strings.Split(root, "/") {
		if el == ".." {
			return fmt.Errorf("--workload-root %q: must be a cgroup inside the memory hierarchy (relative to its root, e.g. /workloads), without \"..\"", root)
		}
	}
	if strings.Trim(filepath.Clean("/"+root), "/") == "" && !dryRun && !allowRoot {
		return fmt.Errorf("--workload-root %q: the hierarchy root makes every top-level cgroup of this host (system services too) an evictable workload; use a dedicated cgroup such as /workloads, or say it is meant with --allow-root-cgroup (or try it with --dry-run)", root)
	}
	return nil
}

// checkOutputFile checks that path can be written as a file: it is not a
// directory, and its directory exists (or can be created, as the state
// file's is) on a writable file system. flagName names the flag in errors.
func checkOutputFile(flagName, path string, mayCreateDir bool) error {
	if path == "" || path == "-" {
		return nil
	}
	if err := agent.CheckOutputPath(path); err != nil {
		return fmt.Errorf("%s %w", flagName, err) // a link, a FIFO, a device: never written through
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s %s: is a directory, want a file", flagName, path)
		}
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("%s %s: not writable: %w", flagName, path, err)
		}
		return nil
	} else if !missing(err) {
		return fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	dir := filepath.Dir(path)
	for {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s %s: %s is not a directory", flagName, path, dir)
			}
			if err := unix.Access(dir, unix.W_OK); err != nil {
				return fmt.Errorf("%s %s: cannot create files in %s: %w", flagName, path, dir, err)
			}
			return nil
		}
		if !missing(err) {
			return fmt.Errorf("%s %s: %w", flagName, path, err)
		}
		if !mayCreateDir {
			return fmt.Errorf("%s %s: directory %s does not exist", flagName, path, dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("%s %s: no existing directory above it", flagName, path)
		}
		dir = parent
	}
}

// missing reports a path that does not exist, or that runs through a file
// (the file is then reported as "not a directory" by the walk up).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

// checkMetricsAddr checks --metrics-addr (or flag): host:port with a port,
// and, when listen is set (--check), that it can be listened on now.
func checkMetricsAddr(addr string, listen bool) error {
	return checkListenAddr("--metrics-addr", addr, listen)
}

func checkListenAddr(flag, addr string, listen bool) error {
	if addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:9847", flag, addr)
	}
	if !listen {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	return ln.Close()
}

// wakeupFlags are run's kernel wake-up flags, the same in both modes.
type wakeupFlags struct {
	memcg, psi, events, fastPoll, rt      *string
	psiStall, psiWindow, fastMin, fastMax *time.Duration
	refresh                               *time.Duration
}

func registerWakeupFlags(fs *pflag.FlagSet) *wakeupFlags {
	return &wakeupFlags{
		memcg:     fs.String("memcg-notification", "auto", "cgroup v1 memcg threshold eventfd: auto (on with cgroup v1), on, off"),
		psi:       fs.String("psi", "auto", "PSI memory triggers: auto (on with cgroup v2), on, off"),
		events:    fs.String("memory-events", "auto", "watch memory.events of the workload root (cgroup v2): auto, on, off"),
		fastPoll:  fs.String("fast-poll", "auto", "adaptive fast poll of the workload root's memory: auto (on with cgroup v2), on, off"),
		rt:        fs.String("realtime-wakeups", "auto", "run the threads that see a crossing and stop the victim's growth at SCHED_FIFO priority 1, so that they never wait for a CPU behind the allocator: auto (where the kernel allows it: CAP_SYS_NICE), on (fail to start without it), off"),
		psiStall:  fs.Duration("psi-stall", notify.DefaultPSIStall, "PSI trigger: stall time within the window"),
		psiWindow: fs.Duration("psi-window", notify.DefaultPSIWindow, "PSI trigger: window (a multiple of 2s, up to 10s)"),
		fastMin:   fs.Duration("fast-poll-min", notify.DefaultFastPollMin, "fast poll: shortest interval (near a threshold)"),
		fastMax:   fs.Duration("fast-poll-max", notify.DefaultFastPollMax, "fast poll: longest interval (far from any threshold)"),
		refresh:   fs.Duration("notifier-refresh", notify.DefaultRefreshInterval, "rebuild the memcg threshold registration at most this often (the kubelet's 10s); one that fired early with the threshold not met is rebuilt at once"),
	}
}

// options checks the flags and returns the wake-ups they ask for, for
// either mode.
func (f *wakeupFlags) options() (agent.WakeupOptions, error) {
	o := agent.WakeupOptions{PSIStall: *f.psiStall, PSIWindow: *f.psiWindow, FastPollMin: *f.fastMin, FastPollMax: *f.fastMax, NotifierRefresh: *f.refresh}
	for _, t := range []struct {
		flag string
		v    *string
		to   *agent.Tri
	}{{"--memcg-notification", f.memcg, &o.MemcgNotification}, {"--psi", f.psi, &o.PSI}, {"--memory-events", f.events, &o.MemoryEvents}, {"--fast-poll", f.fastPoll, &o.FastPoll}, {"--realtime-wakeups", f.rt, &o.Realtime}} {
		v, err := agent.ParseTri(*t.v)
		if err != nil {
			return o, fmt.Errorf("%s %w", t.flag, err)
		}
		*t.to = v
	}
	if o.PSI != agent.Off {
		if err := notify.ValidatePSI(o.PSIStall, o.PSIWindow); err != nil {
			return o, fmt.Errorf("--psi-stall/--psi-window: %w", err)
		}
	}
	if o.FastPollMin <= 0 || o.FastPollMax < o.FastPollMin {
		return o, fmt.Errorf("--fast-poll-min %s / --fast-poll-max %s: want 0 < min <= max", o.FastPollMin, o.FastPollMax)
	}
	if o.NotifierRefresh < 0 || o.PSIStall < 0 {
		return o, fmt.Errorf("--notifier-refresh %s / --psi-stall %s: want positive durations", o.NotifierRefresh, o.PSIStall)
	}
	return o, nil
}
