package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/timeline"
)

// Record is the part of one decision-log line (agent.Record, written by
// `evictd run --decision-log`) that the report shows. Fields it does not
// show (events, notes, ...) are skipped; the ranking is kept raw and
// decoded only for records that evicted.
type Record struct {
	Time              time.Time       `json:"-"` // from TimeText
	TimeText          string          `json:"time"`
	Trigger           Trigger         `json:"-"` // from TriggerJSON
	TriggerJSON       json.RawMessage `json:"trigger"`
	Decision          Decision        `json:"decision"`
	Actions           []Action        `json:"actions"`
	TriggerToDecision int64           `json:"triggerToDecisionNs"`
	DryRun            bool            `json:"dryRun"`
	// Omitted synchronizes before this record were left out of the log
	// (nothing but the amounts changed).
	Omitted int `json:"omitted"`
	// Level and Msg are slog's: a line that has them is a log line of
	// `evictd run --log-format json` (kubectl logs mixes them with the
	// records when the decision log is standard output), not a record.
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// Trigger says why the synchronize ran (agent.Trigger).
type Trigger struct {
	Reason string    `json:"reason"`
	Source string    `json:"source"`
	At     time.Time `json:"-"` // from AtText
	AtText string    `json:"at"`
}

// Decision is the shown part of policy.Decision. Quantities are kept as
// text and parsed by Reader.Next, which names the field when one is bad.
type Decision struct {
	Error          string          `json:"error"`
	Observations   []Observation   `json:"observations"`
	Met            []Met           `json:"met"`
	NodeConditions []string        `json:"nodeConditions"`
	Deciding       *Met            `json:"deciding"`
	Candidates     json.RawMessage `json:"candidates"`
	Evictions      []Eviction      `json:"evictions"`
}

// Observation is policy.Observation with its quantities as text.
type Observation struct {
	Signal    policy.Signal `json:"signal"`
	Available string        `json:"available"`
	Capacity  string        `json:"capacity"`

	available, capacity int64
}

// Met is policy.ThresholdStatus, as far as the report uses it.
type Met struct {
	Threshold         ThresholdText `json:"threshold"`
	Quantity          *string       `json:"quantity"`
	Available         *string       `json:"available"`
	FirstObserved     time.Time     `json:"-"` // from FirstObservedText
	FirstObservedText string        `json:"firstObserved"`

	threshold policy.Threshold
}

// ThresholdText is policy.Threshold with its quantity as text, parsed by
// parseQuantityText so that an error names the field.
type ThresholdText struct {
	Signal      policy.Signal            `json:"signal"`
	Operator    policy.ThresholdOperator `json:"operator"`
	Value       ValueText                `json:"value"`
	GracePeriod time.Duration            `json:"gracePeriod"`
}

// ValueText is policy.ThresholdValue with its quantity as text.
type ValueText struct {
	Quantity   *string `json:"quantity"`
	Percentage float32 `json:"percentage"`
}

// Eviction is policy.Eviction without what the report does not show (the
// pod condition and event annotations).
type Eviction struct {
	Pod                policy.PodRef `json:"pod"`
	GracePeriodSeconds int64         `json:"gracePeriodSeconds"`
	Message            string        `json:"message"`
	Signal             string        `json:"signal"`
	Limit              bool          `json:"limit"`
	Immediate          bool          `json:"immediate"`
}

// Action is agent.Action, as far as the report uses it.
type Action struct {
	Kind   string        `json:"kind"`
	Pod    policy.PodRef `json:"pod"`
	Signal string        `json:"signal"`
	Result *struct {
		Method string `json:"method"`
		Gone   bool   `json:"gone"`
		DryRun bool   `json:"dryRun"`
		Took   int64  `json:"tookNs"`
	} `json:"result"`
	Error string `json:"error"`
}

// Candidate is one row of the ranking (policy.Candidate).
type Candidate struct {
	Rank           int           `json:"rank"`
	Pod            policy.PodRef `json:"pod"`
	HasStats       bool          `json:"hasStats"`
	ExceedsRequest bool          `json:"exceedsRequest"`
	Priority       int32         `json:"priority"`
	Usage          *string       `json:"usage"`
	Request        *string       `json:"request"`
	ProcessCount   uint64        `json:"processCount"`
	Critical       bool          `json:"critical"`
}

// LineError is a malformed record: the file, the line and the field.
type LineError struct {
	File  string
	Line  int
	Field string // dotted JSON path; "" when the line is not JSON at all
	Err   error
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// MaxLine bounds one record's line, so a corrupt file without newlines
// cannot take all memory. A record is about 2 KiB plus 240 bytes per pod of
// its ranking (13 KiB with 53 workloads, ≈ 27 KiB with the kubelet's
// default maximum of 110 pods): 1 MiB holds a ranking of 4,000 pods.
const MaxLine = 1 << 20

// Reader reads a decision log one record at a time. Lines are decoded in
// parallel (JSON decoding is most of a report's time) and returned in
// order; at most a few batches are in flight, so memory stays bounded.
type Reader struct {
	name string
	// Incomplete is set when the file ended in a partial line that does not
	// parse (a copy taken while evictd was writing): it was left out.
	Incomplete bool
	// SkipBad skips malformed records instead of failing on the first;
	// Skipped counts them and FirstSkipped is the first one's error.
	SkipBad      bool
	Skipped      int
	FirstSkipped error
	// NotRecords counts the lines that are not decision records and were
	// skipped: log lines (text or JSON) mixed in by `kubectl logs`, whose
	// output interleaves the container's stderr with its stdout.
	NotRecords int

	started bool
	order   chan *batch
	stop    chan struct{}
	cur     *batch
	i       int
	line    int
	src     io.Reader
}

// A worker decodes batches of up to batchLines lines or batchBytes bytes,
// whichever comes first: a handful of batches in flight then hold a few
// MiB, whatever the lines' sizes.
const (
	batchLines = 256
	batchBytes = 1 << 20
)

type entry struct {
	line      int
	text      []byte
	noNewline bool // the file's last line, without its newline
	rec       Record
	err       error
	notRecord bool // a log line: skipped and counted
}

type batch struct {
	entries []entry
	err     error // reading failed after the entries
	done    chan struct{}
}

// NewReader reads the log from r; name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, src: r}
}

// Line is the number of the line Next returned last.
func (r *Reader) Line() int { return r.line }

// Close stops the decoding goroutines; call it when not reading to the end.
func (r *Reader) Close() {
	if r.started && r.stop != nil {
		close(r.stop)
		r.stop = nil
		for range r.order { // let the producer finish
		}
	}
}

func (r *Reader) start() {
	r.started = true
	workers := max(runtime.GOMAXPROCS(0), 1)
	r.order = make(chan *batch, 2*workers+2)
	r.stop = make(chan struct{})
	jobs := make(chan *batch, 2*workers)
	for range workers {
		go func() {
			for b := range jobs {
				for i := range b.entries {
					e := &b.entries[i]
					if e.err == nil {
						e.notRecord, e.err = parseLine(e.text, &e.rec)
					}
					e.text = nil
				}
				close(b.done)
			}
		}()
	}
	go r.produce(jobs, r.stop)
}

// produce reads lines into batches, hands each to a worker and queues it
// for Next in file order.
func (r *Reader) produce(jobs chan<- *batch, stop <-chan struct{}) {
	defer close(r.order)
	defer close(jobs)
	br := bufio.NewReaderSize(r.src, 1<<20)
	var scratch []byte // readLine's, reused: each line is cloned below
	line := 0
	for {
		b := &batch{done: make(chan struct{})}
		size, last := 0, false
		for len(b.entries) < batchLines && size < batchBytes {
			text, newline, err := readLine(br, &scratch)
			if err != nil && !errors.Is(err, errLineTooLong) {
				if !errors.Is(err, io.EOF) {
					b.err = fmt.Errorf("%s: %w", r.name, err)
				}
				last = true
				break
			}
			line++
			if err != nil {
				// Too long for a record: an entry that is an error (or
				// skipped with SkipBad), without its text.
				b.entries = append(b.entries, entry{line: line, err: &LineError{Err: err}, noNewline: !newline})
				continue
			}
			if len(bytes.TrimSpace(text)) == 0 {
				continue
			}
			size += len(text)
			b.entries = append(b.entries, entry{line: line, text: bytes.Clone(text), noNewline: !newline})
		}
		select {
		case jobs <- b:
		case <-stop:
			return
		}
		select {
		case r.order <- b:
		case <-stop:
			return
		}
		if last {
			return
		}
	}
}

// Next decodes the next record into rec; it returns io.EOF at the end, or
// a *LineError. Blank lines are skipped.
func (r *Reader) Next(rec *Record) error {
	if !r.started {
		r.start()
	}
	for {
		if r.cur == nil {
			b, ok := <-r.order
			if !ok {
				return io.EOF
			}
			<-b.done
			r.cur, r.i = b, 0
		}
		if r.i >= len(r.cur.entries) {
			err := r.cur.err
			r.cur = nil
			if err != nil {
				return err
			}
			continue
		}
		e := &r.cur.entries[r.i]
		r.i++
		r.line = e.line
		if e.notRecord {
			r.NotRecords++
			continue
		}
		if e.err != nil {
			if le, ok := e.err.(*LineError); ok {
				le.File, le.Line = r.name, e.line
			}
			if e.noNewline {
				r.Incomplete = true
				return io.EOF
			}
			if r.SkipBad {
				if r.Skipped == 0 {
					r.FirstSkipped = e.err
				}
				r.Skipped++
				continue
			}
			return e.err
		}
		*rec = e.rec
		e.rec = Record{}
		return nil
	}
}

// errLineTooLong is a line longer than MaxLine; readLine skips the rest of
// it without keeping it.
var errLineTooLong = fmt.Errorf("line longer than %d MiB: not a record", MaxLine>>20)

// readLine returns the next line (without its newline) and whether it had
// one; io.EOF at the end. A line longer than MaxLine is read to its end
// without being kept and returned as errLineTooLong. A line longer than
// br's buffer is put together in *scratch, which the next call reuses: the
// caller copies what it keeps.
func readLine(br *bufio.Reader, scratch *[]byte) ([]byte, bool, error) {
	long := (*scratch)[:0]
	defer func() { *scratch = long[:0] }()
	tooLong, joined := false, false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if tooLong {
				return nil, true, errLineTooLong
			}
			if joined {
				long = append(long, chunk...)
				return long, true, nil
			}
			return chunk, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if tooLong || len(long)+len(chunk) > MaxLine {
				tooLong, long = true, long[:0]
				continue
			}
			long, joined = append(long, chunk...), true
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, false, errLineTooLong
			}
			if len(chunk) == 0 && len(long) == 0 {
				return nil, false, io.EOF
			}
			long = append(long, chunk...)
			return long, false, nil
		default:
			return nil, false, err
		}
	}
}

