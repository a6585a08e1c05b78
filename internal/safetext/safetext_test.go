package safetext

import (
	"strings"
	"testing"
	"unicode"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"web-1":             "web-1",
		"café":              "café",
		"\x1b[31mred":       `\x1b[31mred`,
		"a\nb\tc\r":         `a\nb\tc\r`,
		"\u009b2J":          `\u009b2J`,
		"bad\xffutf8":       `bad\xffutf8`,
		`back\slash`:        `back\\slash`,
		"\x1b]2;owned\x07x": `\x1b]2;owned\ax`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[2J\u009b\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		for _, r := range out {
			if unicode.IsControl(r) || r == 0xfffd && !strings.ContainsRune(s, 0xfffd) {
				t.Fatalf("Escape(%q) = %q holds %U", s, out, r)
			}
		}
	})
}
