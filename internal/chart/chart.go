// Package chart draws a timeline.Timeline with gonum.org/v1/plot: one panel
// per signal that has a threshold (the available amount against each
// threshold's quantity, soft thresholds dashed and their grace periods
// shaded, each eviction a marker labelled with the pod and the reason), and
// a strip of the node conditions as bands, all on one time axis. SVG or PNG.
//
// The picture draws samples as what they are: a value holds from its sample
// to the next one (a step, never a ramp between two samples), and each
// sample is a dot while they are few enough to tell apart. Labels are
// placed where they collide with no other label, no marker and no band, and
// stay inside their panel; one that finds no room is left out and the
// panel's title says how many were.
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"codeberg.org/go-fonts/dejavu/dejavusans"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/safetext"
	"github.com/evictd/evictd/internal/timeline"
)

// Format is an output format.
type Format string

// The formats Write produces.
const (
	SVG Format = "svg"
	PNG Format = "png"
)

// FormatOf picks the format by the file name's extension.
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	}
	return "", fmt.Errorf("%s: want a file name ending in .svg or .png", path)
}

// XAxis says how the time axis is labelled.
type XAxis struct {
	// Steps are the X (seconds after the origin) of a scenario's steps: the
	// ticks sit on them, labelled as durations ("1m30s"), when there are
	// few enough; else the ticks are evenly spaced durations.
	Steps []float64
	// Clock labels the ticks with the wall-clock time (UTC) instead.
	Clock bool
}

// Options tune Write.
type Options struct {
	Title string
	X     XAxis
	// MaxLabels is the most eviction labels drawn in one panel; past it only
	// the markers are drawn and the panel's title says so (0: 40).
	MaxLabels int
	// Width of the picture (0: DefaultWidth). The report draws wider, as
	// wide as a page, so that its time axis has room.
	Width vg.Length
}

// DefaultWidth is the width of `simulate --plot`'s pictures.
const DefaultWidth = 10 * vg.Inch

