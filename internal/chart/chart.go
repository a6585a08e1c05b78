// Package chart draws a timeline.Timeline with gonum.org/v1/plot: one panel
// per signal that has a threshold (the available amount against each
// threshold's quantity, soft thresholds dashed and their grace periods
// shaded, each eviction a marker labelled with the pod and the reason), and
// a strip of the node conditions as bands, all on one time axis. SVG or PNG.
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
	"k8s.io/apimachinery/pkg/api/resource"

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
	// ticks sit on them, labelled as Go durations ("1m30s"), when there are
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
}

// Colors. MarkerColor is used for nothing but eviction markers, so a reader
// of the SVG (the tests) can count them by their fill.
var (
	MarkerColor    = color.RGBA{R: 0xb0, G: 0x00, B: 0x20, A: 0xff}
	availableColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	graceColor     = color.NRGBA{R: 0xff, G: 0xa0, B: 0x30, A: 0x48}
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
	conditionColor = map[string]color.NRGBA{
		"MemoryPressure": {R: 0x1f, G: 0x77, B: 0xb4, A: 0xb0},
		"DiskPressure":   {R: 0x8c, G: 0x56, B: 0x4b, A: 0xb0},
		"PIDPressure":    {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xb0},
	}
	otherConditionColor = color.NRGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xb0}
)

// Sizes.
const (
	width        = 10 * vg.Inch
	panelHeight  = 2.3 * vg.Inch
	rowHeight    = 0.32 * vg.Inch
	stripExtra   = 0.9 * vg.Inch // the strip's axis, title and padding
	titleHeight  = 0.6 * vg.Inch
	minLegend    = 2 * vg.Inch
	markerRadius = 4.5
	labelSize    = 8
)

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
	rows := stripRows(tl)
	stripH := rowHeight*vg.Length(len(rows)) + stripExtra
	height := titleHeight + panelHeight*vg.Length(len(tl.Panels)) + stripH
	var (
		vc     vg.CanvasWriterTo
		canvas vg.Canvas
	)
	switch f {
	case SVG:
		c := vgsvg.New(width, height)
		vc, canvas = c, c
	case PNG:
		c := vgimg.New(width, height)
		vc, canvas = vgimg.PngCanvas{Canvas: c}, c
	default:
		return fmt.Errorf("unknown chart format %q", f)
	}
	dc := draw.New(canvas.(vg.CanvasSizer))
	fillBackground(dc)

	// Title.
	tsty := plot.New().Title.TextStyle
	tsty.XAlign = draw.XCenter
	dc.FillText(tsty, vg.Point{X: width / 2, Y: height - titleHeight/2}, safetext.Escape(o.Title))
	if len(tl.Unobserved) > 0 {
		// A configured threshold without a panel needs a word why.
		names := make([]string, len(tl.Unobserved))
		for i, s := range tl.Unobserved {
			names[i] = string(s)
		}
		nsty := tsty
		nsty.Font.Size = vg.Points(8)
		dc.FillText(nsty, vg.Point{X: width / 2, Y: height - titleHeight*0.8}, UnobservedNote+strings.Join(names, ", "))
	}

	var plots []*plot.Plot
	var legends []plot.Legend
	var canvases []draw.Canvas
	top := height - titleHeight
	for i := range tl.Panels {
		p, lg := panelPlot(tl, i, o)
		plots, legends = append(plots, p), append(legends, lg)
		canvases = append(canvases, crop(dc, top-panelHeight, top))
		top -= panelHeight
	}
	sp, slg := stripPlot(tl, rows, o)
	plots, legends = append(plots, sp), append(legends, slg)
	canvases = append(canvases, crop(dc, 0, top))
	// The legends take a column on the right as wide as the longest.
	legendWidth := minLegend
	for i := range legends {
		// A browser may show the SVG in a wider font than gonum measures.
		legendWidth = max(legendWidth, legends[i].Rectangle(dc).Size().X*1.3+vg.Points(12))
	}
	legendWidth = min(legendWidth, width/2)
	for i, c := range canvases {
		canvases[i] = draw.Crop(c, 0, -legendWidth, 0, 0)
		legends[i].Draw(draw.Crop(c, width-legendWidth+vg.Points(8), 0, 0, -vg.Points(18)))
	}
	alignX(plots, canvases)
	for i, p := range plots {
		p.Draw(canvases[i])
	}
	_, err := vc.WriteTo(w)
	return err
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

