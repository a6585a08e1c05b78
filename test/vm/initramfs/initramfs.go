// Package initramfs writes the Linux initramfs format: a "newc" cpio archive
// (see the kernel's Documentation/driver-api/early-userspace/buffer-format.rst),
// optionally gzip-compressed. The VM harness uses it to hand the guest kernel
// a static /init, the test binary and the package's testdata in one file.
//
// Only what an initramfs needs is supported: directories, regular files,
// symbolic links and character devices. Parent directories are created
// implicitly, once, so callers may add files in any order.
package initramfs

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// newcMagic starts every header of the "newc" (SVR4, no CRC) cpio format.
const newcMagic = "070701"

// trailerName marks the end of the archive.
const trailerName = "TRAILER!!!"

// Writer writes one archive. Close must be called to write the trailer.
type Writer struct {
	w      *bufio.Writer
	offset int64
	ino    uint32
	seen   map[string]bool
	err    error
}

// NewWriter returns a Writer that writes an uncompressed newc archive to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 1<<20), ino: 1, seen: map[string]bool{}}
}

// clean turns "/a/b/" or "a/b" into the archive's form "a/b".
func clean(name string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+name), "/")
	if c == "" {
		return "", fmt.Errorf("initramfs: empty or root path %q", name)
	}
	return c, nil
}

// Dir adds a directory (and its parents) with the given permission bits.
func (w *Writer) Dir(name string, perm fs.FileMode) error {
	c, err := clean(name)
	if err != nil {
		return err
	}
	if w.seen[c] {
		return nil
	}
	if err := w.parents(c); err != nil {
		return err
	}
	w.seen[c] = true
	return w.entry(c, uint32(perm.Perm())|0o040000, 0, 0, nil, 0)
}

// File adds a regular file whose content is data.
func (w *Writer) File(name string, perm fs.FileMode, data []byte) error {
	c, err := w.prepare(name)
	if err != nil {
		return err
	}
	return w.entry(c, uint32(perm.Perm())|0o100000, 0, 0, strings.NewReader(string(data)), int64(len(data)))
}

// CopyFile adds the regular file at src under name, keeping its permissions.
func (w *Writer) CopyFile(name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs: %s is not a regular file", src)
	}
	c, err := w.prepare(name)
	if err != nil {
		return err
	}
	return w.entry(c, uint32(st.Mode().Perm())|0o100000, 0, 0, f, st.Size())
}

// Symlink adds a symbolic link name pointing to target.
func (w *Writer) Symlink(name, target string) error {
	c, err := w.prepare(name)
	if err != nil {
		return err
	}
	return w.entry(c, 0o120777, 0, 0, strings.NewReader(target), int64(len(target)))
}

// CharDev adds a character device node, e.g. /dev/console (5, 1), which the
// kernel opens for /init's standard streams before any devtmpfs is mounted.
func (w *Writer) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	c, err := w.prepare(name)
	if err != nil {
		return err
	}
	return w.entry(c, uint32(perm.Perm())|0o020000, major, minor, nil, 0)
}

// Tree adds the directory tree at src under the archive path name: its
// directories, regular files and symbolic links (other kinds are skipped).
func (w *Writer) Tree(name, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := path.Join(name, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			return w.Dir(dst, info.Mode())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			return w.Symlink(dst, target)
		case d.Type().IsRegular():
			return w.CopyFile(dst, p)
		}
		return nil
	})
}

// Close writes the trailer and flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	if err := w.entry(trailerName, 0, 0, 0, nil, 0); err != nil {
		return err
	}
	return w.w.Flush()
}

// prepare cleans name, refuses duplicates and creates its parents.
func (w *Writer) prepare(name string) (string, error) {
	c, err := clean(name)
	if err != nil {
		return "", err
	}
	if w.seen[c] {
		return "", fmt.Errorf("initramfs: %s added twice", c)
	}
	if err := w.parents(c); err != nil {
		return "", err
	}
	w.seen[c] = true
	return c, nil
}

func (w *Writer) parents(c string) error {
	if dir := path.Dir(c); dir != "." {
		return w.Dir(dir, 0o755)
	}
	return nil
}

// entry writes one header, the name, the data and the padding to 4 bytes.
func (w *Writer) entry(name string, mode, rmajor, rminor uint32, data io.Reader, size int64) error {
	if w.err != nil {
		return w.err
	}
	if size > 0xffffffff {
		return fmt.Errorf("initramfs: %s is %d bytes, newc holds at most 4 GiB", name, size)
	}
	ino := w.ino
	w.ino++
	nlink := uint32(1)
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	if name == trailerName {
		ino, nlink = 0, 1
	}
	// 13 eight-digit hex fields after the magic: ino mode uid gid nlink mtime
	// filesize devmajor devminor rdevmajor rdevminor namesize check.
	hdr := fmt.Sprintf("%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		newcMagic, ino, mode, 0, 0, nlink, 0, uint32(size), 0, 0, rmajor, rminor, len(name)+1, 0)
	w.write([]byte(hdr))
	w.write([]byte(name))
	w.write([]byte{0})
	w.pad()
	if data != nil && size > 0 {
		n, err := io.CopyN(w.w, data, size)
		w.offset += n
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("initramfs: writing %s: %w", name, err)
		}
		w.pad()
	}
	return w.err
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(b)
	w.offset += int64(n)
	if err != nil {
		w.err = fmt.Errorf("initramfs: %w", err)
	}
}

func (w *Writer) pad() {
	if r := w.offset % 4; r != 0 {
		w.write(make([]byte, 4-r))
	}
}