// Colors. MarkerColor is used for nothing but eviction markers, so a reader
// of the SVG (the tests) can count them by their fill.
var (
	MarkerColor = color.RGBA{R: 0xb0, G: 0x00, B: 0x20, A: 0xff}
	// ObservedColor draws the observed available amount: its steps and its
	// sample dots.
	ObservedColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	graceColor    = color.NRGBA{R: 0xff, G: 0xa0, B: 0x30, A: 0x48}
	// A label's background: text stays readable over a line, which still
	// shows through.
	haloColor = color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xc8}
	// Hard thresholds in reds and purples, soft ones in oranges, so a
	// threshold keeps its color's meaning from panel to panel.
	hardColor = []color.RGBA{
		{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	}
	softColor = []color.RGBA{
		{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
		{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
	}
	// ConditionColor fills each node condition's band.
	ConditionColor = map[string]color.NRGBA{
		"MemoryPressure": {R: 0x1f, G: 0x77, B: 0xb4, A: 0xb0},
		"DiskPressure":   {R: 0x8c, G: 0x56, B: 0x4b, A: 0xb0},
		"PIDPressure":    {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xb0},
	}
	otherConditionColor = color.NRGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xb0}
)

// Sizes.
const (
	panelHeight  = 2.3 * vg.Inch
	rowHeight    = 0.32 * vg.Inch
	stripExtra   = 0.9 * vg.Inch // the strip's axis, title and padding
	titleHeight  = 0.6 * vg.Inch
	margin       = 6 // points left and right of everything
	minLegend    = 1.6 * vg.Inch
	markerRadius = 4.5
	dotRadius    = 1.7
	// LabelSize is the font size (points) of the eviction labels.
	LabelSize = 7.5
	// maxDots: a panel with more samples than this draws the steps alone
	// (dots closer than a few pixels would only thicken the line).
	maxDots = 150
	// pngDPI renders PNGs at twice a screen's 96 dpi: crisp on a high-density
	// screen, and at 96 dpi the rasterizer loses small glyphs such as the
	// period in "memory.available" (kerned into the y at 8 points).
	pngDPI = 192
	// maxLegendShare caps the legend column, as a share of the width.
	maxLegendShare = 0.34
)

// Font is the one typeface of every text: DejaVu Sans, embedded, measured
// by gonum for the layout and named in the SVG. A browser that has it
// (most Linux desktops) draws exactly what was measured; one that lacks it
// falls back to its default font, which is narrower (DejaVu Sans is one of
// the widest common faces), so text laid out not to collide still does not.
var Font = font.Font{Typeface: "DejaVu", Variant: "Sans"}

func init() {
	f, err := opentype.Parse(dejavusans.TTF)
	if err != nil {
		panic(fmt.Sprintf("chart: the embedded DejaVu Sans does not parse: %v", err)) // embedded data: a build defect
	}
	font.DefaultCache.Add(font.Collection{{Font: Font, Face: f}})
}

// TextStyle is the style of a text of the given size in points.
func TextStyle(size float64) text.Style {
	return text.Style{Color: color.Black, Font: font.From(Font, vg.Points(size)), Handler: plot.DefaultTextHandler}
}

// StripTitle is the title of the node-conditions strip.
const StripTitle = "node conditions and evictions"

// UnobservedNote starts the line under the title that lists the signals
// with a threshold but no observation (and so no panel).
const UnobservedNote = "thresholds without observations (no panel): "

// Write draws tl in format f to w.
func Write(w io.Writer, f Format, tl *timeline.Timeline, o Options) error {
	if o.MaxLabels <= 0 {
		o.MaxLabels = 40
	}
	width := o.Width
	if width <= 0 {
		width = DefaultWidth
	}
	rows := stripRows(tl)
	heights, stripH := heightsOf(tl, rows, o, width)
	height := titleHeight + stripH
	for _, h := range heights {
		height += h
	}
	var (
		vc     vg.CanvasWriterTo
		canvas vg.Canvas
	)
	switch f {
	case SVG:
		c := vgsvg.New(width, height)
		vc, canvas = c, c
	case PNG:
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI))
		vc, canvas = vgimg.PngCanvas{Canvas: c}, c
	default:
		return fmt.Errorf("unknown chart format %q", f)
	}
	dc := draw.New(canvas.(vg.CanvasSizer))
	fillBackground(dc)

	// Title.
	tsty := TextStyle(12)
	tsty.XAlign = draw.XCenter
	dc.FillText(tsty, vg.Point{X: width / 2, Y: height - titleHeight/2}, safetext.Escape(o.Title))
	if len(tl.Unobserved) > 0 {
		// A configured threshold without a panel needs a word why.
		names := make([]string, len(tl.Unobserved))
		for i, s := range tl.Unobserved {
			names[i] = string(s)
		}
		nsty := TextStyle(8)
		nsty.XAlign = draw.XCenter
		dc.FillText(nsty, vg.Point{X: width / 2, Y: height - titleHeight*0.8}, UnobservedNote+strings.Join(names, ", "))
	}

	var plots []*plot.Plot
	var legends []legend
	var canvases []draw.Canvas
	var labelled []*marks
	top := height - titleHeight
	for i := range tl.Panels {
		p, lg, mk := panelPlot(tl, i, o)
		plots, legends, labelled = append(plots, p), append(legends, lg), append(labelled, mk)
		canvases = append(canvases, crop(dc, top-heights[i], top))
		top -= heights[i]
	}
	sp, slg, smk := stripPlot(tl, rows, o)
	plots, legends, labelled = append(plots, sp), append(legends, slg), append(labelled, smk)
	canvases = append(canvases, crop(dc, 0, top))

	// Labels are placed before anything is drawn: a panel whose labels do
	// not all fit beside their markers numbers the markers instead and
	// lists the numbers in its legend, which may widen the legend column
	// and so narrow every panel: then the labels are placed again.
	numbered := make([]bool, len(plots))
	var legendWidth vg.Length
	var areas []draw.Canvas
	for attempt := 0; ; attempt++ {
		legendWidth = minLegend
		for i := range legends {
			legendWidth = max(legendWidth, legends[i].width(labelled[i], numbered[i], width*maxLegendShare))
		}
		areas = make([]draw.Canvas, len(canvases))
		for i, c := range canvases {
			areas[i] = draw.Crop(c, vg.Points(margin), -legendWidth, 0, 0)
		}
		alignX(plots, areas)
		changed := false
		for i, p := range plots {
			mk := labelled[i]
			if mk == nil || !mk.labels {
				continue
			}
			mk.place(p.DataCanvas(areas[i]), p, numbered[i])
			if mk.left > 0 && !numbered[i] {
				numbered[i], changed = true, true
			}
		}
		if !changed || attempt == 2 {
			break
		}
	}
	for i, p := range plots {
		if mk := labelled[i]; mk != nil && mk.left > 0 {
			p.Title.Text += fmt.Sprintf(" — %d of %d labels left out (no room)", mk.left, len(mk.ms))
		}
		c := canvases[i]
		legends[i].draw(draw.Crop(c, width-legendWidth+vg.Points(legendInset), -vg.Points(margin), vg.Points(legendBottom), 0), labelled[i], numbered[i])
		p.Draw(areas[i])
	}
	_, err := vc.WriteTo(w)
	return err
}

// heightsOf is each panel's height and the strip's: a panel is taller than
// panelHeight when its legend could not otherwise list every marker by
// number (see marks.place), the strip is as tall as its rows need.
func heightsOf(tl *timeline.Timeline, rows []string, o Options, width vg.Length) ([]vg.Length, vg.Length) {
	line := legendLine()
	cap := width * maxLegendShare
	// The lines of a legend with every marker numbered: its entries (only
	// their count matters: they fit the column), then each label.
	need := func(entries int, ms []timeline.Marker) vg.Length {
		es := make([]entry, entries, entries+len(ms))
		for i := range ms {
			es = append(es, entry{text: label(ms[i]), marker: &ms[i]})
		}
		return line*vg.Length(legendLines(es, cap)) + vg.Points(legendBottom+6)
	}
	hs := make([]vg.Length, len(tl.Panels))
	for i, pn := range tl.Panels {
		var ms []timeline.Marker
		for _, m := range tl.Evictions {
			if m.Panel == i {
				ms = append(ms, m)
			}
		}
		hs[i] = panelHeight
		if len(ms) > 1 && len(ms) <= o.MaxLabels {
			hs[i] = max(hs[i], need(len(pn.Thresholds)+3, ms)) // + observed, grace, eviction
		}
	}
	strip := rowHeight*vg.Length(len(rows)) + stripExtra + stripLabelRoom(tl)
	if ms := stripMarkers(tl); len(ms) > 1 && len(ms) <= o.MaxLabels {
		strip = max(strip, need(1, ms))
	}
	return hs, strip
}