// parseLine decodes one line: a record, or a line that is not one (notRecord)
// — text that is not a JSON object (a text log line, kubectl's own notes),
// or a JSON log line (slog's "level" and "msg"). `kubectl logs
// --timestamps` puts an RFC 3339 time and a space before each line; it is
// taken off.
func parseLine(line []byte, rec *Record) (notRecord bool, err error) {
	t := bytes.TrimLeft(line, " \t")
	if len(t) > 0 && t[0] >= '0' && t[0] <= '9' {
		if i := bytes.IndexByte(t, ' '); i > 0 && i < 40 {
			if _, perr := time.Parse(time.RFC3339Nano, string(t[:i])); perr == nil {
				t = t[i+1:]
			}
		}
	}
	if len(t) == 0 || t[0] != '{' {
		return true, nil
	}
	err = parseRecord(t, rec)
	if rec.Level != "" && rec.Msg != "" && len(rec.Decision.Observations) == 0 && len(rec.Actions) == 0 {
		*rec = Record{}
		return true, nil
	}
	return false, err
}

// parseRecord decodes one line and checks what the report relies on,
// naming the field of the first problem.
func parseRecord(line []byte, rec *Record) error {
	if err := json.Unmarshal(line, rec); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return &LineError{Field: te.Field, Err: fmt.Errorf("%s where %s was expected", te.Value, te.Type)}
		case errors.As(err, &se):
			return &LineError{Err: fmt.Errorf("not a JSON record (at byte %d: %v)", se.Offset, err)}
		}
		return &LineError{Err: err} // no value here has a decoder of its own
	}
	if rec.Level != "" && rec.Msg != "" {
		return nil // a log line (parseLine skips it); its fields are not a record's
	}
	if rec.TimeText == "" {
		return &LineError{Field: "time", Err: errors.New("missing (every record has the time of its synchronize)")}
	}
	if len(rec.TriggerJSON) > 0 && !bytes.Equal(rec.TriggerJSON, []byte("null")) {
		if err := json.Unmarshal(rec.TriggerJSON, &rec.Trigger); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return &LineError{Field: "trigger." + te.Field, Err: fmt.Errorf("%s where %s was expected", te.Value, te.Type)}
			}
			return &LineError{Field: "trigger", Err: err}
		}
	}
	var err error
	if rec.Time, err = parseTime(rec.TimeText); err != nil {
		return &LineError{Field: "time", Err: err}
	}
	if rec.Trigger.AtText != "" {
		if rec.Trigger.At, err = parseTime(rec.Trigger.AtText); err != nil {
			return &LineError{Field: "trigger.at", Err: err}
		}
	}
	d := &rec.Decision
	for i := range d.Observations {
		o := &d.Observations[i]
		f := "decision.observations[" + strconv.Itoa(i) + "]"
		if o.Signal == "" {
			return &LineError{Field: f + ".signal", Err: errors.New("missing")}
		}
		var err error
		if o.available, err = parseQuantity(o.Available); err != nil {
			return &LineError{Field: f + ".available", Err: err}
		}
		if o.capacity, err = parseQuantity(o.Capacity); err != nil {
			return &LineError{Field: f + ".capacity", Err: err}
		}
	}
	for i := range d.Met {
		if err := d.Met[i].resolve("decision.met[" + strconv.Itoa(i) + "]"); err != nil {
			return err
		}
	}
	if d.Deciding != nil {
		if err := d.Deciding.resolve("decision.deciding"); err != nil {
			return err
		}
	}
	for i, e := range d.Evictions {
		if e.Pod.Name == "" {
			return &LineError{Field: "decision.evictions[" + strconv.Itoa(i) + "].pod.name", Err: errors.New("missing")}
		}
	}
	return nil
}

