package cgroup

import "golang.org/x/sys/unix"

// DirInode is the inode number of the directory at path, 0 when it cannot
// be read (removed). A cgroup removed and created again at the same path
// has another inode, and the kernel sends no event to the watches and
// notifiers set up on the old one: comparing inodes is how their owners
// tell that they must set them up again.
func DirInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}