func fillBackground(dc draw.Canvas) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
}

func crop(dc draw.Canvas, minY, maxY vg.Length) draw.Canvas {
	c := dc
	c.Rectangle = vg.Rectangle{Min: vg.Point{X: dc.Min.X, Y: minY}, Max: vg.Point{X: dc.Max.X, Y: maxY}}
	return c
}

// alignX gives every plot the same data area horizontally, so the panels
// share one time axis.
func alignX(plots []*plot.Plot, cs []draw.Canvas) {
	var left, right vg.Length
	lefts, rights := make([]vg.Length, len(plots)), make([]vg.Length, len(plots))
	for i, p := range plots {
		da := p.DataCanvas(cs[i])
		lefts[i], rights[i] = da.Min.X-cs[i].Min.X, cs[i].Max.X-da.Max.X
		left, right = max(left, lefts[i]), max(right, rights[i])
	}
	for i := range cs {
		cs[i] = draw.Crop(cs[i], left-lefts[i], -(right - rights[i]), 0, 0)
	}
}

// single reports whether every sample is at one instant (a one-step
// scenario, a one-record log): there is no time to draw, so the panels
// show that instant across their width.
func single(tl *timeline.Timeline) bool { return tl.End <= 0 }

func newPlot(tl *timeline.Timeline, o Options) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil // the page is white already (and vgsvg cannot write a transparent fill)
	p.Title.TextStyle = TextStyle(10)
	p.Title.TextStyle.XAlign = draw.XCenter
	p.Title.TextStyle.YAlign = draw.YTop
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle = TextStyle(9)
		a.Label.TextStyle.XAlign = draw.XCenter
		a.Tick.Label = TextStyle(8)
	}
	p.Y.Tick.Label.XAlign = draw.XRight
	p.Y.Tick.Label.YAlign = draw.YCenter
	p.X.Tick.Label.XAlign = draw.XCenter
	p.X.Tick.Label.YAlign = draw.YTop
	p.X.Min, p.X.Max = 0, tl.End
	if single(tl) {
		p.X.Min, p.X.Max = -1, 1
	}
	p.X.Tick.Marker = xTicker(tl, o.X)
	return p
}

// panelPlot draws one signal: available, thresholds, grace periods, markers.
func panelPlot(tl *timeline.Timeline, i int, o Options) (*plot.Plot, legend, *marks) {
	pn := &tl.Panels[i]
	p := newPlot(tl, o)
	p.Title.Text = string(pn.Signal)
	p.Y.Label.Text = YLabel(pn.Signal, pn.Unit)
	var lg legend
	one := single(tl)

	var graces []timeline.Interval
	for _, th := range pn.Thresholds {
		graces = append(graces, th.Grace...)
	}
	if len(graces) > 0 {
		p.Add(&spans{iv: graces, color: graceColor, single: one})
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	seen := func(pts []plotter.XY) {
		for _, pt := range pts {
			ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
		}
	}
	var lines []plotter.XYs // the steps drawn, which labels keep clear of
	nHard, nSoft := 0, 0
	for _, th := range pn.Thresholds {
		sty := draw.LineStyle{Color: hardColor[nHard%len(hardColor)], Width: vg.Points(1.6)}
		if th.Soft {
			sty.Color = softColor[nSoft%len(softColor)]
			sty.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
			nSoft++
		} else {
			nHard++
		}
		pts, alone, ls := addSteps(p, th.Quantity, sty, one)
		lines = append(lines, ls...)
		if len(alone) > 0 {
			p.Add(&dashes{pts: alone, sty: sty})
		}
		seen(pts)
		lg.add(safetext.Escape(th.Label), lineThumb(sty, false))
	}
	avail := draw.LineStyle{Color: ObservedColor, Width: vg.Points(1.4)}
	pts, alone, ls := addSteps(p, pn.Available, avail, one)
	lines = append(lines, ls...)
	seen(pts)
	dots := len(pts) <= maxDots
	if !dots {
		pts = alone // a sample between two gaps has no step to show it
	}
	if len(pts) > 0 {
		p.Add(&sampleDots{pts: pts, single: one})
	}
	lg.add(string(pn.Signal)+" (observed)", lineThumb(avail, dots))
	if len(graces) > 0 {
		lg.add("grace period", boxThumb(graceColor))
	}
	var ms []timeline.Marker
	for _, m := range tl.Evictions {
		if m.Panel == i {
			ms = append(ms, m)
			ymin, ymax = math.Min(ymin, m.Y), math.Max(ymax, m.Y)
		}
	}
	var mk *marks
	if len(ms) > 0 {
		mk = &marks{ms: ms, labels: len(ms) <= o.MaxLabels, y: func(m timeline.Marker) float64 { return m.Y }, lines: lines}
		p.Add(mk)
		lg.add("eviction (pod, reason)", glyphThumb())
		if !mk.labels {
			p.Title.Text += fmt.Sprintf(" — %d evictions (labels left out; see the table)", len(ms))
		}
	}
	if !math.IsInf(ymin, 0) {
		// Every value is in range (a negative available amount too: the
		// kubelet's arithmetic can give one), with room above for labels.
		span := ymax - ymin
		if span == 0 {
			span = math.Max(math.Abs(ymax)*0.2, 1)
			ymin, ymax = ymin-span/2, ymax+span/2
		}
		p.Y.Min, p.Y.Max = ymin-span*0.1, ymax+span*0.25
	}
	p.Y.Tick.Marker = YTicker{Unit: pn.Unit}
	p.Add(plotter.NewGrid())
	return p, lg, mk
}

// addSteps adds a series as steps: each value holds from its sample to the
// next one, the way the kubelet's state holds between synchronizes. A gap
// in the data is a gap in the line. It returns the points, and those that
// stand alone in their segment (no next sample to hold until). At a single
// instant each value is drawn across the panel.
func addSteps(p *plot.Plot, segs [][]timeline.Point, sty draw.LineStyle, single bool) (all, alone []plotter.XY, lines []plotter.XYs) {
	for _, s := range segs {
		xys := make(plotter.XYs, 0, len(s))
		for _, pt := range s {
			if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
		}
		all = append(all, xys...)
		switch {
		case len(xys) == 0:
		case single:
			for _, xy := range xys {
				l := plotter.XYs{{X: p.X.Min, Y: xy.Y}, {X: p.X.Max, Y: xy.Y}}
				p.Add(&plotter.Line{XYs: l, LineStyle: sty})
				lines = append(lines, l)
			}
		case len(xys) == 1:
			alone = append(alone, xys[0])
		default:
			p.Add(&plotter.Line{XYs: xys, LineStyle: sty, StepStyle: plotter.PostStep})
			lines = append(lines, xys)
		}
	}
	return all, alone, lines
}

// sampleDots marks each sample of the observed series.
type sampleDots struct {
	pts    []plotter.XY
	single bool
}

func (d *sampleDots) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	sty := draw.GlyphStyle{Color: ObservedColor, Radius: vg.Points(dotRadius), Shape: draw.CircleGlyph{}}
	for _, pt := range d.pts {
		x := tx(pt.X)
		if d.single {
			x = c.Center().X
		}
		c.DrawGlyphNoClip(sty, vg.Point{X: x, Y: ty(pt.Y)})
	}
}

