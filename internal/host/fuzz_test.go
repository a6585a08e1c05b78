package host

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// /proc/uptime: what parses is a finite, non-negative number; an error is a
// *ParseError.
func FuzzParseUptime(f *testing.F) {
	f.Add([]byte("350735.47 234388.90\n"))
	f.Add([]byte("NaN 1\n"))
	f.Add([]byte("+Inf 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseUptime(strings.NewReader(string(b)))
		var pe *ParseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("untyped error %T %v", err, err)
		}
		if err == nil && (v < 0 || v != v || math.IsInf(v, 1)) {
			t.Fatalf("uptime %v accepted", v)
		}
	})
}

// Single-number /proc files (pid_max, threads-max): a value that parses
// reads back as itself.
func FuzzParseSingleUint(f *testing.F) {
	f.Add([]byte("4194304\n"))
	f.Add([]byte(" 18446744073709551616 "))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseSingleUint(strings.NewReader(string(b)))
		var pe *ParseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("untyped error %T %v", err, err)
		}
		if err == nil {
			if again, err := parseSingleUint(strings.NewReader(strconv.FormatUint(v, 10))); err != nil || again != v {
				t.Fatalf("%d does not read back: %d %v", v, again, err)
			}
		}
	})
}

// /proc/<pid>/stat: an error is a *ParseError; what parses has a state
// that is a printable byte and round-trips through a minimal line.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (hog) R 1 1234 1234 0 -1 4194560 98 0 0 0 1 0 0 0 20 0 3 0 100 0 0\n"))
	f.Add([]byte("7 (a) b) (c) Z 1 7 7 0 -1 4227084 0 0\n"))
	f.Add([]byte("9 (x) S 1 2 3 4 5 18446744073709551616\n"))
	f.Add([]byte("1 (c) \xf1 0 0 0 0 0 419856009")) // a state byte that is not ASCII: refused
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseProcStat(strings.NewReader(string(b)))
		var pe *ParseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("untyped error %T %v", err, err)
		}
		if err != nil {
			return
		}
		if s.State <= ' ' || s.State > '~' {
			t.Fatalf("state %q accepted from %q", s.State, b)
		}
		line := "1 (c) " + string([]byte{s.State}) + " 0 0 0 0 0 " + strconv.FormatUint(s.Flags, 10)
		again, err := parseProcStat(strings.NewReader(line))
		if s.State != ')' && (err != nil || again != s) {
			t.Fatalf("%+v does not read back from %q: %+v %v", s, line, again, err)
		}
	})
}

// /proc/vmstat: an error is typed; a count that parses reads back.
func FuzzParseVMStatOOMKill(f *testing.F) {
	f.Add([]byte("nr_free_pages 123\noom_kill 7\npgfault 99\n"))
	f.Add([]byte("oom_kill 1\noom_kill 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseVMStatOOMKill(strings.NewReader(string(b)))
		var pe *ParseError
		var ns *NotSupportedError
		if err != nil && !errors.As(err, &pe) && !errors.As(err, &ns) {
			t.Fatalf("untyped error %T %v", err, err)
		}
		if err == nil {
			if again, err := parseVMStatOOMKill(strings.NewReader("oom_kill " + strconv.FormatUint(v, 10) + "\n")); err != nil || again != v {
				t.Fatalf("%d does not read back: %d %v", v, again, err)
			}
		}
	})
}

// /proc/<pid>/smaps: an error is a *ParseError; what parses has address
// ranges in order and permissions of the kernel's four letters.
func FuzzParseSmaps(f *testing.F) {
	f.Add([]byte("00400000-00df5000 r-xp 00000000 fe:00 1234   /usr/bin/evictd\nRss:   4 kB\nAnonymous: 0 kB\nVmFlags: rd ex mr mw me\n"))
	f.Add([]byte("7ffd1000-7ffd3000 rw-p 00000000 00:00 0                          [stack]\nRss: 8 kB\n"))
	f.Add([]byte("1-0 r--p 0 0:0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		maps, err := parseSmaps(strings.NewReader(string(b)))
		var pe *ParseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("untyped error %T %v", err, err)
		}
		for _, m := range maps {
			if m.End < m.Start || !validPerms([]byte(m.Perms)) {
				t.Fatalf("mapping %+v accepted", m)
			}
		}
	})
}
