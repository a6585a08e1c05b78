package host

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Mapping is one mapping (VMA) of /proc/<pid>/smaps, with the fields evictd
// reads.
type Mapping struct {
	Start, End uint64 // the address range [Start, End)
	Perms      string // "r-xp": read, write, execute, then p(rivate) or s(hared)
	Path       string // the mapped file, "[heap]", "[stack]", or "" for anonymous memory
	Rss        uint64 // bytes of it resident (mapped in this process's page tables)
	// Anonymous is the bytes of it that are anonymous: in a private file
	// mapping, the copies of pages the process has written.
	Anonymous uint64
}

// ReadSmaps reads <procRoot>/<pid>/smaps (pid "self" for this process).
func ReadSmaps(procRoot, pid string) ([]Mapping, error) {
	return readFile(procRoot+"/"+pid+"/smaps", "", parseSmaps)
}

// parseSmaps parses smaps: a header line per mapping
// ("00400000-00df5000 r-xp 00000000 fe:00 1234   /usr/bin/evictd"), then
// its "Key:   N kB" lines. Keys it does not use are skipped, so a kernel
// that adds one changes nothing.
func parseSmaps(r io.Reader) ([]Mapping, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var maps []Mapping
	err = lines(b, func(n int, l []byte) error {
		colon, dash := bytes.IndexByte(l, ':'), bytes.IndexByte(l, '-')
		// A header starts with its address range; a field line with its
		// key, which has no '-' before its ':' ("VmFlags: rd ex mr").
		if dash > 0 && (colon < 0 || dash < colon) {
			m, err := parseSmapsHeader(l)
			if err != nil {
				return &ParseError{Line: n, Token: string(l), Err: err}
			}
			maps = append(maps, m)
			return nil
		}
		if colon <= 0 || len(maps) == 0 {
			return &ParseError{Line: n, Token: string(l), Err: errFormat}
		}
		m := &maps[len(maps)-1]
		var dst *uint64
		switch string(l[:colon]) {
		case "Rss":
			dst = &m.Rss
		case "Anonymous":
			dst = &m.Anonymous
		default:
			return nil
		}
		f := bytes.Fields(l[colon+1:])
		if len(f) != 2 || string(f[1]) != "kB" {
			return &ParseError{Line: n, Token: string(l), Err: errFormat}
		}
		kb, err := parseUint(f[0])
		if err != nil || kb > 1<<54 { // bytes in a uint64
			return &ParseError{Line: n, Token: string(f[0]), Err: errNotNumber}
		}
		*dst = kb << 10
		return nil
	})
	if err != nil {
		return nil, err
	}
	return maps, nil
}

// parseSmapsHeader parses "start-end perms offset dev inode [path]"; the
// path may hold spaces, so it is the rest of the line after the fifth field.
func parseSmapsHeader(l []byte) (Mapping, error) {
	var m Mapping
	var f [5][]byte
	rest := l
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
	}
	start, end, ok := bytes.Cut(f[0], []byte{'-'})
	if !ok || !validPerms(f[1]) || len(f[4]) == 0 {
		return m, errFormat
	}
	var err error
	if m.Start, err = strconv.ParseUint(string(start), 16, 64); err != nil {
		return m, errFormat
	}
	if m.End, err = strconv.ParseUint(string(end), 16, 64); err != nil || m.End < m.Start {
		return m, errFormat
	}
	m.Perms = string(f[1])
	m.Path = string(bytes.TrimLeft(rest, " "))
	return m, nil
}

// validPerms: "r-xp", one of r or -, of w or -, of x or -, then p or s.
func validPerms(p []byte) bool {
	return len(p) == 4 && (p[0] == 'r' || p[0] == '-') && (p[1] == 'w' || p[1] == '-') &&
		(p[2] == 'x' || p[2] == '-') && (p[3] == 'p' || p[3] == 's')
}

// ReleaseExecutablePages drops this process's page-table entries for the
// pages of its own executable that it maps read-only and has not written:
// its code and read-only data. The pages stay in the page cache where they
// were; a page the program runs again is mapped back by a minor fault, as
// reclaim would leave it to do.
//
// Why: start-up maps far more of the binary than the agent then runs. Each
// package's initialization touches its own part of the text, and the kernel
// maps the whole 64 KiB around every file page fault (fault-around) from
// the page cache, where a freshly pulled or installed binary is whole: an
// idle agent had 15–17 MiB of its 20 MB of code and read-only data mapped,
// most of its RSS, though it runs a small part of it. Releasing them after
// the first synchronize leaves what the agent runs from then on. It does
// not change what the page cache holds or to whom it is charged.
//
// Only a private mapping of the executable with no write permission and no
// anonymous pages is released: MADV_DONTNEED on a private page the process
// has written would throw the written copy away. It returns the bytes that
// were resident in the mappings it released.
func ReleaseExecutablePages(procRoot string) (uint64, error) {
	exe, err := os.Readlink(procRoot + "/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := ReadSmaps(procRoot, "self")
	if err != nil {
		return 0, err
	}
	var released uint64
	for _, m := range releasable(maps, exe) {
		// The raw call: unix.Madvise takes a []byte, which an address
		// read from smaps can only become through a uintptr conversion
		// that vet rightly refuses.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise(MADV_DONTNEED) %x-%x %s %s: %w", m.Start, m.End, m.Perms, m.Path, errno)
		}
		released += m.Rss
	}
	return released, nil
}

// releasable picks the mappings ReleaseExecutablePages releases: exe's
// private, unwritable ones that hold no anonymous page and have pages
// resident.
func releasable(maps []Mapping, exe string) []Mapping {
	var out []Mapping
	for _, m := range maps {
		if m.Path == exe && m.Perms[1] == '-' && m.Perms[3] == 'p' && m.Anonymous == 0 && m.Rss > 0 {
			out = append(out, m)
		}
	}
	return out
}