// dashes draws a threshold's lone samples (before a gap) as short dashes.
type dashes struct {
	pts []plotter.XY
	sty draw.LineStyle
}

func (d *dashes) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	sty := d.sty
	sty.Dashes = nil
	for _, pt := range d.pts {
		x, y := tx(pt.X), ty(pt.Y)
		c.StrokeLine2(sty, x-vg.Points(3), y, x+vg.Points(3), y)
	}
}

// YLabel names a panel's y axis with its unit.
func YLabel(sig policy.Signal, u timeline.Unit) string {
	switch u {
	case timeline.Percent:
		return "available (% of capacity)"
	case timeline.Count:
		if r, _ := policy.ResourceFor(sig); r == policy.ResourcePIDs {
			return "available PIDs (count)"
		}
		return "free inodes (count)"
	}
	return "available (bytes)"
}

// stripRows are the strip's rows, top to bottom: the conditions, and
// "evictions" when some eviction has no panel of its own.
func stripRows(tl *timeline.Timeline) []string {
	var rows []string
	for _, b := range tl.Conditions {
		rows = append(rows, b.Condition)
	}
	if len(stripMarkers(tl)) > 0 {
		rows = append(rows, "evictions")
	}
	if len(rows) == 0 { // an axis needs a row
		rows = append(rows, "no conditions")
	}
	return rows
}

func stripMarkers(tl *timeline.Timeline) []timeline.Marker {
	var ms []timeline.Marker
	for _, m := range tl.Evictions {
		if m.Panel < 0 {
			ms = append(ms, m)
		}
	}
	return ms
}

// stripLabelRoom is the height added below the strip's evictions row, so
// that labels of evictions at the same time can stack without covering
// the condition bands.
func stripLabelRoom(tl *timeline.Timeline) vg.Length {
	n := len(stripMarkers(tl))
	if n <= 1 {
		return 0
	}
	h := TextStyle(LabelSize).FontExtents().Height
	return h * vg.Length(min(n, maxLabelLevels))
}

func stripPlot(tl *timeline.Timeline, rows []string, o Options) (*plot.Plot, legend, *marks) {
	p := newPlot(tl, o)
	p.Title.Text = StripTitle
	p.X.Label.Text = xLabel(tl, o.X)
	n := len(rows)
	// Row r (from the top) is drawn at y = n-1-r.
	names := make([]string, n)
	for r, name := range rows {
		names[n-1-r] = name
	}
	p.NominalY(names...)
	p.Y.Tick.Label = TextStyle(8)
	p.Y.Tick.Label.XAlign = draw.XRight
	p.Y.Tick.Label.YAlign = draw.YCenter
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	if extra := stripLabelRoom(tl); extra > 0 {
		p.Y.Min -= float64(extra / rowHeight)
	}
	var lg legend
	var bands []*spans
	for r, b := range tl.Conditions {
		clr, ok := ConditionColor[b.Condition]
		if !ok {
			clr = otherConditionColor
		}
		s := &spans{iv: b.On, color: clr, y: float64(n - 1 - r), half: 0.32, single: single(tl)}
		bands = append(bands, s)
		p.Add(s)
	}
	ms := stripMarkers(tl)
	var mk *marks
	if len(ms) > 0 {
		row := 0.0 // "evictions" is the last row, drawn at y = 0
		mk = &marks{ms: ms, labels: len(ms) <= o.MaxLabels, y: func(timeline.Marker) float64 { return row }, bands: bands}
		p.Add(mk)
		lg.add("eviction (pod, reason)", glyphThumb())
	}
	return p, lg, mk
}