func newPlot(tl *timeline.Timeline, o Options) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil // the page is white already (and vgsvg cannot write a transparent fill)
	p.X.Min, p.X.Max = 0, tl.End
	if tl.End <= 0 { // one instant: it at the left, room for labels on its right
		p.X.Min, p.X.Max = -0.1, 1
	}
	p.X.Tick.Marker = xTicker(tl, o.X)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	return p
}

// panelPlot draws one signal: available, thresholds, grace periods, markers.
func panelPlot(tl *timeline.Timeline, i int, o Options) (*plot.Plot, plot.Legend) {
	pn := &tl.Panels[i]
	p := newPlot(tl, o)
	p.Title.Text = string(pn.Signal)
	p.Y.Label.Text = yLabel(pn)
	lg := newLegend()

	var graces []timeline.Interval
	for _, th := range pn.Thresholds {
		graces = append(graces, th.Grace...)
	}
	if len(graces) > 0 {
		p.Add(&spans{iv: graces, color: graceColor})
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	seen := func(segs [][]timeline.Point) {
		for _, s := range segs {
			for _, pt := range s {
				ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			}
		}
	}
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
		addLines(p, th.Quantity, sty)
		seen(th.Quantity)
		lg.Add(th.Label, lineThumb(sty))
	}
	avail := draw.LineStyle{Color: availableColor, Width: vg.Points(1.4)}
	addLines(p, pn.Available, avail)
	seen(pn.Available)
	lg.Add(string(pn.Signal)+" (observed)", lineThumb(avail))
	if len(graces) > 0 {
		lg.Add("grace period", boxThumb(graceColor))
	}
	var ms []timeline.Marker
	for _, m := range tl.Evictions {
		if m.Panel == i {
			ms = append(ms, m)
			ymin, ymax = math.Min(ymin, m.Y), math.Max(ymax, m.Y)
		}
	}
	if len(ms) > 0 {
		mk := &marks{ms: ms, labels: len(ms) <= o.MaxLabels, y: func(m timeline.Marker) float64 { return m.Y }}
		p.Add(mk)
		lg.Add("eviction (pod, reason)", glyphThumb())
		if !mk.labels {
			p.Title.Text += fmt.Sprintf(" — %d evictions (labels left out; see the table)", len(ms))
		}
	}
	if !math.IsInf(ymin, 0) {
		pad := (ymax - ymin) * 0.12
		if pad == 0 {
			pad = math.Max(math.Abs(ymax)*0.1, 1)
		}
		p.Y.Min, p.Y.Max = ymin-pad, ymax+pad*1.5 // room above for labels
		if pn.Unit == timeline.Percent {
			p.Y.Min, p.Y.Max = math.Max(p.Y.Min, -2), math.Min(p.Y.Max, 102)
		}
	}
	p.Y.Tick.Marker = yTicker{unit: pn.Unit, div: byteDivisor(math.Max(math.Abs(ymin), math.Abs(ymax)))}
	p.Add(plotter.NewGrid())
	return p, lg
}

func newLegend() plot.Legend {
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	lg.TextStyle.Font.Size = vg.Points(9)
	lg.Padding = vg.Points(2.5)
	return lg
}

// addLines adds one line per segment (a gap in the data is a gap in the line).
func addLines(p *plot.Plot, segs [][]timeline.Point, sty draw.LineStyle) {
	for _, s := range segs {
		xys := make(plotter.XYs, 0, len(s))
		for _, pt := range s {
			if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
		}
		if len(xys) == 0 {
			continue
		}
		if len(xys) == 1 { // one sample: a short dash of the line's style so it shows
			d := (p.X.Max - p.X.Min) * 0.03
			xys = plotter.XYs{{X: xys[0].X - d, Y: xys[0].Y}, {X: xys[0].X + d, Y: xys[0].Y}}
		}
		l := &plotter.Line{XYs: xys, LineStyle: sty}
		p.Add(l)
	}
}

