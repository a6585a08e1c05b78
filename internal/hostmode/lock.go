package hostmode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/safetext"
)

// ErrOtherInstance: another evictd manages the same workloads.
var ErrOtherInstance = errors.New("another evictd manages these workloads")

// rootLock keeps other agents off a workload root while this one runs: an
// exclusive flock(2) on the root's directory and shared ones on each of its
// ancestors up to the hierarchy root. Two agents on one root, or on a root
// and a cgroup below or above it, conflict; agents on sibling roots do not.
// The kernel drops the locks when the process dies, so a crash leaves
// nothing stale behind.
type rootLock struct{ fds []int }

// lockWorkloadRoot takes the locks for root (absolute) inside the hierarchy
// mounted at memRoot. When another process holds a conflicting lock the
// error names it, with its PID from /proc/locks.
func lockWorkloadRoot(memRoot, root string) (*rootLock, error) {
	l := &rootLock{}
	dirs := []string{root}
	for d := root; d != memRoot && d != "/" && d != "."; {
		d = filepath.Dir(d)
		dirs = append(dirs, d)
	}
	for i, d := range dirs {
		how := unix.LOCK_SH
		if i == 0 {
			how = unix.LOCK_EX
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			l.release()
			return nil, fmt.Errorf("locking the workload root: %w", &os.PathError{Op: "open", Path: d, Err: err})
		}
		if err := unix.Flock(fd, how|unix.LOCK_NB); err != nil {
			holder := lockHolder(fd)
			unix.Close(fd)
			l.release()
			if err == unix.EWOULDBLOCK {
				return nil, fmt.Errorf("%w: %s holds a lock on %s; two agents would evict the same workloads (stop it, or give each agent its own --workload-root)", ErrOtherInstance, holder, d)
			}
			return nil, fmt.Errorf("locking the workload root: flock %s: %w", d, err)
		}
		l.fds = append(l.fds, fd)
	}
	return l, nil
}

// release drops the locks.
func (l *rootLock) release() {
	if l == nil {
		return
	}
	for _, fd := range l.fds {
		unix.Close(fd)
	}
	l.fds = nil
}

// lockHolder names the process holding a flock on fd's file, from
// /proc/locks, with its command line.
func lockHolder(fd int) string {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return "another process"
	}
	pid, found, err := host.ReadFlockHolder("/proc", host.FileID(unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino))
	if err != nil || !found {
		return "another process"
	}
	name := "pid " + strconv.Itoa(pid)
	if cmd, err := host.ReadCmdline("/proc", pid); err == nil && cmd != "" {
		name += " (" + safetext.Escape(cmd) + ")"
	}
	return name
}