func xLabel(tl *timeline.Timeline, x XAxis) string {
	switch {
	case single(tl) && x.Clock:
		return "one record, at " + tl.Origin.UTC().Format(time.RFC3339) + " (UTC): drawn across the width"
	case single(tl):
		at := 0.0
		if len(x.Steps) > 0 {
			at = x.Steps[0]
		}
		return "one step, at " + fmtDuration(at) + ": drawn across the width"
	case x.Clock:
		return "time (UTC) from " + tl.Origin.UTC().Format(time.RFC3339)
	}
	return "time since the scenario's start"
}

// spans fills intervals: the full height of the data area, or a band of
// ±half around y when half > 0. At a single instant an interval that holds
// it fills the width.
type spans struct {
	iv     []timeline.Interval
	color  color.Color
	y      float64
	half   float64
	single bool
}

func (s *spans) rects(c draw.Canvas, p *plot.Plot) []box {
	tx, ty := p.Transforms(&c)
	lo, hi := c.Min.Y, c.Max.Y
	if s.half > 0 {
		lo, hi = ty(s.y-s.half), ty(s.y+s.half)
	}
	var out []box
	for _, iv := range s.iv {
		x0, x1 := tx(iv.From), tx(iv.To)
		if s.single && iv.From <= 0 && iv.To >= 0 {
			x0, x1 = c.Min.X, c.Max.X
		}
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1-x0 < vg.Points(2) { // a one-sample interval still shows
			x1 = x0 + vg.Points(2)
		}
		out = append(out, box{x0, lo, x1, hi})
	}
	return out
}

func (s *spans) Plot(c draw.Canvas, p *plot.Plot) {
	for _, b := range s.rects(c, p) {
		pts := []vg.Point{{X: b.x0, Y: b.y0}, {X: b.x1, Y: b.y0}, {X: b.x1, Y: b.y1}, {X: b.x0, Y: b.y1}}
		c.FillPolygon(s.color, c.ClipPolygonXY(pts))
	}
}

// box is a rectangle on the canvas.
type box struct{ x0, y0, x1, y1 vg.Length }

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

func (a box) inside(c draw.Canvas) bool {
	return a.x0 >= c.Min.X && a.x1 <= c.Max.X && a.y0 >= c.Min.Y && a.y1 <= c.Max.Y
}

// marks draws eviction markers, labelled "namespace/name (reason)" when
// labels is set.
type marks struct {
	ms     []timeline.Marker
	labels bool
	y      func(timeline.Marker) float64
	bands  []*spans      // the strip's condition bands, which labels keep clear of
	lines  []plotter.XYs // a panel's steps (post-step polylines), which labels keep clear of

	placed   bool
	numbered bool
	order    []int      // indexes of ms in time order
	at       []vg.Point // per marker, after place
	texts    []placedText
	left     int // labels that found no room
}

type placedText struct {
	text string
	at   vg.Point // the start of the baseline
	b    box
}

// Label geometry, in points.
const (
	labelGap = 2   // between a label and its marker
	labelPad = 1.5 // kept clear around a label
)

// maxLabelLevels is how many lines above or below a marker its label may
// move to find room.
const maxLabelLevels = 8

