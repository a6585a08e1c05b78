package chart_test

// Golden structure tests: every scenario of testdata/scenarios and the demo's
// report are drawn to SVG and read back as elements — texts with their
// font, size and place, paths with their points and colors — to check what
// a reader sees at a glance: samples as steps, no text on another text or
// on a marker, every text on the picture, axes named with their units and
// ticks on round values, thresholds spelled as the config spells them, and
// a one-step scenario drawn across the panel.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	xfont "golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/chart/chartsvg"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/report"
	"github.com/evictd/evictd/internal/scenario"
	"github.com/evictd/evictd/internal/timeline"
)

type (
	svgText = chartsvg.Text
	svgPath = chartsvg.Path
	svgDoc  = *chartsvg.Doc
)

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	doc, err := chartsvg.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

var hexOf = chartsvg.Hex

// box is a rectangle, y up.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box, tol float64) bool {
	return a.x0 < b.x1-tol && b.x0 < a.x1-tol && a.y0 < b.y1-tol && b.y0 < a.y1-tol
}

// styleFor is a text style in the font an SVG text names, as gonum
// measures it (the fonts the chart can name are in gonum's cache).
func styleFor(t *testing.T, family string, size float64) text.Style {
	t.Helper()
	fonts := map[string]font.Font{
		"DejaVu Sans":      chart.Font,
		"Liberation Serif": {Typeface: "Liberation", Variant: "Serif"},
		"Liberation Sans":  {Typeface: "Liberation", Variant: "Sans"},
	}
	f, ok := fonts[family]
	if !ok {
		t.Fatalf("the chart names font %q, which no test measures", family)
	}
	return text.Style{Font: font.From(f, vg.Points(size)), Handler: plot.DefaultTextHandler}
}

// textBox is where a text's glyphs reach: from its baseline start, as
// wide as the wider of the font it names and DejaVu Sans (what a browser
// that lacks the named font is likely to fall back to, and among the
// widest), and as high and deep as the ink of either.
func textBox(t *testing.T, tx svgText) box {
	named := styleFor(t, tx.Family, tx.Size)
	wide := styleFor(t, "DejaVu Sans", tx.Size)
	w := math.Max(float64(named.Width(tx.S)), float64(wide.Width(tx.S)))
	top, bottom := 0.0, 0.0
	for _, sty := range []text.Style{named, wide} {
		f := font.DefaultCache.Lookup(sty.Font, sty.Font.Size)
		face, err := opentype.NewFace(f.Face, &opentype.FaceOptions{Size: tx.Size, DPI: 72})
		if err != nil {
			t.Fatal(err)
		}
		ink, _ := xfont.BoundString(face, tx.S) // y down from the baseline
		top, bottom = math.Max(top, -float64(ink.Min.Y)/64), math.Max(bottom, float64(ink.Max.Y)/64)
		face.Close()
	}
	return box{tx.X, tx.Y - bottom, tx.X + w, tx.Y + top}
}

func bounds(p svgPath) box {
	b := box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, pt := range p.Points {
		b.x0, b.y0 = math.Min(b.x0, pt[0]), math.Min(b.y0, pt[1])
		b.x1, b.y1 = math.Max(b.x1, pt[0]), math.Max(b.y1, pt[1])
	}
	return b
}

// picture is one chart to check, with what it was drawn from.
type picture struct {
	name string
	svg  []byte
	tl   *timeline.Timeline
	s    *scenario.Scenario // nil for the report
}

// The scenarios' pictures, drawn once for all the tests.
var (
	scenarioOnce sync.Once
	scenarioPics []picture
	scenarioErr  error
)

func scenarioPictures(t *testing.T) []picture {
	t.Helper()
	scenarioOnce.Do(func() { scenarioPics, scenarioErr = drawScenarios() })
	if scenarioErr != nil {
		t.Fatal(scenarioErr)
	}
	return scenarioPics
}

func drawScenarios() ([]picture, error) {
	paths, _ := filepath.Glob("../../testdata/scenarios/*.yaml")
	if len(paths) < 50 {
		return nil, fmt.Errorf("found %d scenarios; the corpus has more than 50", len(paths))
	}
	var out []picture
	for _, path := range paths {
		s, err := scenario.LoadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		res, err := scenario.Run(s, scenario.RunOptions{Verbose: true})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		tl, steps, err := timeline.OfScenario(s, res)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var buf bytes.Buffer
		if err := chart.Write(&buf, chart.SVG, tl, chart.Options{Title: "evictd simulate — " + filepath.Base(path), X: chart.XAxis{Steps: steps}}); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, picture{name: strings.TrimSuffix(filepath.Base(path), ".yaml"), svg: buf.Bytes(), tl: tl, s: s})
	}
	return out, nil
}

