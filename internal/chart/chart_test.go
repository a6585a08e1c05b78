package chart

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/timeline"
)

// TestWriteEdgeCases: a timeline without samples, one with a single
// sample, and a clock axis spanning years all draw well-formed SVG.
func TestWriteEdgeCases(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	one := &timeline.Timeline{Origin: t0, Panels: []timeline.Panel{{Signal: "memory.available",
		Available:  [][]timeline.Point{{{X: 0, Y: 1 << 30}}},
		Thresholds: []timeline.Threshold{{Label: "memory.available<100Mi", Quantity: [][]timeline.Point{{{X: 0, Y: 100 << 20}}}}}}},
		Conditions: []timeline.Band{{Condition: "MemoryPressure", On: []timeline.Interval{{From: 0, To: 0}}}},
		Evictions:  []timeline.Marker{{X: 0, Pod: "a/b", Reason: "memory.available", Y: 1 << 30}, {X: 0, Pod: "a/c", Reason: "ephemeralpodfs.limit", Panel: -1}}}
	years := &timeline.Timeline{Origin: t0, End: 5 * 365 * 86400, Conditions: []timeline.Band{{Condition: "DiskPressure"}}}
	for name, tl := range map[string]*timeline.Timeline{"empty": {}, "one sample": one, "years": years} {
		for _, clock := range []bool{false, true} {
			var buf bytes.Buffer
			if err := Write(&buf, SVG, tl, Options{Title: "t <&>", X: XAxis{Clock: clock}}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			dec := xml.NewDecoder(&buf)
			for {
				_, err := dec.Token()
				if err != nil {
					if err.Error() != "EOF" {
						t.Fatalf("%s: not well-formed: %v", name, err)
					}
					break
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, PNG, one, Options{}); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("\x89PNG")) {
		t.Fatalf("PNG: %v", err)
	}
	if err := Write(&buf, "gif", one, Options{}); err == nil {
		t.Error("an unknown format was accepted")
	}
	if _, err := FormatOf("x.PDF"); err == nil || !strings.Contains(err.Error(), "x.PDF") {
		t.Errorf("FormatOf(x.PDF): %v", err)
	}
}