// resolve checks the threshold and builds its policy.Threshold; f is the
// field's path for errors.
func (m *Met) resolve(f string) error {
	t := &m.Threshold
	f += ".threshold"
	if t.Signal == "" {
		return &LineError{Field: f + ".signal", Err: errors.New("missing")}
	}
	if t.GracePeriod < 0 {
		return &LineError{Field: f + ".gracePeriod", Err: fmt.Errorf("negative (%d ns)", t.GracePeriod)}
	}
	if m.FirstObservedText != "" {
		var err error
		if m.FirstObserved, err = parseTime(m.FirstObservedText); err != nil {
			return &LineError{Field: strings.TrimSuffix(f, ".threshold") + ".firstObserved", Err: err}
		}
	}
	m.threshold = policy.Threshold{Signal: t.Signal, Operator: t.Operator, GracePeriod: t.GracePeriod,
		Value: policy.ThresholdValue{Percentage: t.Value.Percentage}}
	if t.Value.Quantity != nil {
		q, err := parseQuantityText(*t.Value.Quantity)
		if err != nil {
			return &LineError{Field: f + ".value.quantity", Err: err}
		}
		m.threshold.Value.Quantity = &q
	}
	return nil
}

// parseTime reads a time as encoding/json writes a time.Time (RFC 3339).
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339, e.g. 2026-01-01T00:00:00Z", s)
	}
	return t, nil
}

