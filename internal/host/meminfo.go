package host

import (
	"bytes"
	"io"
)

// Meminfo is /proc/meminfo with values in BYTES (the file says kB, meaning
// KiB). The fields are those evictd uses; Entries keeps every line.
type Meminfo struct {
	MemTotal, MemFree, MemAvailable, Buffers, Cached uint64
	SwapTotal, SwapFree                              uint64
	// HasMemAvailable: the file has MemAvailable (kernel 3.14+).
	HasMemAvailable bool
	Entries         []MeminfoEntry
}

// MeminfoEntry is one line; Bytes is the value ×1024 when the line had a
// "kB" unit, else the raw count (HugePages_Total and friends).
type MeminfoEntry struct {
	Key   string
	Bytes uint64
}

// ReadMeminfo reads <procRoot>/meminfo.
func ReadMeminfo(procRoot string) (Meminfo, error) {
	return readFile(procRoot+"/meminfo", "", parseMeminfo)
}

// ReadMeminfoFile reads a copy of /proc/meminfo saved at path (cat
// /proc/meminfo > file on a node), for explaining that node's decision.
func ReadMeminfoFile(path string) (Meminfo, error) {
	return readFile(path, "", parseMeminfo)
}

func parseMeminfo(r io.Reader) (Meminfo, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Meminfo{}, err
	}
	var m Meminfo
	m.Entries = make([]MeminfoEntry, 0, 64)
	haveTotal := false
	err = lines(b, func(n int, l []byte) error {
		if len(bytes.TrimSpace(l)) == 0 {
			return nil
		}
		c := bytes.IndexByte(l, ':')
		if c <= 0 {
			return &ParseError{Line: n, Token: string(l), Err: errFormat}
		}
		key := string(l[:c])
		f := bytes.Fields(l[c+1:])
		if len(f) == 0 || len(f) > 2 {
			return &ParseError{Line: n, Token: string(l[c+1:]), Err: errFormat}
		}
		v, err := parseUint(f[0])
		if err != nil {
			return &ParseError{Line: n, Token: string(f[0]), Err: err}
		}
		if len(f) == 2 {
			if string(f[1]) != "kB" {
				return &ParseError{Line: n, Token: string(f[1]), Err: errFormat}
			}
			if v > (^uint64(0))>>10 {
				return &ParseError{Line: n, Token: string(f[0]), Err: errNotNumber}
			}
			v *= 1024
		}
		m.Entries = append(m.Entries, MeminfoEntry{Key: key, Bytes: v})
		switch key {
		case "MemTotal":
			m.MemTotal, haveTotal = v, true
		case "MemFree":
			m.MemFree = v
		case "MemAvailable":
			m.MemAvailable, m.HasMemAvailable = v, true
		case "Buffers":
			m.Buffers = v
		case "Cached":
			m.Cached = v
		case "SwapTotal":
			m.SwapTotal = v
		case "SwapFree":
			m.SwapFree = v
		}
		return nil
	})
	if err != nil {
		return Meminfo{}, err
	}
	if !haveTotal {
		return Meminfo{}, &ParseError{Line: 1, Token: "MemTotal", Err: errMissing}
	}
	return m, nil
}