func yLabel(pn *timeline.Panel) string {
	switch pn.Unit {
	case timeline.Percent:
		return "available (% of capacity)"
	case timeline.Count:
		if strings.HasPrefix(string(pn.Signal), "pid") {
			return "available PIDs"
		}
		return "free inodes"
	}
	return "available"
}

// stripRows are the strip's rows, top to bottom: the conditions, and
// "evictions" when some eviction has no panel of its own.
func stripRows(tl *timeline.Timeline) []string {
	var rows []string
	for _, b := range tl.Conditions {
		rows = append(rows, b.Condition)
	}
	for _, m := range tl.Evictions {
		if m.Panel < 0 {
			rows = append(rows, "evictions")
			break
		}
	}
	if len(rows) == 0 { // an axis needs a row
		rows = append(rows, "no conditions")
	}
	return rows
}

func stripPlot(tl *timeline.Timeline, rows []string, o Options) (*plot.Plot, plot.Legend) {
	p := newPlot(tl, o)
	p.Title.Text = StripTitle
	p.X.Label.Text = "time since the scenario's start"
	if o.X.Clock {
		p.X.Label.Text = "time (UTC) from " + tl.Origin.UTC().Format(time.RFC3339)
	}
	n := len(rows)
	// Row r (from the top) is drawn at y = n-1-r.
	names := make([]string, n)
	for r, name := range rows {
		names[n-1-r] = name
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	lg := newLegend()
	for r, b := range tl.Conditions {
		clr, ok := conditionColor[b.Condition]
		if !ok {
			clr = otherConditionColor
		}
		p.Add(&spans{iv: b.On, color: clr, y: float64(n - 1 - r), half: 0.32})
	}
	var ms []timeline.Marker
	for _, m := range tl.Evictions {
		if m.Panel < 0 {
			ms = append(ms, m)
		}
	}
	if len(ms) > 0 {
		row := 0.0 // "evictions" is the last row, drawn at y = 0
		p.Add(&marks{ms: ms, labels: len(ms) <= o.MaxLabels, y: func(timeline.Marker) float64 { return row }})
		lg.Add("eviction (pod, reason)", glyphThumb())
	}
	return p, lg
}

// spans fills intervals: the full height of the data area, or a band of
// ±half around y when half > 0.
type spans struct {
	iv    []timeline.Interval
	color color.Color
	y     float64
	half  float64
}

func (s *spans) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	lo, hi := c.Min.Y, c.Max.Y
	if s.half > 0 {
		lo, hi = ty(s.y-s.half), ty(s.y+s.half)
	}
	for _, iv := range s.iv {
		x0, x1 := tx(iv.From), tx(iv.To)
		if x1-x0 < vg.Points(2) { // a one-sample interval still shows
			x1 = x0 + vg.Points(2)
		}
		pts := []vg.Point{{X: x0, Y: lo}, {X: x1, Y: lo}, {X: x1, Y: hi}, {X: x0, Y: hi}}
		c.FillPolygon(s.color, c.ClipPolygonXY(pts))
	}
}

// marks draws eviction markers, labelled "namespace/name (reason)" when
// labels is set; labels of markers close in time stack upwards.
type marks struct {
	ms     []timeline.Marker
	labels bool
	y      func(timeline.Marker) float64
}

