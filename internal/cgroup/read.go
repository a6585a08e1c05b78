package cgroup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Content is the text of one kernel file, read in one go. It is an io.Reader
// so that parse… functions accept any reader (tests and fuzzers pass
// strings.Reader), while the readers hand parsers the bytes without a copy.
type Content struct {
	b   []byte
	off int
}

// Read implements io.Reader.
func (c *Content) Read(p []byte) (int, error) {
	if c.off >= len(c.b) {
		return 0, io.EOF
	}
	n := copy(p, c.b[c.off:])
	c.off += n
	return n, nil
}

// Bytes returns everything r holds. For a *Content it returns the bytes
// without copying; for any other reader it reads them all.
func Bytes(r io.Reader) ([]byte, error) {
	if c, ok := r.(*Content); ok {
		b := c.b[c.off:]
		c.off = len(c.b)
		return b, nil
	}
	return io.ReadAll(r)
}

// initialBufSize fits every small cgroup file and memory.stat on both
// versions (v1 ≈ 1.1 KiB, v2 ≈ 1.5 KiB on 6.x) in the first read; larger
// files (cgroup.procs of a big cgroup) grow the buffer.
const initialBufSize = 8 << 10

var contentPool = sync.Pool{New: func() any { return &Content{b: make([]byte, 0, initialBufSize)} }}

// ReadFile opens dir/name, reads it whole and hands it to parse. The raw
// syscalls (open, read until EOF, close) avoid os.File's fstat and poller
// registration: the agent polls these files, so every syscall counts.
//
// Errors: if the file is missing but dir exists, a *NotSupportedError naming
// minKernel; if dir itself is gone, or the kernel says ENODEV while reading
// (the cgroup was removed under us), a *VanishedError; a parse failure comes
// back as the parser's *ParseError with Path filled in.
func ReadFile[T any](dir, name, minKernel string, parse func(io.Reader) (T, error)) (T, error) {
	return readFile(-1, dir, name, minKernel, parse)
}

// Dir is an opened cgroup directory. ReadFileAt opens files relative to it
// (openat), so reading several files of one cgroup walks the cgroup's path
// once instead of once per file: measured ≈ 12 % less CPU per file at
// kubepods depth on our v1 hosts, where open dominates a read's cost.
type Dir struct {
	Path string
	fd   int
}

// OpenDir opens the cgroup directory path (O_PATH: no permission check and
// nothing read). A missing directory is a *VanishedError.
func OpenDir(path string) (*Dir, error) {
	for {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOENT || err == unix.ENODEV {
			return nil, &VanishedError{Dir: path, Err: &fs.PathError{Op: "open", Path: path, Err: err}}
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return &Dir{Path: path, fd: fd}, nil
	}
}

// Close closes the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Nlink returns the directory's link count. kernfs counts a directory's
// subdirectories in it: 2 links means a cgroup has no children.
func (d *Dir) Nlink() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: d.Path, Err: err}
	}
	return uint64(st.Nlink), nil
}

// ReadFileAt is ReadFile for a file of an opened directory, with the same
// errors (a cgroup removed since OpenDir is a *VanishedError).
func ReadFileAt[T any](d *Dir, name, minKernel string, parse func(io.Reader) (T, error)) (T, error) {
	return readFile(d.fd, d.Path, name, minKernel, parse)
}

func readFile[T any](dirfd int, dir, name, minKernel string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	path := dir + "/" + name
	c := contentPool.Get().(*Content)
	defer putContent(c)
	if err := readInto(c, dirfd, dir, name, path, minKernel); err != nil {
		return zero, err
	}
	return parseContent(c, path, parse)
}

// ReadFd reads the whole kernel file open at fd from offset 0 (pread: the
// descriptor's offset does not matter) and hands it to parse, with
// ReadFile's errors; path names the file in them. It is for descriptors a
// caller keeps open to be notified through: reading memory.events re-arms
// its POLLPRI, and a v1 memcg threshold is registered on the descriptor of
// memory.usage_in_bytes. ENODEV or ENOENT (the cgroup was removed) is a
// *VanishedError for path's directory.
func ReadFd[T any](fd int, path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	c := contentPool.Get().(*Content)
	defer putContent(c)
	if err := readAll(c, fd, filepath.Dir(path), path, true); err != nil {
		return zero, err
	}
	return parseContent(c, path, parse)
}

// OpenFd opens the kernel file at path read-only for a caller that keeps
// the descriptor: to be notified through it (POLLPRI on memory.events, a
// v1 memcg threshold on memory.usage_in_bytes) or to read it often with
// ReadFd without an open each time (the trial harness's crossing watcher).
// It retries EINTR; an error is an *fs.PathError holding the errno.
func OpenFd(path string) (int, error) {
	fd, err := openRetry(path)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// putContent returns c to the pool, unless it grew huge: a big cgroup.procs
// buffer is not kept alive.
func putContent(c *Content) {
	if cap(c.b) <= 1<<20 {
		c.b, c.off = c.b[:0], 0
		contentPool.Put(c)
	}
}

// parseContent parses c, filling path into a *ParseError (or prefixing any
// other error with it).
func parseContent[T any](c *Content, path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	v, err := parse(c)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Path == "" {
			pe.Path = path
		} else if pe == nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return zero, err
	}
	return v, nil
}

// readInto reads path (dir/name), opened as name relative to dirfd when
// dirfd is ≥ 0.
func readInto(c *Content, dirfd int, dir, name, path, minKernel string) error {
	var fd int
	var err error
	if dirfd >= 0 {
		fd, err = openAtRetry(dirfd, name)
	} else {
		fd, err = openRetry(path)
	}
	if err != nil {
		return classifyOpenError(dir, path, minKernel, err)
	}
	defer unix.Close(fd)
	return readAll(c, fd, dir, path, false)
}

// readAll reads fd until EOF into c: with read(2), or with pread(2) from
// offset 0 when pread is set.
func readAll(c *Content, fd int, dir, path string, pread bool) error {
	c.b, c.off = c.b[:0], 0
	for {
		if len(c.b) == cap(c.b) {
			c.b = append(c.b, 0)[:len(c.b)]
		}
		var n int
		var err error
		if pread {
			n, err = unix.Pread(fd, c.b[len(c.b):cap(c.b)], int64(len(c.b)))
		} else {
			n, err = unix.Read(fd, c.b[len(c.b):cap(c.b)])
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if err == unix.ENODEV || err == unix.ENOENT {
				return &VanishedError{Dir: dir, Err: &fs.PathError{Op: "read", Path: path, Err: err}}
			}
			return &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return nil
		}
		c.b = c.b[:len(c.b)+n]
	}
}

func openAtRetry(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

func openRetry(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

func classifyOpenError(dir, path, minKernel string, err error) error {
	if err == unix.ENOENT || err == unix.ENODEV {
		var st unix.Stat_t
		if serr := unix.Stat(dir, &st); serr != nil {
			return &VanishedError{Dir: dir, Err: &fs.PathError{Op: "open", Path: path, Err: err}}
		}
		return &NotSupportedError{Path: path, MinKernel: minKernel}
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// NewContent returns a Content holding b, for parsers fed from memory
// (benchmarks, fuzzers) that want the same zero-copy path as the readers.
func NewContent(b []byte) *Content { return &Content{b: b} }
