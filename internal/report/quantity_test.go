package report

import (
	"regexp"
	"strings"
	"testing"
)

// TestHumanQuantity: bytes in the largest binary unit they have one of,
// counts as whole numbers, anything else as it is.
func TestHumanQuantity(t *testing.T) {
	for _, c := range []struct {
		sig, q string
		digits int
		want   string
	}{
		{"memory.available", "200984Ki", 3, "196Mi"},
		{"memory.available", "200984Ki", 4, "196.3Mi"},
		{"memory.available", "1536Mi", 3, "1.5Gi"},
		{"memory.available", "256Mi", 3, "256Mi"},
		{"memory.available", "-1288490188", 3, "-1.2Gi"},
		{"memory.available", "512", 3, "512"},
		{"memory.available", "0", 3, "0"},
		{"ephemeralpodfs.limit", "3Gi", 3, "3Gi"},
		{"nodefs.inodesFree", "16190040", 3, "16190040"},
		{"pid.available", "1k", 3, "1000"},
	} {
		if got, ok := HumanQuantity(c.sig, c.q, c.digits); !ok || got != c.want {
			t.Errorf("HumanQuantity(%s, %s, %d) = %q, %v; want %q", c.sig, c.q, c.digits, got, ok, c.want)
		}
	}
	if got, ok := HumanQuantity("memory.available", "lots", 3); ok || got != "lots" {
		t.Errorf("not a quantity: %q, %v", got, ok)
	}
}

// TestComparedQuantitiesDiffer: an observed value below its threshold
// never reads as the threshold.
func TestComparedQuantitiesDiffer(t *testing.T) {
	a, q := comparedHTML("memory.available", "262143Ki", "256Mi")
	if strings.Contains(string(a), ">256Mi<") || !strings.Contains(string(a), `title="262143Ki"`) {
		t.Errorf("available %s, quantity %s: they read the same", a, q)
	}
	a, _ = comparedHTML("memory.available", "130576Ki", "128Mi")
	if !strings.Contains(string(a), ">127.5Mi<") {
		t.Errorf("available %s, want 127.5Mi", a)
	}
}

var bigKi = regexp.MustCompile(`[0-9]{4,}Ki`)

// TestRenderTableForPeople: the demo's table shows quantities as people
// read them (197Mi, not 201944Ki: the log's text stays in the title), and
// pod names that do not wrap; the kubelet's message is quoted as it is.
func TestRenderTableForPeople(t *testing.T) {
	page, err := render(t, demoLog(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	table := page[strings.Index(page, `<table id="evictions"`):]
	// Leave out the titles (the exact text) and the kubelet's messages.
	shown := regexp.MustCompile(`title="[^"]*"|<td colspan="7" class="msg">[^<]*</td>`).ReplaceAllString(table, "")
	if m := bigKi.FindAllString(shown, -1); len(m) > 0 {
		t.Errorf("the table shows quantities in Ki: %v", m)
	}
	for _, want := range []string{
		`available <span title="201944Ki">197Mi</span> &lt; 256Mi`,
		`available <span title="129624Ki">127Mi</span> &lt; 128Mi`,
		`<span class="pod">host/leaky</span>`,
		`allocatableMemory.<wbr>available`,
		"Threshold quantity: 256Mi, available: 201944Ki.", // the kubelet's words
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if strings.Contains(page, "overflow-wrap: anywhere") {
		t.Error("the table may break words anywhere")
	}
	if !strings.Contains(page, "#chart svg { width: 100%;") {
		t.Error("the chart does not fill the page's width")
	}
}
