// Package suggest finds what a mistyped name (a command, a flag, a
// configuration field) may have meant.
package suggest

import (
	"sort"
	"strings"
)

// MaxDistance is how many edits (Levenshtein distance) a typo may be from a
// name it suggests: cobra's default for commands, and enough for a swapped,
// missing or extra letter ("--confg", "exlpain", "evictionHrad").
const MaxDistance = 2

// Near returns, sorted, the candidates within MaxDistance of typed or that
// start with it (at least two letters typed), ignoring case.
func Near(typed string, candidates []string) []string {
	var near []string
	lower := strings.ToLower(typed)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == lower && c == typed {
			continue
		}
		if Distance(lower, lc) <= MaxDistance || (len(lower) >= 2 && strings.HasPrefix(lc, lower)) {
			near = append(near, c)
		}
	}
	sort.Strings(near)
	return near
}

// Distance is the Levenshtein edit distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
