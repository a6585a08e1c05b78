// Package report renders an evictd decision log (`evictd run
// --decision-log`, one JSON record per synchronize) as one self-contained
// HTML page: a summary, the timeline chart inline as SVG, and a table of
// every eviction with the ranking it came from, its message and the wake-up
// that triggered it — one file to attach to an incident ticket.
//
// The log is streamed: memory is bounded by the chart's buckets and the
// table's cap, not by the log's length, so a week at one record per second
// renders in seconds (bench: BenchmarkRenderWeek).
package report

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/safetext"
	"github.com/evictd/evictd/internal/timeline"
)

// Options tune Render.
type Options struct {
	// MaxRows caps the eviction table: the first MaxRows/2 and the last
	// MaxRows/2 evictions are listed, and the page says how many are not
	// (0: DefaultMaxRows).
	MaxRows int
	// MaxRanking is how many candidates of each eviction's ranking are
	// listed (0: DefaultMaxRanking).
	MaxRanking int
	// MaxGap breaks the chart's lines where records are further apart: the
	// log holds only synchronizes where something happened, so a gap is a
	// quiet time (0: DefaultMaxGap).
	MaxGap time.Duration
	// Now is printed as the page's creation time (zero: left out).
	Now time.Time
	// SkipBad skips malformed records (counted, and the first one named on
	// the page) instead of failing on the first.
	SkipBad bool
}

// ChartWidth is the width the report's chart is drawn at: a page's width
// (1280 pixels at 96 dpi), so that the page, which scales the chart to its
// own width, shows it near its natural size.
const ChartWidth = 1280 * vg.Inch / 96

// Defaults.
const (
	DefaultMaxRows    = 1000
	DefaultMaxRanking = 10
	// DefaultMaxGap is six of the agent's default 10 s ticks.
	DefaultMaxGap = time.Minute
)

// Row is one eviction in the table.
type Row struct {
	N         int // 1-based, in log order
	Time      time.Time
	Line      int
	Pod       string
	Signal    string
	Grace     int64
	Immediate bool
	Message   string
	Threshold string // the deciding threshold ("" for a local-storage limit)
	Available string // its observed value, as the log writes it
	Quantity  string // its resolved quantity, as the log writes it
	// AvailableHTML and QuantityHTML are those for people (196.3Mi, not
	// 200984Ki), the log's text in the title.
	AvailableHTML, QuantityHTML template.HTML
	Trigger                     string // "wake (memcg-threshold)", "grace", "timer", ...
	TriggerAt                   time.Time
	Latency                     time.Duration // trigger → decision
	Result                      string        // what the kill did
	Ranking                     []Candidate
	RankingAll                  int // candidates in the ranking
	RankingErr                  string
}

// Summary is what the page's head says about the log.
type Summary struct {
	File        string
	Records     int
	First, Last time.Time
	Evictions   int
	DryRun      bool
	Triggers    []Count // by reason (and wake-up source)
	Errors      []Count // synchronizes that stopped early, by error
	Incomplete  bool
	Backwards   int
	// Omitted synchronizes were left out of the log by the agent (nothing
	// but the amounts changed).
	Omitted int
	// NotRecords lines were not records (log lines) and were skipped;
	// Skipped malformed records were skipped (SkipBad), the first with
	// FirstSkipped.
	NotRecords, Skipped int
	FirstSkipped        string
}

// Count is a labelled count.
type Count struct {
	Name string
	N    int
}