// reportPicture is the chart of the report of a real demo run's log.
func reportPicture(t *testing.T) picture {
	t.Helper()
	f, err := os.Open("../report/testdata/demo-decisions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var page bytes.Buffer
	if _, err := report.Render(&page, f, "demo-decisions.jsonl", report.Options{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	i, j := strings.Index(html, "<svg"), strings.Index(html, "</svg>")
	if i < 0 || j < i {
		t.Fatal("no SVG in the report")
	}
	return picture{name: "demo report", svg: []byte(`<?xml version="1.0"?>` + html[i:j+len("</svg>")])}
}

func allPictures(t *testing.T) []picture {
	return append(scenarioPictures(t), reportPicture(t))
}

// seriesColors are the strokes of the lines that draw samples: the
// observed amount and the thresholds' quantities (a percentage threshold
// resolves against a capacity that is sampled too).
var seriesColors = []string{hexOf(chart.ObservedColor), "#D62728", "#9467BD", "#8C564B", "#FF7F0E", "#E377C2", "#BCBD22"}

// TestChartsDrawSamplesAsSteps: a value holds from its sample to the next
// one, so every line of samples is horizontal and vertical segments, never
// a slope that invents a ramp between two samples; and each sample is a
// dot on the observed line.
func TestChartsDrawSamplesAsSteps(t *testing.T) {
	for _, pic := range allPictures(t) {
		t.Run(pic.name, func(t *testing.T) {
			doc := parseSVG(t, pic.svg)
			lines := 0
			for _, p := range doc.Paths {
				isSeries := false
				for _, c := range seriesColors {
					isSeries = isSeries || p.Stroke == c
				}
				if !isSeries || p.Fill != "none" {
					continue
				}
				lines++
				for k := 1; k < len(p.Points); k++ {
					dx, dy := p.Points[k][0]-p.Points[k-1][0], p.Points[k][1]-p.Points[k-1][1]
					if math.Abs(dx) > 0.01 && math.Abs(dy) > 0.01 {
						t.Errorf("a %s line slopes from %v to %v: samples are drawn as a ramp, not held until the next one", p.Stroke, p.Points[k-1], p.Points[k])
						break
					}
				}
			}
			if lines == 0 && len(chartPanels(doc)) > 0 {
				t.Error("no lines of samples")
			}
			if pic.tl == nil {
				return
			}
			samples := 0
			for _, pn := range pic.tl.Panels {
				for _, seg := range pn.Available {
					samples += len(seg)
				}
			}
			// Dots are filled circles of the observed color; the
			// legend shows one per panel.
			dots := 0
			for _, p := range doc.Paths {
				if p.Fill == hexOf(chart.ObservedColor) && p.Stroke == "" {
					dots++
				}
			}
			if want := samples + len(pic.tl.Panels); dots != want {
				t.Errorf("%d sample dots, want %d (one per sample, one per legend)", dots, want)
			}
		})
	}
}

// chartPanels are the panel titles (the signal names drawn as texts).
func chartPanels(doc svgDoc) []svgText {
	var out []svgText
	for _, tx := range doc.Texts {
		name, _, _ := strings.Cut(tx.S, " — ")
		if policy.ValidSignal(policy.Signal(name)) {
			out = append(out, tx)
		}
	}
	return out
}

// TestChartTextsDoNotCollide: no text overlaps another text or an
// eviction marker, and every text is on the picture and off the axes.
// Widths are the wider of the font the SVG names and DejaVu Sans, so a
// browser with another font still shows no collision.
func TestChartTextsDoNotCollide(t *testing.T) {
	marker := hexOf(chart.MarkerColor)
	for _, pic := range allPictures(t) {
		t.Run(pic.name, func(t *testing.T) {
			doc := parseSVG(t, pic.svg)
			var texts []svgText
			var boxes []box
			for _, tx := range doc.Texts {
				if tx.Rotated || strings.TrimSpace(tx.S) == "" {
					continue
				}
				texts, boxes = append(texts, tx), append(boxes, textBox(t, tx))
			}
			var markers, axes []box
			for _, p := range doc.Paths {
				switch {
				case p.Fill == marker:
					markers = append(markers, bounds(p))
				case p.Stroke == "#000000" && p.Fill == "none":
					// Axis lines and tick marks.
					for k := 1; k < len(p.Points); k++ {
						a, b := p.Points[k-1], p.Points[k]
						axes = append(axes, box{math.Min(a[0], b[0]), math.Min(a[1], b[1]), math.Max(a[0], b[0]), math.Max(a[1], b[1])})
					}
				}
			}
			// The plot's horizontal extent: the horizontal grid lines.
			left, right := math.Inf(1), math.Inf(-1)
			for _, p := range doc.Paths {
				if b := bounds(p); p.Stroke == "#808080" && b.y0 == b.y1 {
					left, right = math.Min(left, b.x0), math.Max(right, b.x1)
				}
			}
			const tol = 0.3 // points: the SVG's rounding
			for i, b := range boxes {
				// An eviction's label (or number) that starts in the plot
				// stays in it.
				if markLabelRe.MatchString(texts[i].S) && b.x0 >= left-tol && b.x0 < right && b.x1 > right+tol {
					t.Errorf("label %q runs out of the plot (%.1f past its right edge)", texts[i].S, b.x1-right)
				}
				if b.x0 < -tol || b.y0 < -tol || b.x1 > doc.W+tol || b.y1 > doc.H+tol {
					t.Errorf("text %q at %.1f,%.1f runs off the %gx%g picture", texts[i].S, texts[i].X, texts[i].Y, doc.W, doc.H)
				}
				for j := i + 1; j < len(boxes); j++ {
					if b.overlaps(boxes[j], tol) {
						t.Errorf("text %q overlaps text %q", texts[i].S, texts[j].S)
					}
				}
				for _, m := range markers {
					if b.overlaps(m, tol) {
						t.Errorf("text %q overlaps an eviction marker", texts[i].S)
					}
				}
				for _, a := range axes {
					if b.overlaps(a, tol) {
						t.Errorf("text %q %v crosses an axis or a tick %v", texts[i].S, b, a)
						break
					}
				}
			}
		})
	}
}

// markLabelRe matches an eviction's label ("ns/name (reason)") or number.
var markLabelRe = regexp.MustCompile(`^([^ ]+/[^ ]+ \(.+\)|\d+)$`)

var (
	yLabelRe = regexp.MustCompile(`\((bytes|count|% of capacity)\)$`)
	yTickRe  = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|M|%)?$`)
)

// TestChartAxesNamedWithUnits: each panel's y axis says what it measures
// and in which unit, and its ticks are in one unit, on the multiples of a
// 1, 2 or 5 step.
func TestChartAxesNamedWithUnits(t *testing.T) {
	for _, pic := range allPictures(t) {
		t.Run(pic.name, func(t *testing.T) {
			doc := parseSVG(t, pic.svg)
			panels := chartPanels(doc)
			named := 0
			for _, tx := range doc.Texts {
				if tx.Rotated && yLabelRe.MatchString(tx.S) {
					named++
				}
			}
			if named != len(panels) {
				t.Errorf("%d y axes named with a unit (… (bytes), (count), (%% of capacity)), want one per panel (%d)", named, len(panels))
			}
			// The data area's left edge: the leftmost grid line.
			left := math.Inf(1)
			for _, p := range doc.Paths {
				if p.Stroke == "#808080" {
					left = math.Min(left, bounds(p).x0)
				}
			}
			for i, pt := range panels {
				bottom := math.Inf(-1)
				if i+1 < len(panels) {
					bottom = panels[i+1].Y
				}
				var ticks []svgText
				for _, tx := range doc.Texts {
					if !tx.Rotated && tx.Y < pt.Y && tx.Y > bottom && yTickRe.MatchString(tx.S) && textBox(t, tx).x1 < left {
						ticks = append(ticks, tx)
					}
				}
				checkTicks(t, pt.S, ticks)
			}
		})
	}
}

func checkTicks(t *testing.T, panel string, ticks []svgText) {
	t.Helper()
	if len(ticks) < 2 {
		t.Errorf("%s: %d y ticks, want at least 2", panel, len(ticks))
		return
	}
	var vals []float64
	suffix := ""
	for i, tx := range ticks {
		m := yTickRe.FindStringSubmatch(tx.S)
		v, _ := strconv.ParseFloat(m[1], 64)
		vals = append(vals, v)
		if i == 0 {
			suffix = m[2]
		} else if m[2] != suffix {
			t.Errorf("%s: y ticks in two units: %q and %q", panel, ticks[0].S, tx.S)
			return
		}
		if strings.HasPrefix(tx.S, "-0") && v == 0 {
			t.Errorf("%s: tick %q", panel, tx.S)
		}
	}
	step := math.Abs(vals[1] - vals[0])
	mag := math.Pow(10, math.Floor(math.Log10(step)+1e-9))
	if m := step / mag; math.Abs(m-1) > 1e-6 && math.Abs(m-2) > 1e-6 && math.Abs(m-5) > 1e-6 {
		t.Errorf("%s: y ticks %v step by %g, not 1, 2 or 5 times a power of ten", panel, tickTexts(ticks), step)
	}
	for i, v := range vals {
		if k := v / step; math.Abs(k-math.Round(k)) > 1e-6 {
			t.Errorf("%s: y tick %q is not a multiple of the step %g (%v)", panel, ticks[i].S, step, tickTexts(ticks))
		}
		if i > 0 && math.Abs(math.Abs(v-vals[i-1])-step) > step*1e-6 {
			t.Errorf("%s: y ticks %v are not evenly spaced", panel, tickTexts(ticks))
		}
	}
}

func tickTexts(ts []svgText) []string {
	var out []string
	for _, tx := range ts {
		out = append(out, tx.S)
	}
	return out
}

// TestChartLegendsSpellTheConfig: a threshold the config writes is named
// in the legend as the config writes it ('1000', not 1k; 0.0%; 90s).
func TestChartLegendsSpellTheConfig(t *testing.T) {
	checked := 0
	for _, pic := range scenarioPictures(t) {
		doc := parseSVG(t, pic.svg)
		has := map[string]bool{}
		for _, tx := range doc.Texts {
			has[tx.S] = true
		}
		observed := map[string]bool{}
		for _, pn := range pic.tl.Panels {
			observed[string(pn.Signal)] = true
		}
		kc := pic.s.KubeletConfig
		for sig, raw := range kc.EvictionHard {
			if !observed[sig] || raw == "0%" || raw == "100%" {
				continue
			}
			checked++
			if want := sig + "<" + raw; !has[want] {
				t.Errorf("%s: no legend entry %q (the config's own spelling)", pic.name, want)
			}
		}
		for sig, raw := range kc.EvictionSoft {
			grace := kc.EvictionSoftGracePeriod[sig]
			if !observed[sig] || raw == "0%" || raw == "100%" {
				continue
			}
			checked++
			want := sig + "<" + raw + " (soft, " + grace + ")"
			if d, err := time.ParseDuration(grace); err == nil && d == 0 {
				want = sig + "<" + raw // a soft threshold without grace is hard
			}
			if !has[want] {
				t.Errorf("%s: no legend entry %q (the config's own spelling)", pic.name, want)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d thresholds checked", checked)
	}
}

// TestChartOneStepIsReadable: a scenario of one step has no time to draw;
// its values, thresholds and conditions go across the panel instead of
// being stubs a few pixels wide.
func TestChartOneStepIsReadable(t *testing.T) {
	cases := 0
	for _, pic := range scenarioPictures(t) {
		if len(pic.s.Steps) != 1 {
			continue
		}
		cases++
		doc := parseSVG(t, pic.svg)
		// The data area's width: the longest horizontal grid line.
		width := 0.0
		for _, p := range doc.Paths {
			if b := bounds(p); p.Stroke == "#808080" && b.y0 == b.y1 {
				width = math.Max(width, b.x1-b.x0)
			}
		}
		if width == 0 {
			if len(pic.tl.Panels) > 0 {
				t.Errorf("%s: no grid", pic.name)
			}
			continue // no panel: nothing observed
		}
		for _, p := range doc.Paths {
			b := bounds(p)
			series := p.Fill == "none" && (p.Stroke == hexOf(chart.ObservedColor) || p.Stroke == "#D62728")
			band := false
			for _, c := range chart.ConditionColor {
				band = band || p.Fill == hexOf(c)
			}
			// Legend thumbnails are 20 points wide; anything of the
			// series or band colors wider than that is in a panel.
			if (series || band) && b.x1-b.x0 > 25 && b.x1-b.x0 < width*0.9 {
				t.Errorf("%s: a %s%s %.0f points wide in a panel %.0f wide: the only step is a stub", pic.name, p.Stroke, p.Fill, b.x1-b.x0, width)
			}
			if (series || band) && b.x1-b.x0 <= 25 && b.x1-b.x0 > 0 && !inLegend(doc, b) {
				t.Errorf("%s: a stub %.0f points wide", pic.name, b.x1-b.x0)
			}
		}
	}
	if cases < 10 {
		t.Errorf("%d one-step scenarios, the corpus has more", cases)
	}
}

// inLegend reports whether b is in the legend column: right of every grid
// line.
func inLegend(doc svgDoc, b box) bool {
	right := math.Inf(-1)
	for _, p := range doc.Paths {
		if p.Stroke == "#808080" {
			right = math.Max(right, bounds(p).x1)
		}
	}
	return b.x0 > right
}
