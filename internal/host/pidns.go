package host

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// initPIDNamespaceIno is the inode number of the initial (host's) PID
// namespace: PROC_PID_INIT_INO, fixed by the kernel
// (include/linux/proc_ns.h).
const initPIDNamespaceIno = 0xEFFFFFFC

// InInitPIDNamespace reports whether this process runs in the host's PID
// namespace, from <procRoot>/self/ns/pid. In another one, the cgroup.procs
// files of cgroups whose processes live elsewhere (other containers') read
// empty: the kernel lists only the PIDs the reader's namespace can name.
func InInitPIDNamespace(procRoot string) (bool, error) {
	var st unix.Stat_t
	path := filepath.Join(procRoot, "self", "ns", "pid")
	if err := unix.Stat(path, &st); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return st.Ino == initPIDNamespaceIno, nil
}