// Render reads the decision log from src (named name in errors and on the
// page), writes the HTML page to w and returns what the page's head says.
// A malformed record is an error naming the file, line and field (unless
// o.SkipBad); nothing is written then.
func Render(w io.Writer, src io.Reader, name string, o Options) (*Summary, error) {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.MaxRanking <= 0 {
		o.MaxRanking = DefaultMaxRanking
	}
	if o.MaxGap <= 0 {
		o.MaxGap = DefaultMaxGap
	}
	rd := NewReader(src, name)
	rd.SkipBad = o.SkipBad
	defer rd.Close()
	b := timeline.Builder{MaxGap: o.MaxGap}
	sum := Summary{File: name}
	triggers := map[string]int{}
	errs := map[string]int{}
	head := make([]Row, 0, o.MaxRows/2)
	tail := newRing(o.MaxRows - o.MaxRows/2)
	var rec Record
	for {
		err := rd.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var le *LineError
			if errors.As(err, &le) {
				err = fmt.Errorf("%w (--skip-bad skips malformed records)", err)
			}
			return nil, err
		}
		sum.Records++
		sum.Omitted += rec.Omitted
		if sum.First.IsZero() {
			sum.First = rec.Time
		}
		sum.Last = rec.Time
		sum.DryRun = sum.DryRun || rec.DryRun
		triggers[triggerText(rec.Trigger)]++
		if rec.Decision.Error != "" {
			if len(errs) < 50 || errs[rec.Decision.Error] > 0 {
				errs[rec.Decision.Error]++
			} else {
				errs["(other errors)"]++
			}
		}
		b.Add(rec.sample())
		for i := range rec.Decision.Evictions {
			sum.Evictions++
			row := makeRow(&rec, i, sum.Evictions, rd.Line(), o.MaxRanking)
			if len(head) < cap(head) {
				head = append(head, row)
			} else {
				tail.push(row)
			}
		}
	}
	sum.Incomplete = rd.Incomplete
	sum.NotRecords, sum.Skipped = rd.NotRecords, rd.Skipped
	if rd.FirstSkipped != nil {
		sum.FirstSkipped = rd.FirstSkipped.Error()
	}
	if sum.Records == 0 && sum.NotRecords > 0 {
		return nil, fmt.Errorf("%s: no decision record in %d lines (is it evictd's decision log, or the output of kubectl logs of evictd with --decision-log -?)", name, sum.NotRecords)
	}
	sum.Backwards = b.Backwards()
	sum.Triggers = sortedCounts(triggers)
	sum.Errors = sortedCounts(errs)
	tl := b.Build()

	var svg bytes.Buffer
	title := "evictd report — " + name
	if err := chart.Write(&svg, chart.SVG, tl, chart.Options{Title: title, X: chart.XAxis{Clock: true}, Width: ChartWidth}); err != nil {
		return nil, fmt.Errorf("drawing the chart: %w", err)
	}
	rows := tail.list()
	page := pageData{
		Title: title, Summary: sum, Timeline: tl,
		// The SVG comes from the chart package through gonum's SVG canvas,
		// which escapes every text it writes (html.EscapeString); names from
		// the log pass safetext.Escape first. So it is markup we made, not
		// text from the log.
		SVG:      template.HTML(svg.String()),
		Head:     head,
		Tail:     rows,
		Omitted:  sum.Evictions - len(head) - len(rows),
		MaxGap:   o.MaxGap,
		Created:  o.Now,
		Dropped:  tl.EvictionsDropped,
		Merged:   tl.IntervalsMerged,
		Bucket:   tl.BucketWidth,
		Signals:  tl.Unobserved,
		RankingN: o.MaxRanking,
	}
	var out bytes.Buffer
	if err := pageTemplate.Execute(&out, page); err != nil {
		return nil, err
	}
	_, err := out.WriteTo(w)
	return &sum, err
}

func triggerText(t Trigger) string {
	if t.Source != "" {
		return t.Reason + " (" + t.Source + ")"
	}
	if t.Reason == "" {
		return "(none)"
	}
	return t.Reason
}