func (m *marks) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	gs := markerStyle()
	tsty := plot.New().Title.TextStyle
	tsty.Font.Size = vg.Points(labelSize)
	tsty.Color = color.Black
	lineH := tsty.FontExtents().Height
	ms := append([]timeline.Marker(nil), m.ms...)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].X < ms[j].X })
	// Labels go on the lowest level where they do not overlap one drawn
	// before them (ends[k] is where level k's last label ends).
	var ends []vg.Length
	for _, mk := range ms {
		pt := vg.Point{X: tx(mk.X), Y: ty(m.y(mk))}
		if !c.Contains(pt) {
			pt.Y = max(min(pt.Y, c.Max.Y), c.Min.Y)
		}
		c.DrawGlyphNoClip(gs, pt)
		if !m.labels {
			continue
		}
		text := label(mk)
		ls := tsty
		ls.XAlign = draw.XLeft
		w := ls.Rectangle(text).Max.X
		from := pt.X + vg.Points(markerRadius+2)
		if left := pt.X - vg.Points(markerRadius+2) - w; from+w > c.Max.X && left >= c.Min.X {
			ls.XAlign = draw.XRight
			from = left
		}
		level := -1
		for k, end := range ends {
			if end+vg.Points(4) <= from {
				level = k
				break
			}
		}
		if level < 0 {
			if len(ends) < maxLabelLevels {
				ends = append(ends, 0)
				level = len(ends) - 1
			} else {
				level = 0
				for k := range ends {
					if ends[k] < ends[level] {
						level = k
					}
				}
			}
		}
		ends[level] = from + w
		at := vg.Point{X: from, Y: pt.Y + vg.Points(markerRadius) + lineH*vg.Length(level)}
		if ls.XAlign == draw.XRight {
			at.X = from + w
		}
		c.FillText(ls, at, text)
	}
}

// maxLabelLevels is how many lines of labels stack above the markers.
const maxLabelLevels = 8

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

// DataRange makes the markers part of the axes' range.
func (m *marks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, mk := range m.ms {
		y := m.y(mk)
		xmin, xmax = math.Min(xmin, mk.X), math.Max(xmax, mk.X)
		ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
	}
	return
}

type thumb func(c *draw.Canvas)

func (t thumb) Thumbnail(c *draw.Canvas) { t(c) }

func lineThumb(sty draw.LineStyle) plot.Thumbnailer {
	return thumb(func(c *draw.Canvas) {
		y := c.Center().Y
		c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
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
		ts := plot.DefaultTicks{}.Ticks(min, max)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = fmtDuration(ts[i].Value)
			}
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
	return d.String()
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
		days := math.Ceil(span / most / 86400)
		mag := math.Pow(10, math.Floor(math.Log10(days)))
		for _, m := range []float64{1, 2, 5, 10} {
			if m*mag >= days {
				step = m * mag * 86400
				break
			}
		}
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

// yTicker labels values in the kubelet's quantities: Mi or Gi for bytes,
// "20k" for counts, "%" for percentages.
type yTicker struct {
	unit timeline.Unit
	div  float64
}

func (t yTicker) Ticks(min, max float64) []plot.Tick {
	div := 1.0
	if t.unit == timeline.Bytes {
		div = t.div
	}
	ts := plot.DefaultTicks{}.Ticks(min/div, max/div)
	for i := range ts {
		v := ts[i].Value
		ts[i].Value = v * div
		if ts[i].Label == "" {
			continue
		}
		switch t.unit {
		case timeline.Bytes:
			ts[i].Label = ts[i].Label + byteSuffix(div)
		case timeline.Percent:
			ts[i].Label += "%"
		case timeline.Count:
			if v == math.Trunc(v) && math.Abs(v) < 1e18 {
				ts[i].Label = resource.NewQuantity(int64(v), resource.DecimalSI).String()
			}
		}
	}
	return ts
}

// byteDivisor is the binary unit the panel's byte values are shown in: Gi
// from 2Gi, Mi from 2Mi, Ki below.
func byteDivisor(maxAbs float64) float64 {
	switch {
	case maxAbs >= 2<<30:
		return 1 << 30
	case maxAbs >= 2<<20:
		return 1 << 20
	}
	return 1 << 10
}

func byteSuffix(div float64) string {
	switch div {
	case 1 << 30:
		return "Gi"
	case 1 << 20:
		return "Mi"
	}
	return "Ki"
}
