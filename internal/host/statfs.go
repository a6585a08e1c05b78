package host

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FsUsage is statfs(2) of a path in the units the kubelet reports (as
// cAdvisor computes them): bytes and inodes.
type FsUsage struct {
	CapacityBytes  uint64 // f_blocks × f_frsize
	AvailableBytes uint64 // f_bavail × f_frsize: what an unprivileged writer can use
	UsedBytes      uint64 // (f_blocks − f_bfree) × f_frsize
	Inodes         uint64 // f_files
	InodesFree     uint64 // f_ffree
	InodesUsed     uint64 // f_files − f_ffree
	Device         uint64 // st_dev of the path, to tell filesystems apart
}

// Statfs reads the usage of the filesystem holding path.
func Statfs(path string) (FsUsage, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return FsUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FsUsage{}, fmt.Errorf("stat %s: %w", path, err)
	}
	bs := uint64(s.Frsize)
	if bs == 0 {
		bs = uint64(s.Bsize)
	}
	u := FsUsage{
		CapacityBytes:  s.Blocks * bs,
		AvailableBytes: s.Bavail * bs,
		Inodes:         s.Files,
		InodesFree:     s.Ffree,
		Device:         st.Dev,
	}
	if s.Blocks >= s.Bfree {
		u.UsedBytes = (s.Blocks - s.Bfree) * bs
	}
	if s.Files >= s.Ffree {
		u.InodesUsed = s.Files - s.Ffree
	}
	return u, nil
}