// place positions the markers and their labels on the data canvas c. The
// markers of evictions at the same time and value (one synchronize
// evicting several pods for local-storage limits) sit side by side, so
// each shows. A label goes to the first of its candidate places that is
// inside the panel and overlaps no label, marker or band: beside its
// marker (right, left, just above or below). When one does not fit there,
// the caller asks again with numbered set: each marker is then labelled
// with its number in time order, placed the same way with more lines to
// move to, and the legend lists the numbers.
func (m *marks) place(c draw.Canvas, p *plot.Plot, numbered bool) {
	m.placed, m.numbered, m.texts, m.left = true, numbered, nil, 0
	tx, ty := p.Transforms(&c)
	m.order = make([]int, len(m.ms))
	for i := range m.order {
		m.order[i] = i
	}
	sort.SliceStable(m.order, func(a, b int) bool { return m.ms[m.order[a]].X < m.ms[m.order[b]].X })
	r := vg.Points(markerRadius)
	m.at = make([]vg.Point, len(m.ms))
	type key struct{ x, y int64 }
	groups := map[key][]int{}
	var keys []key
	for _, i := range m.order {
		pt := vg.Point{X: tx(m.ms[i].X), Y: ty(m.y(m.ms[i]))}
		if p.X.Min < 0 && p.X.Min == -p.X.Max { // a single instant: the middle
			pt.X = c.Center().X
		}
		pt.Y = max(min(pt.Y, c.Max.Y-r), c.Min.Y+r)
		k := key{int64(math.Round(float64(pt.X))), int64(math.Round(float64(pt.Y)))}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
		m.at[i] = pt
	}
	for _, k := range keys {
		g := groups[k]
		if len(g) == 1 {
			continue
		}
		// Side by side around the point, kept inside the panel.
		stepX := 2*r + vg.Points(1)
		first := m.at[g[0]].X - vg.Length(len(g)-1)/2*stepX
		first = max(min(first, c.Max.X-vg.Length(len(g)-1)*stepX), c.Min.X)
		for j, i := range g {
			m.at[i].X = first + vg.Length(j)*stepX
		}
	}
	if !m.labels {
		return
	}
	var obstacles []box
	for _, pt := range m.at {
		obstacles = append(obstacles, box{pt.X - r, pt.Y - r, pt.X + r, pt.Y + r})
	}
	for _, s := range m.bands {
		obstacles = append(obstacles, s.rects(c, p)...)
	}
	// A step line is horizontal and vertical segments: boxes, exactly.
	half := vg.Points(1)
	for _, l := range m.lines {
		for j := 1; j < len(l); j++ {
			x0, x1, y0, y1 := tx(l[j-1].X), tx(l[j].X), ty(l[j-1].Y), ty(l[j].Y)
			obstacles = append(obstacles,
				box{min(x0, x1) - half, y0 - half, max(x0, x1) + half, y0 + half},
				box{x1 - half, min(y0, y1) - half, x1 + half, max(y0, y1) + half})
		}
	}
	sty := TextStyle(LabelSize)
	e := sty.FontExtents()
	h := e.Ascent + e.Descent
	pad := vg.Points(labelPad)
	gap := vg.Points(labelGap)
	levels := 1
	if numbered {
		levels = maxLabelLevels
	}
	for n, i := range m.order {
		txt := label(m.ms[i])
		if numbered {
			txt = strconv.Itoa(n + 1)
		}
		w := sty.Width(txt)
		pt := m.at[i]
		// Candidate lower-left corners of the text's box: beside the
		// marker, then a line above or below it, starting near it,
		// centered on it or ending at it (a marker at an edge of the
		// panel has room on one side only).
		side := []vg.Point{{X: pt.X + r + gap, Y: pt.Y - h/2}, {X: pt.X - r - gap - w, Y: pt.Y - h/2}}
		xs := []vg.Length{pt.X - r, pt.X - w/2, pt.X + r - w, pt.X + pad, pt.X - w - pad, pt.X + r, pt.X - r - w}
		if numbered {
			xs = []vg.Length{pt.X - w/2, pt.X + pad, pt.X - w - pad, pt.X + r, pt.X - r - w}
		}
		cands := side
		for k := 0; k < levels; k++ {
			up := pt.Y + r + gap + vg.Length(k)*(h+2*pad)
			down := pt.Y - r - gap - h - vg.Length(k)*(h+2*pad)
			for _, y := range []vg.Length{up, down} {
				for _, x := range xs {
					cands = append(cands, vg.Point{X: x, Y: y})
				}
			}
		}
		ok := false
		for _, ll := range cands {
			b := box{ll.X - pad, ll.Y - pad, ll.X + w + pad, ll.Y + h + pad}
			if !b.inside(c) || hits(b, obstacles) || hitsText(b, m.texts) {
				continue
			}
			m.texts = append(m.texts, placedText{text: txt, at: vg.Point{X: ll.X, Y: ll.Y + e.Descent}, b: b})
			ok = true
			break
		}
		if !ok {
			m.left++
		}
	}
}

func hits(b box, bs []box) bool {
	for _, o := range bs {
		if b.overlaps(o) {
			return true
		}
	}
	return false
}

func hitsText(b box, ts []placedText) bool {
	for _, t := range ts {
		if b.overlaps(t.b) {
			return true
		}
	}
	return false
}

func (m *marks) Plot(c draw.Canvas, p *plot.Plot) {
	if !m.placed {
		m.place(c, p, false)
	}
	gs := markerStyle()
	for _, pt := range m.at {
		c.DrawGlyphNoClip(gs, pt)
	}
	sty := TextStyle(LabelSize)
	e := sty.FontExtents()
	for _, t := range m.texts {
		b := t.b
		c.FillPolygon(haloColor, []vg.Point{{X: b.x0, Y: b.y0}, {X: b.x1, Y: b.y0}, {X: b.x1, Y: b.y1}, {X: b.x0, Y: b.y1}})
		// FillText puts the baseline Size-Ascent above the point it is given.
		c.FillText(sty, vg.Point{X: t.at.X, Y: t.at.Y - (sty.Font.Size - e.Ascent)}, t.text)
	}
}

// label is the marker's text: the pod and why it was evicted.
func label(m timeline.Marker) string {
	pod := safetext.Escape(m.Pod)
	if len(pod) > 60 {
		pod = pod[:57] + "..."
	}
	return pod + " (" + safetext.Escape(m.Reason) + ")"
}

func markerStyle() draw.GlyphStyle {
	return draw.GlyphStyle{Color: MarkerColor, Radius: vg.Points(markerRadius), Shape: draw.PyramidGlyph{}}
}

// legend is a panel's key, in the column right of the panels.
type legend struct{ entries []entry }

type entry struct {
	text   string
	thumb  plot.Thumbnailer
	marker *timeline.Marker // a numbered marker's entry
}

func (l *legend) add(text string, t plot.Thumbnailer) {
	l.entries = append(l.entries, entry{text: text, thumb: t})
}

// Legend geometry, in points.
const (
	legendSize  = 8
	thumbWidth  = 20
	legendGap   = 4 // thumbnail to text
	legendSpace = 2.5
	// legendInset and legendBottom: the legend column starts this far
	// right of the panels, and stops this far above a panel's bottom.
	legendInset  = 8
	legendBottom = 18
)

