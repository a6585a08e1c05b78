package cgroup

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"sort"

	"golang.org/x/sys/unix"
)

// Children lists the names of the child cgroups of dir (its
// subdirectories). It is a directory listing, not a kernel-file read; it
// lives here so that everything opening files under a cgroup mount is in
// this package. A cgroup directory holds
// dozens of control files beside its few children: reading the entries raw
// (getdents64) and keeping only directories saves os.ReadDir's allocation
// and sorting of every file entry, a tenth of an eviction-only Summary.
// Sorted, as os.ReadDir's. A missing dir is an *fs.PathError
// (fs.ErrNotExist).
func Children(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var out []string
	var buf [8192]byte
	for {
		n, err := unix.Getdents(fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			sort.Strings(out)
			return out, nil
		}
		// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name\0
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if typ == unix.DT_UNKNOWN { // a filesystem without d_type (fixtures): ask
				var st unix.Stat_t
				if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					typ = unix.DT_DIR
				}
			}
			if typ == unix.DT_DIR && string(name) != "." && string(name) != ".." {
				out = append(out, string(name))
			}
			off += reclen
		}
	}
}
