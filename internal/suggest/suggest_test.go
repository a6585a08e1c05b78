package suggest

import (
	"reflect"
	"testing"
)

func TestNear(t *testing.T) {
	names := []string{"config", "config-dir", "dry-run", "eviction-hard", "eviction-soft", "explain"}
	for typed, want := range map[string][]string{
		"confg":         {"config"},
		"conf":          {"config", "config-dir"},
		"eviction-hrad": {"eviction-hard"},
		"EXPLAIN":       {"explain"},
		"exlpain":       {"explain"},
		"zzzz":          nil,
		"config":        {"config-dir"}, // itself is not a suggestion
	} {
		if got := Near(typed, names); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %q, want %q", typed, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
