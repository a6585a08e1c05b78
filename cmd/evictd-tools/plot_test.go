package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/chart/chartsvg"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/scenario"
	"github.com/evictd/evictd/internal/timeline"
)

// svgDoc is what these tests read from a chart: every text, and how many
// paths are filled with the eviction marker's color (internal/chart's
// structure tests read the rest).
type svgDoc struct {
	texts   []string
	markers int
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	d, err := chartsvg.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	doc := svgDoc{markers: d.Filled(chart.MarkerColor)}
	for _, tx := range d.Texts {
		doc.texts = append(doc.texts, tx.S)
	}
	return doc
}

func (d svgDoc) has(s string) bool {
	for _, t := range d.texts {
		if t == s {
			return true
		}
	}
	return false
}

// kubeletEvictionCounts reads the scenario's .kubelet.json (the real
// kubelet's outcomes) and returns the number of evictions of each outcome.
func kubeletEvictionCounts(t *testing.T, scenarioPath string) []int {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(scenarioPath, ".yaml") + ".kubelet.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Outcomes []scenario.Result `json:"outcomes"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, o := range f.Outcomes {
		n := 0
		for _, st := range o.Steps {
			n += len(st.Evicted)
		}
		counts = append(counts, n)
	}
	return counts
}

// TestPlotEveryScenario draws every scenario of testdata/scenarios with
// `simulate --plot` and reads the SVG back: a panel per observed signal with
// a threshold, each threshold in its legend, the conditions strip, and one
// marker and one label per eviction — as many as the real kubelet evicts in
// that scenario. internal/chart's structure tests check how they are drawn.
func TestPlotEveryScenario(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/scenarios/*.yaml")
	if len(paths) < 50 {
		t.Fatalf("found %d scenarios; the corpus has more than 50", len(paths))
	}
	dir := t.TempDir()
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name+".svg")
			var stdout, stderr bytes.Buffer
			if code := run([]string{"simulate", "--scenario", path, "-o", "json", "--plot", out}, &stdout, &stderr); code != cli.ExitOK {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var res scenario.Result
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(stdout.String(), `"decision"`) {
				t.Error("--plot without -v put the decisions in the JSON output")
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			doc := parseSVG(t, data)
			if !doc.has("evictd simulate — " + name + ".yaml") {
				t.Errorf("no title naming the scenario")
			}
			if !doc.has(chart.StripTitle) {
				t.Errorf("no %q strip", chart.StripTitle)
			}
			for _, c := range timeline.Conditions {
				if !doc.has(c) {
					t.Errorf("no band row for %s", c)
				}
			}

			// Panels and legends: every threshold of the configuration whose
			// signal the scenario observes.
			s, err := scenario.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			observed := observedSignals(t, s)
			cfg, err := policy.ConfigFromKubelet(s.KubeletConfig)
			if err != nil {
				t.Fatal(err)
			}
			eng, err := policy.NewEngine(cfg, s.Filesystems)
			if err != nil {
				t.Fatal(err)
			}
			var unobserved []string
			for _, th := range eng.Thresholds() {
				if th.Operator == "" {
					continue
				}
				if !observed[th.Signal] {
					if !slices.Contains(unobserved, string(th.Signal)) {
						unobserved = append(unobserved, string(th.Signal))
					}
					continue
				}
				if !doc.has(string(th.Signal)) {
					t.Errorf("no panel titled %s", th.Signal)
				}
				// As the config spells it: internal/chart's
				// TestChartLegendsSpellTheConfig checks the spelling.
				if !hasPrefix(doc.texts, string(th.Signal)+"<") {
					t.Errorf("no legend entry for %s", th)
				}
			}

			if len(unobserved) > 0 {
				if !hasPrefix(doc.texts, chart.UnobservedNote) {
					t.Errorf("no note for the thresholds without observations %v", unobserved)
				}
				for _, u := range unobserved {
					if doc.has(u) {
						t.Errorf("a panel for %s, which no step observes", u)
					}
				}
			}

			// Markers and labels: one per eviction, as many as the kubelet's.
			var labels []string
			for _, st := range res.Steps {
				for _, ev := range st.Evicted {
					labels = append(labels, ev.Namespace+"/"+ev.Name)
				}
			}
			if doc.markers != len(labels) {
				t.Errorf("%d eviction markers, want %d (one per eviction)", doc.markers, len(labels))
			}
			if counts := kubeletEvictionCounts(t, path); !slices.Contains(counts, doc.markers) {
				t.Errorf("%d eviction markers; the kubelet evicts %v pods in this scenario", doc.markers, counts)
			}
			// Beside its marker, or in the legend beside the marker's
			// number (the pod on a line of its own when it is long).
			for _, l := range labels {
				if !hasPrefix(doc.texts, l+" (") && !doc.has(l) {
					t.Errorf("no marker label for %s", l)
				}
			}
			if len(labels) > 0 && !doc.has("eviction (pod, reason)") {
				t.Error("no legend entry for the eviction markers")
			}
		})
	}
}

func hasPrefix(texts []string, p string) bool {
	for _, t := range texts {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// observedSignals are the signals some step of the scenario observes.
func observedSignals(t *testing.T, s *scenario.Scenario) map[policy.Signal]bool {
	t.Helper()
	res, err := scenario.Run(s, scenario.RunOptions{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[policy.Signal]bool{}
	for _, st := range res.Steps {
		for _, o := range st.Decision.Observations {
			out[o.Signal] = true
		}
	}
	return out
}

// TestPlotLegendsAndUnits pins one scenario's chart: the legends name the
// thresholds as its config writes them, the y axis is named with its unit
// and ticked in Gi, the x axis in the steps' durations.
func TestPlotLegendsAndUnits(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.svg")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/memory-pressure-soft-then-hard.yaml", "--plot", out}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, data)
	for _, want := range []string{
		"memory.available", "memory.available<1Gi", "memory.available<2Gi (soft, 2m)", "grace period",
		"allocatableMemory.available<1Gi", "1Gi", "2Gi", "3Gi", "available (bytes)", "0s", "4m", "24m", "31m",
		"default/best-effort-low-priority-low-usage (memory.available)",
		"default/burstable-above-requests (memory.available)",
	} {
		if !doc.has(want) {
			t.Errorf("no text %q in the chart", want)
		}
	}
	if doc.markers != 2 {
		t.Errorf("%d markers, want 2", doc.markers)
	}
	// A PID threshold as the config writes it ('1000', not 1k), on a
	// count axis.
	out3 := filepath.Join(t.TempDir(), "pid.svg")
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/disk-and-pid-pressure-at-once.yaml", "--plot", out3}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, _ = os.ReadFile(out3)
	doc = parseSVG(t, data)
	for _, want := range []string{"pid.available<1000", "available PIDs (count)", "1000", "nodefs.available<1Gi"} {
		if !doc.has(want) {
			t.Errorf("no text %q in the chart", want)
		}
	}
	// The percentage scenario's axis is in % of capacity.
	out2 := filepath.Join(t.TempDir(), "pct.svg")
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/disk-percentage-threshold.yaml", "--plot", out2}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, _ = os.ReadFile(out2)
	doc = parseSVG(t, data)
	if !doc.has("available (% of capacity)") || !hasSuffix(doc.texts, "%") {
		t.Errorf("the percentage thresholds' panel is not in %%: %q", doc.texts)
	}
}

func hasSuffix(texts []string, s string) bool {
	for _, t := range texts {
		if strings.HasSuffix(t, s) {
			return true
		}
	}
	return false
}

// TestPlotPNGAndErrors: PNG by extension; an unknown extension is refused
// before any work, and nothing is written.
func TestPlotPNGAndErrors(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "p.png")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/min-reclaim.yaml", "--plot", png}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("not a PNG (%v)", err)
	}
	stderr.Reset()
	bad := filepath.Join(dir, "p.gif")
	if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/min-reclaim.yaml", "--plot", bad}, &stdout, &stderr); code != cli.ExitError {
		t.Fatalf("exit %d for a .gif, want %d", code, cli.ExitError)
	}
	if !strings.Contains(stderr.String(), "p.gif") || !strings.Contains(stderr.String(), ".svg or .png") {
		t.Errorf("error does not name the file and the formats: %s", stderr.String())
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "p.png" {
		t.Errorf("files left in the directory: %v", names)
	}
}

// TestDocsPlotsUpToDate: the charts in docs/img are what `simulate --plot`
// draws now (regenerate with make docs-plots).
func TestDocsPlotsUpToDate(t *testing.T) {
	for _, name := range []string{"memory-pressure-soft-then-hard", "disk-pressure-nodefs-split"} {
		committed, err := os.ReadFile(filepath.Join("../../docs/img", name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), name+".svg")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"simulate", "--scenario", "../../testdata/scenarios/" + name + ".yaml", "--plot", out}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		now, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(now, committed) {
			t.Errorf("docs/img/%s.svg is stale: run make docs-plots", name)
		}
		if doc := parseSVG(t, committed); doc.markers != 2 {
			t.Errorf("docs/img/%s.svg has %d eviction markers, want 2", name, doc.markers)
		}
	}
}