func sortedCounts(m map[string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Name: k, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func makeRow(rec *Record, i, n, line, maxRanking int) Row {
	d := &rec.Decision
	e := d.Evictions[i]
	r := Row{
		N: n, Time: rec.Time, Line: line,
		Pod: safetext.Escape(e.Pod.Namespace + "/" + e.Pod.Name), Signal: e.Signal,
		Grace: e.GracePeriodSeconds, Immediate: e.Immediate, Message: strings.TrimSpace(e.Message),
		Trigger: triggerText(rec.Trigger), TriggerAt: rec.Trigger.At,
		Latency: time.Duration(rec.TriggerToDecision),
	}
	if d.Deciding != nil && !e.Limit {
		r.Threshold = timeline.Label(d.Deciding.threshold)
		if d.Deciding.Available != nil {
			r.Available = *d.Deciding.Available
		}
		if d.Deciding.Quantity != nil {
			r.Quantity = *d.Deciding.Quantity
		}
		r.AvailableHTML, r.QuantityHTML = comparedHTML(e.Signal, r.Available, r.Quantity)
	}
	r.Result = "not recorded"
	for _, a := range rec.Actions {
		if a.Kind != "evict" || a.Pod.Name != e.Pod.Name || a.Pod.Namespace != e.Pod.Namespace {
			continue
		}
		switch {
		case a.Error != "":
			r.Result = "failed: " + a.Error
		case a.Result != nil && (a.Result.DryRun || rec.DryRun):
			r.Result = "dry run: not killed"
		case a.Result != nil:
			gone := "still there after the wait"
			if a.Result.Gone {
				gone = "gone"
			}
			r.Result = fmt.Sprintf("%s, %s after %s", a.Result.Method, gone, time.Duration(a.Result.Took).Round(time.Millisecond))
		}
		break
	}
	cs, err := d.candidates()
	if err != nil {
		r.RankingErr = "the ranking did not decode: " + err.Error()
	}
	r.RankingAll = len(cs)
	if len(cs) > maxRanking {
		cs = cs[:maxRanking]
	}
	for i := range cs {
		cs[i].Pod.Name = safetext.Escape(cs[i].Pod.Name)
		cs[i].Pod.Namespace = safetext.Escape(cs[i].Pod.Namespace)
	}
	r.Ranking = cs
	return r
}

// ring keeps the last n rows.
type ring struct {
	rows []Row
	next int
	full bool
}

func newRing(n int) *ring { return &ring{rows: make([]Row, n)} }

func (r *ring) push(row Row) {
	if len(r.rows) == 0 {
		return
	}
	r.rows[r.next] = row
	r.next = (r.next + 1) % len(r.rows)
	r.full = r.full || r.next == 0
}

func (r *ring) list() []Row {
	if !r.full {
		return r.rows[:r.next]
	}
	return append(append([]Row(nil), r.rows[r.next:]...), r.rows[:r.next]...)
}

type pageData struct {
	Title    string
	Summary  Summary
	Timeline *timeline.Timeline
	SVG      template.HTML
	Head     []Row
	Tail     []Row
	Omitted  int
	MaxGap   time.Duration
	Created  time.Time
	Dropped  int
	Merged   bool
	Bucket   time.Duration
	Signals  []policy.Signal
	RankingN int
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"dur": func(d time.Duration) string {
		if d >= time.Millisecond {
			return d.Round(time.Microsecond * 100).String()
		}
		return d.String()
	},
	"span": func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
	"orDash": func(s string) string {
		if s == "" {
			return "–"
		}
		return s
	},
	"qty": func(sig string, s *string) template.HTML {
		if s == nil {
			return "–"
		}
		return quantityHTML(sig, *s, 3)
	},
	"wbr": wordBreaks,
	"pod": podHTML,
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
th { background: #f2f2f2; }
td.msg { white-space: pre-wrap; color: #444; border-bottom: 2px solid #999; }
table#evictions { width: 100%; }
table#evictions td { overflow-wrap: break-word; }
table.rank td, table.rank th { border: none; padding: 0 0.3em; font-size: 0.9em; }
td.num, table.rank th, .pod { white-space: nowrap; }
td.num { text-align: right; }
.note { background: #fff7e0; border-left: 4px solid #e0a000; padding: 0.4em 0.8em; margin: 0.6em 0; }
#chart svg { width: 100%; height: auto; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<section id="summary">
<table>
<tr><th>log</th><td>{{.Summary.File}}</td></tr>
<tr><th>records</th><td>{{.Summary.Records}} synchronizes{{if .Summary.Records}}, {{ts .Summary.First}} to {{ts .Summary.Last}} ({{span .Summary.First .Summary.Last}}){{end}}{{if .Summary.Omitted}}; {{.Summary.Omitted}} more left out of the log by evictd (nothing but the amounts changed){{end}}</td></tr>
<tr><th>evictions</th><td>{{.Summary.Evictions}}{{if .Summary.DryRun}} (dry run: decisions only, nothing was killed){{end}}</td></tr>
<tr><th>triggers</th><td>{{range $i, $c := .Summary.Triggers}}{{if $i}}, {{end}}{{$c.Name}}: {{$c.N}}{{else}}–{{end}}</td></tr>
{{if .Summary.Errors}}<tr><th>synchronizes stopped early</th><td>{{range $i, $c := .Summary.Errors}}{{if $i}}<br>{{end}}{{$c.N}} × {{$c.Name}}{{end}}</td></tr>{{end}}
{{if not .Created.IsZero}}<tr><th>page made</th><td>{{ts .Created}}</td></tr>{{end}}
</table>
<p class="note">The log holds only the synchronizes where something happened or changed (a threshold met, a node condition, an action, an error), and a heartbeat every 30 s while it lasts; where records are more than {{.MaxGap}} apart the chart's lines break: nothing was met then.{{if .Bucket}} The chart downsamples the {{.Summary.Records}} records into buckets of {{.Bucket}}, keeping each bucket's minimum and maximum, so spikes stay visible.{{end}}</p>
{{if .Summary.NotRecords}}<p class="note" id="not-records">{{.Summary.NotRecords}} lines are not decision records (log lines, as kubectl logs mixes them in) and were skipped.</p>{{end}}
{{if .Summary.Skipped}}<p class="note" id="skipped">{{.Summary.Skipped}} malformed records were skipped (--skip-bad); the first: {{.Summary.FirstSkipped}}</p>{{end}}
{{if .Summary.Incomplete}}<p class="note">The log's last line is incomplete (the file was copied while evictd was writing it) and was left out.</p>{{end}}
{{if .Summary.Backwards}}<p class="note">{{.Summary.Backwards}} records went back in time (a clock step); they are drawn at the previous record's time.</p>{{end}}
{{if .Merged}}<p class="note">Condition and grace-period intervals were too many to draw one by one; neighbours were joined.</p>{{end}}
{{if .Signals}}<p class="note">Thresholds on signals the log never observed (no panel): {{range $i, $s := .Signals}}{{if $i}}, {{end}}{{$s}}{{end}}.</p>{{end}}
</section>
<h2>Timeline</h2>
<p>Panels show the signals of the thresholds met in this log. {{if .Dropped}}<span class="note">{{.Dropped}} evictions past the chart's marker cap are not drawn (they are counted above).</span>{{end}}</p>
<div id="chart">
{{.SVG}}
</div>
<h2>Evictions</h2>
{{if .Omitted}}<p class="note" id="capped">{{.Summary.Evictions}} evictions: the table lists the first {{len .Head}} and the last {{len .Tail}}; {{.Omitted}} in between are left out (they are in the chart and in the log).</p>{{end}}
{{if or .Head .Tail}}
<table id="evictions">
<thead><tr><th>#</th><th>time (UTC)</th><th>pod</th><th>reason</th><th>threshold</th><th>triggered by</th><th>kill</th><th>ranking (top {{.RankingN}})</th></tr></thead>
<tbody>
{{range .Head}}{{template "row" .}}{{end}}
{{if .Omitted}}<tr class="omitted"><td colspan="8">… {{.Omitted}} evictions left out …</td></tr>{{end}}
{{range .Tail}}{{template "row" .}}{{end}}
</tbody>
</table>
{{else}}<p id="no-evictions">No eviction in this log.</p>{{end}}
</body>
</html>
{{define "row"}}<tr class="eviction">
<td>{{.N}}<br><small>line {{.Line}}</small></td>
<td>{{ts .Time}}</td>
<td>{{pod .Pod}}</td>
<td>{{wbr .Signal}}<br><small>grace {{.Grace}}s{{if .Immediate}}, immediate{{end}}</small></td>
<td>{{if .Threshold}}{{wbr .Threshold}}{{else}}–{{end}}{{if .Available}}<br><small>available {{.AvailableHTML}}{{if .Quantity}} &lt; {{.QuantityHTML}}{{end}}</small>{{end}}</td>
<td>{{.Trigger}}<br><small>at {{ts .TriggerAt}}, decided {{dur .Latency}} later</small></td>
<td>{{.Result}}</td>
<td>{{if .RankingErr}}{{.RankingErr}}{{else}}<table class="rank"><tr><th>#</th><th>pod</th><th>prio</th><th>usage</th><th>request</th><th>&gt;req</th></tr>
{{range .Ranking}}<tr><td class="num">{{.Rank}}</td><td>{{pod (print .Pod.Namespace "/" .Pod.Name)}}{{if .Critical}} (critical){{end}}</td><td class="num">{{.Priority}}</td><td class="num">{{qty $.Signal .Usage}}</td><td class="num">{{qty $.Signal .Request}}</td><td>{{if .ExceedsRequest}}yes{{else}}no{{end}}</td></tr>
{{end}}</table>{{if gt .RankingAll (len .Ranking)}}<small>… {{.RankingAll}} ranked in all</small>{{end}}{{end}}</td>
</tr>
<tr class="message"><td></td><td colspan="7" class="msg">{{.Message}}</td></tr>
{{end}}`
