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
