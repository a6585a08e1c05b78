package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
)

// Max is how a limit of "max" (v2) or "unlimited" reads: the largest uint64.
const Max = math.MaxUint64

// Errors wrapped by ParseError.
var (
	ErrNotNumber = errors.New("not a decimal number")
	ErrNoValue   = errors.New("key without a value")
	ErrEmpty     = errors.New("file is empty")
	ErrExtra     = errors.New("unexpected extra content")
	// ErrDuplicateKey: a flat-keyed file gave a known key twice.
	ErrDuplicateKey = errors.New("key given twice")
)

// ParseUint parses a kernel counter. A negative value (v1 counters can read
// below zero after racy uncharges, e.g. "-4096") is clamped to 0, because a
// usage is never negative and a wrapped uint64 would look like an exabyte.
func ParseUint(tok []byte) (uint64, error) {
	neg := false
	if len(tok) > 0 && tok[0] == '-' {
		neg, tok = true, tok[1:]
	}
	if len(tok) == 0 || len(tok) > 20 {
		return 0, ErrNotNumber
	}
	var v uint64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, ErrNotNumber
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, ErrNotNumber // overflow
		}
		v = v*10 + d
	}
	if neg {
		return 0, nil
	}
	return v, nil
}

// ParseLimit is ParseUint that also accepts "max" (cgroup v2's "no limit"),
// returned as Max.
func ParseLimit(tok []byte) (uint64, error) {
	if string(tok) == "max" {
		return Max, nil
	}
	return ParseUint(tok)
}

// ParseSingle parses a file holding one value on one line, such as
// memory.current or pids.max, with parseTok (ParseUint or ParseLimit).
func ParseSingle(r io.Reader, parseTok func([]byte) (uint64, error)) (uint64, error) {
	b, err := Bytes(r)
	if err != nil {
		return 0, err
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return 0, &ParseError{Line: 1, Token: "", Err: ErrEmpty}
	}
	if i := bytes.IndexByte(t, '\n'); i >= 0 {
		return 0, &ParseError{Line: 2, Token: string(t[i+1:]), Err: ErrExtra}
	}
	v, err := parseTok(t)
	if err != nil {
		return 0, &ParseError{Line: 1, Token: string(t), Err: err}
	}
	return v, nil
}

// Entry is one "key value" line of a flat-keyed file.
type Entry struct {
	Key   string
	Value uint64
}

// Keys interns the key names a file is known to have, so that parsing the
// file allocates no string for them; unknown keys are still kept, as a new
// string each. Each known name also has an index, with which ParseFlatKeyed
// finds a known key given twice without allocating.
type Keys struct {
	index map[string]int
	names []string
}

// maxKnownKeys bounds the known names of one file (the largest, v1's
// memory.stat, has about 70), so that their seen-set fits in an array on
// the stack.
const maxKnownKeys = 256

// NewKeys builds Keys from the known names. More than maxKnownKeys names is
// a programming error: it panics at package initialization.
func NewKeys(names ...string) Keys {
	if len(names) > maxKnownKeys {
		panic(fmt.Sprintf("cgroup.NewKeys: %d names, at most %d", len(names), maxKnownKeys))
	}
	k := Keys{index: make(map[string]int, len(names)), names: names}
	for i, n := range names {
		k.index[n] = i
	}
	return k
}

// Intern returns the canonical string for b, and its index among the known
// names (-1 for an unknown key).
func (k Keys) Intern(b []byte) (string, int) {
	if i, ok := k.index[string(b)]; ok {
		return k.names[i], i
	}
	return string(b), -1
}

// ParseFlatKeyed parses a flat-keyed file ("key value" per line: memory.stat,
// cpu.stat, memory.events, memory.oom_control, pids.events) into entries, in
// file order. Values are parsed with ParseLimit (so "max" is accepted and
// negatives clamp to 0). Empty lines are skipped; a line with no value or a
// value that is not a number is a *ParseError naming the line and token, and
// so is a known key given twice (ErrDuplicateKey): the kernel never writes
// one, and a reader taking the first while Lookup-style code took the last
// would disagree about the file (found by FuzzParseMemoryOOMControl).
func ParseFlatKeyed(r io.Reader, keys Keys, into []Entry) ([]Entry, error) {
	b, err := Bytes(r)
	if err != nil {
		return into, err
	}
	var seen [maxKnownKeys / 64]uint64
	for line := 1; len(b) > 0; line++ {
		var l []byte
		l, b = nextLine(b)
		if len(l) == 0 {
			continue
		}
		sp := bytes.IndexByte(l, ' ')
		if sp <= 0 {
			return into, &ParseError{Line: line, Token: string(l), Err: ErrNoValue}
		}
		val := l[sp+1:]
		v, err := ParseLimit(val)
		if err != nil {
			return into, &ParseError{Line: line, Token: string(val), Err: err}
		}
		key, i := keys.Intern(l[:sp])
		if i >= 0 {
			if seen[i/64]&(1<<(i%64)) != 0 {
				return into, &ParseError{Line: line, Token: key, Err: ErrDuplicateKey}
			}
			seen[i/64] |= 1 << (i % 64)
		}
		into = append(into, Entry{Key: key, Value: v})
	}
	return into, nil
}

// Lookup returns the value of key in entries.
func Lookup(entries []Entry, key string) (uint64, bool) {
	for i := range entries {
		if entries[i].Key == key {
			return entries[i].Value, true
		}
	}
	return 0, false
}

// nextLine splits b at its first newline: the line without it, and the rest.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}
