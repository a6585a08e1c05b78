// Package safetext makes text from files and the kernel safe to print on a
// terminal: a pod, workload or cgroup name may hold escape sequences (a
// cgroup directory can be named "\x1b]2;owned\a"), and printed raw they
// would drive the reader's terminal.
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every control character (C0, DEL, C1), every
// invalid UTF-8 byte and every backslash written as a Go escape (\x1b,
// \u009b, \\), so that it prints as one line and cannot drive a terminal.
// Printable text, including non-ASCII letters, is left as it is.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r) // 'x1b' style, with quotes
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\\' || unicode.IsControl(r) {
			return true
		}
		i += size
	}
	return false
}