// all is the legend's entries, and when the markers are numbered one per
// marker: its number and label.
func (l *legend) all(mk *marks, numbered bool) []entry {
	es := l.entries
	if numbered && mk != nil {
		es = append([]entry(nil), es...)
		for n, i := range mk.order {
			es = append(es, entry{text: label(mk.ms[i]), thumb: numberThumb(n + 1), marker: &mk.ms[i]})
		}
	}
	return es
}

// width is the column the legend needs: its longest text, as long as that
// is within cap (the column's widest; longer texts are wrapped or cut).
func (l *legend) width(mk *marks, numbered bool, cap vg.Length) vg.Length {
	sty := TextStyle(legendSize)
	var w vg.Length
	for _, e := range l.all(mk, numbered) {
		w = max(w, sty.Width(e.text))
	}
	return min(w+legendExtra, cap)
}

// legendLine is the height of one legend line.
func legendLine() vg.Length {
	e := TextStyle(legendSize).FontExtents()
	return e.Ascent + e.Descent + vg.Points(legendSpace)
}

// legendExtra is the legend column's width besides its text.
const legendExtra = vg.Length(legendInset + thumbWidth + legendGap + margin + 2)

// lines is the text lines of an entry in a column whose text is w wide: a
// marker's label that does not fit is the pod on one line and the reason
// on the next, each cut to fit; any other text is one line, cut to fit.
func (e entry) lines(sty text.Style, w vg.Length) []string {
	if sty.Width(e.text) <= w {
		return []string{e.text}
	}
	if e.marker == nil {
		return []string{fit(sty, e.text, w)}
	}
	return []string{fitMiddle(sty, safetext.Escape(e.marker.Pod), w), fit(sty, "("+safetext.Escape(e.marker.Reason)+")", w)}
}

// legendLines is how many lines the legend takes in a column of width cap.
func legendLines(es []entry, cap vg.Length) int {
	sty := TextStyle(legendSize)
	n := 0
	for _, e := range es {
		n += len(e.lines(sty, cap-legendExtra))
	}
	return n
}

// draw lists the entries from the top of c, texts cut or wrapped to the
// column's width; past the column's height the last line says how many
// entries are left.
func (l *legend) draw(c draw.Canvas, mk *marks, numbered bool) {
	sty := TextStyle(legendSize)
	e := sty.FontExtents()
	lineH := legendLine()
	textX := c.Min.X + vg.Points(thumbWidth+legendGap)
	tw := c.Max.X - textX
	es := l.all(mk, numbered)
	room := int((c.Max.Y - c.Min.Y) / lineH)
	y := c.Max.Y
	// FillText puts the baseline Size-Ascent above the point it is given.
	lift := e.Descent - (sty.Font.Size - e.Ascent)
	for k, en := range es {
		lines := en.lines(sty, tw)
		rest := len(es) - k
		if room < len(lines) || rest > 1 && room < len(lines)+1 {
			c.FillText(sty, vg.Point{X: textX, Y: y - lineH + lift}, fmt.Sprintf("… %d more not listed", rest))
			return
		}
		room -= len(lines)
		for j, txt := range lines {
			y -= lineH
			if j == 0 && en.thumb != nil {
				icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: y}, Max: vg.Point{X: c.Min.X + vg.Points(thumbWidth), Y: y + e.Ascent + e.Descent}}}
				en.thumb.Thumbnail(&icon)
			}
			c.FillText(sty, vg.Point{X: textX, Y: y + lift}, txt)
		}
	}
}

// fit cuts txt to width w, ending it with "…" when cut.
func fit(sty text.Style, txt string, w vg.Length) string {
	if sty.Width(txt) <= w {
		return txt
	}
	rs := []rune(txt)
	for len(rs) > 0 && sty.Width(string(rs)+"…") > w {
		rs = rs[:len(rs)-1]
	}
	return string(rs) + "…"
}

// fitMiddle cuts txt to width w in its middle, which keeps both ends of a
// pod's name (a pod's name differs from its siblings' at its end).
func fitMiddle(sty text.Style, txt string, w vg.Length) string {
	if sty.Width(txt) <= w {
		return txt
	}
	rs := []rune(txt)
	for cut := 1; cut < len(rs); cut++ {
		head := (len(rs) - cut + 1) / 2
		s := string(rs[:head]) + "…" + string(rs[head+cut:])
		if sty.Width(s) <= w {
			return s
		}
	}
	return "…"
}

// numberThumb shows a marker's number in the legend.
func numberThumb(n int) plot.Thumbnailer {
	return thumb(func(c *draw.Canvas) {
		sty := TextStyle(LabelSize)
		sty.XAlign = draw.XRight
		sty.YAlign = draw.YCenter
		c.FillText(sty, vg.Point{X: c.Max.X, Y: c.Center().Y}, strconv.Itoa(n))
	})
}

type thumb func(c *draw.Canvas)

func (t thumb) Thumbnail(c *draw.Canvas) { t(c) }

func lineThumb(sty draw.LineStyle, dot bool) plot.Thumbnailer {
	return thumb(func(c *draw.Canvas) {
		y := c.Center().Y
		c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
		if dot {
			c.DrawGlyphNoClip(draw.GlyphStyle{Color: sty.Color, Radius: vg.Points(dotRadius), Shape: draw.CircleGlyph{}}, c.Center())
		}
	})
}

