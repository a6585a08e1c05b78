package cgroup

import (
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// WriteFile writes value to dir/name in one write(2), as the kernel expects
// of a cgroup control file. Errors are typed as ReadFile's: a missing file in
// an existing dir is a *NotSupportedError naming minKernel, a vanished
// cgroup a *VanishedError; anything else (EACCES, EINVAL: a value the kernel
// refuses) an *fs.PathError with the errno.
func WriteFile(dir, name, minKernel, value string) error {
	path := dir + "/" + name
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return classifyOpenError(dir, path, minKernel, err)
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return nil
	case err == unix.ENODEV || err == unix.ENOENT:
		return &VanishedError{Dir: dir, Err: &fs.PathError{Op: "write", Path: path, Err: err}}
	}
	return &fs.PathError{Op: "write", Path: path, Err: err}
}

// FormatLimit renders a limit as a v2 file holds it: "max" for Max, else
// the decimal number.
func FormatLimit(v uint64) string {
	if v == Max {
		return "max"
	}
	return strconv.FormatUint(v, 10)
}