// maxQuantityText bounds a quantity's text: evictd writes short ones
// ("24683652Ki"), so a long one is a corrupt record, and the error should
// not quote a megabyte of it.
const maxQuantityText = 40

// parseQuantity reads a quantity as resource.Quantity writes it. Plain
// integers, the log's most common form, skip the general parser.
func parseQuantity(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	q, err := parseQuantityText(s)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

func parseQuantityText(s string) (resource.Quantity, error) {
	if s == "" {
		return resource.Quantity{}, errors.New("missing quantity")
	}
	if len(s) > maxQuantityText {
		return resource.Quantity{}, fmt.Errorf("quantity %.20q...: longer than %d characters", s, maxQuantityText)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("quantity %q: %w", s, err)
	}
	return q, nil
}

// Candidates decodes the record's ranking.
func (d *Decision) candidates() ([]Candidate, error) {
	if len(d.Candidates) == 0 || bytes.Equal(d.Candidates, []byte("null")) {
		return nil, nil
	}
	var cs []Candidate
	if err := json.Unmarshal(d.Candidates, &cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// sample is what the chart takes from the record.
func (rec *Record) sample() timeline.Sample {
	d := &rec.Decision
	s := timeline.Sample{Time: rec.Time, Conditions: d.NodeConditions}
	s.Observations = make([]timeline.Observation, len(d.Observations))
	for i, o := range d.Observations {
		s.Observations[i] = timeline.Observation{Signal: o.Signal, Available: o.available, Capacity: o.capacity}
	}
	for _, m := range d.Met {
		s.Met = append(s.Met, timeline.Met{Threshold: m.threshold, FirstObserved: m.FirstObserved})
	}
	for _, e := range d.Evictions {
		s.Evictions = append(s.Evictions, timeline.Eviction{Pod: e.Pod.Namespace + "/" + e.Pod.Name, Reason: e.Signal})
	}
	return s
}