func boxThumb(clr color.Color) plot.Thumbnailer {
	return thumb(func(c *draw.Canvas) {
		c.FillPolygon(clr, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
	})
}

// glyphThumb draws the marker in the legend in another color than the
// markers themselves, so that counting the marker color counts evictions.
func glyphThumb() plot.Thumbnailer {
	return thumb(func(c *draw.Canvas) {
		gs := markerStyle()
		gs.Color = color.RGBA{R: 0xb0, G: 0x00, B: 0x21, A: 0xff}
		c.DrawGlyphNoClip(gs, c.Center())
	})
}

// xTicker labels the time axis.
func xTicker(tl *timeline.Timeline, x XAxis) plot.Ticker {
	return plot.TickerFunc(func(min, max float64) []plot.Tick {
		if single(tl) {
			return []plot.Tick{{Value: 0, Label: ""}}
		}
		if x.Clock {
			return clockTicks(tl.Origin, min, max)
		}
		// A tick on every step; labels on those at least a twelfth of
		// the axis apart, so they never overlap.
		steps := uniqueSorted(x.Steps)
		if len(steps) > 0 && len(steps) <= 60 {
			ts := make([]plot.Tick, len(steps))
			last := math.Inf(-1)
			for i, s := range steps {
				ts[i] = plot.Tick{Value: s}
				if s-last >= (max-min)/12 {
					ts[i].Label = fmtDuration(s)
					last = s
				}
			}
			return ts
		}
		var ts []plot.Tick
		step := niceStep(max-min, 8)
		for k := math.Ceil(min / step); k*step <= max+step*1e-9; k++ {
			ts = append(ts, plot.Tick{Value: k * step, Label: fmtDuration(k * step)})
		}
		return ts
	})
}

func uniqueSorted(xs []float64) []float64 {
	out := append([]float64(nil), xs...)
	sort.Float64s(out)
	j := 0
	for i, x := range out {
		if i == 0 || x != out[j-1] {
			out[j] = x
			j++
		}
	}
	return out[:j]
}

func fmtDuration(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	if d >= time.Second || d <= -time.Second {
		d = d.Round(time.Second)
	}
	return timeline.FormatDuration(d)
}

// clockTicks puts ticks on round wall-clock times.
func clockTicks(origin time.Time, min, max float64) []plot.Tick {
	span := max - min
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800}
	// Labels with a date are twice as wide: half as many of them.
	most := 8.0
	if span >= 86400 {
		most = 4
	}
	step := 0.0
	for _, s := range steps {
		if span/s <= most {
			step = s
			break
		}
	}
	if step == 0 { // more than a few weeks: whole days, a 1-2-5 multiple
		step = niceStep(span/86400, most) * 86400
		step = math.Max(step, 86400)
	}
	layout := "15:04:05"
	switch {
	case step >= 365*86400:
		layout = "2006-01-02"
	case step >= 86400:
		layout = "Jan 2"
	case span >= 86400:
		layout = "Jan 2 15:04"
	case step >= 60:
		layout = "15:04"
	}
	o := float64(origin.UnixNano()) / 1e9
	first := math.Ceil((o+min)/step) * step
	var ts []plot.Tick
	for v := first; v <= o+max+1e-9; v += step {
		t := time.Unix(0, int64(v*1e9)).UTC()
		ts = append(ts, plot.Tick{Value: v - o, Label: t.Format(layout)})
	}
	return ts
}

// niceStep is a 1, 2 or 5 times a power of ten that cuts span into at most
// about n parts.
func niceStep(span, n float64) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / n
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// YTicker labels a panel's values in the kubelet's quantities, every tick
// in one unit: Ki, Mi or Gi for bytes (by the axis' largest value), counts
// as plain numbers or in k or M, "%" for percentages; ticks are the
// multiples of a 1, 2 or 5 step in that unit.
type YTicker struct{ Unit timeline.Unit }

// Ticks implements plot.Ticker.
func (t YTicker) Ticks(min, max float64) []plot.Tick {
	div, suffix := Scale(t.Unit, math.Max(math.Abs(min), math.Abs(max)))
	lo, hi := min/div, max/div
	step := niceStep(hi-lo, 6)
	decimals := max0(-int(math.Floor(math.Log10(step) + 1e-9)))
	var ts []plot.Tick
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		v := k * step
		if math.Abs(v) < step*1e-9 {
			v = 0 // not "-0"
		}
		ts = append(ts, plot.Tick{Value: v * div, Label: strconv.FormatFloat(v, 'f', decimals, 64) + suffix})
	}
	return ts
}

func max0(n int) int { return max(n, 0) }

// Scale is the divisor and suffix a unit's values are shown in, chosen by
// the largest absolute value shown: bytes in Gi from 1Gi, Mi from 1Mi, Ki
// from 1Ki; counts plain below 100k, in k below 100M, else M.
func Scale(u timeline.Unit, maxAbs float64) (float64, string) {
	switch u {
	case timeline.Percent:
		return 1, "%"
	case timeline.Count:
		switch {
		case maxAbs >= 1e8:
			return 1e6, "M"
		case maxAbs >= 1e5:
			return 1e3, "k"
		}
		return 1, ""
	}
	switch {
	case maxAbs >= 1<<30:
		return 1 << 30, "Gi"
	case maxAbs >= 1<<20:
		return 1 << 20, "Mi"
	case maxAbs >= 1<<10:
		return 1 << 10, "Ki"
	}
	return 1, ""
}
