package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/evictd/evictd/internal/report"
)

func init() {
	register(command{
		name:    "report",
		summary: "render a decision log from evictd run as one self-contained HTML page",
		run:     runReport,
	})
}

const reportHelp = `
Renders a decision log — the JSON lines 'evictd run --decision-log FILE'
writes, one record per synchronize where something happened — as one
self-contained HTML page to attach to an incident ticket:

  * a summary: the records and the time they span, the evictions, the
    triggers (timer, grace expiry, kernel wake-ups by source);
  * the timeline inline as SVG, drawn as 'evictd simulate --plot' draws a
    scenario: per signal with a threshold met in the log, the available
    amount against each threshold (soft dashed, grace periods shaded), the
    node conditions as bands, each eviction a marker with the pod and reason;
  * a table of every eviction: when, the pod, the reason and grace period,
    the deciding threshold and the observed value, the wake-up or tick that
    triggered the synchronize and how long after it the decision came, what
    the kill did, the ranking it came from and the pod's status message.

The log is streamed: a week at one record per second renders in seconds in
bounded memory. The chart keeps each time bucket's minimum and maximum, so
spikes survive downsampling; the table lists the first and last 500
evictions when there are more, and the page says so. A malformed record is
an error naming the file, line and field (a partial last line, from a copy
taken while evictd wrote, is left out and noted). FILE "-" is standard input.

Example:
  evictd run --config kubelet.yaml --decision-log /var/log/evictd/decisions.jsonl
  evictd report /var/log/evictd/decisions.jsonl -o incident.html
`

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", "DECISIONS.jsonl [-o FILE.html]", reportHelp, stdout, stderr)
	out := fs.StringP("output", "o", "-", "write the page to this file (\"-\": standard output)")
	maxRows := fs.Int("max-rows", report.DefaultMaxRows, "list at most this many evictions in the table (the first and the last half)")
	gap := fs.Duration("gap", report.DefaultMaxGap, "break the chart's lines where records are further apart than this")
	// Flags may follow the file name: evictd report FILE -o out.html.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && (args[0][0] != '-' || args[0] == "-") {
		file, args = args[0], args[1:]
	}
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
		if fs.NArg() > 1 {
			fmt.Fprintf(stderr, "evictd report: unexpected argument %q\n", fs.Arg(1))
			return exitError
		}
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd report: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}
	if file == "" {
		fmt.Fprintln(stderr, "evictd report: name the decision log (see --help)")
		return exitError
	}
	if *maxRows < 2 {
		fmt.Fprintf(stderr, "evictd report: --max-rows %d: want at least 2\n", *maxRows)
		return exitError
	}
	var src io.Reader = os.Stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintln(stderr, "evictd report:", err)
			return exitError
		}
		defer f.Close()
		src, name = f, file
	}
	var page bytes.Buffer
	o := report.Options{MaxRows: *maxRows, MaxGap: *gap, Now: time.Now()}
	if err := report.Render(&page, src, name, o); err != nil {
		fmt.Fprintln(stderr, "evictd report:", err)
		return exitError
	}
	if *out == "-" {
		if _, err := page.WriteTo(stdout); err != nil {
			fmt.Fprintln(stderr, "evictd report:", err)
			return exitError
		}
		return exitOK
	}
	if err := writeFileAtomic(*out, page.Bytes()); err != nil {
		fmt.Fprintln(stderr, "evictd report:", err)
		return exitError
	}
	return exitOK
}
