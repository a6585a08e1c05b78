package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/report"
)

func init() {
	cli.Register(cli.Command{
		Name:    "report",
		Summary: "render a decision log from evictd run as one self-contained HTML page",
		Run:     runReport,
	})
}

const reportHelp = `
Renders a decision log — the JSON lines 'evictd run --decision-log FILE'
writes, one record per synchronize where something happened — as one
self-contained HTML page to attach to an incident ticket:

  * a summary: the records and the time they span, the evictions, the
    triggers (timer, grace expiry, kernel wake-ups by source);
  * the timeline inline as SVG, drawn as 'evictd-tools simulate --plot' draws a
    scenario: per signal with a threshold met in the log, the available
    amount against each threshold (soft dashed, grace periods shaded), the
    node conditions as bands, each eviction a marker with the pod and reason;
  * a table of every eviction: when, the pod, the reason and grace period,
    the deciding threshold and the observed value, the wake-up or tick that
    triggered the synchronize and how long after it the decision came, what
    the kill did, the ranking it came from and the pod's status message.

The log is streamed in bounded memory (a record's line is at most 1 MiB);
docs/plot.md has measured sizes and times. The chart keeps each time
bucket's minimum and maximum, so spikes survive downsampling; the table
lists the first and last 500 evictions when there are more, and the page
says so. A malformed record is an error naming the file, line and field;
--skip-bad skips such records instead, counts them and names the first (a
partial last line, from a copy taken while evictd wrote, is always left out
and noted). Lines that are not records — log lines, text or
--log-format json, which 'kubectl logs' mixes with the records when the
decision log is standard output, with or without --timestamps — are skipped
and counted. FILE "-" is standard input. Rotated files are read oldest
first: cat FILE.3 FILE.2 FILE.1 FILE | evictd-tools report -.

Example:
  evictd run --config kubelet.yaml --decision-log /var/log/evictd/decisions.jsonl
  evictd-tools report /var/log/evictd/decisions.jsonl -o incident.html
  kubectl -n kube-system logs ds/evictd --since 2h | evictd-tools report - -o incident.html
`

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("report", "DECISIONS.jsonl [-o FILE.html]", reportHelp, stdout, stderr)
	out := fs.StringP("output", "o", "-", "write the page to this file (\"-\": standard output)")
	maxRows := fs.Int("max-rows", report.DefaultMaxRows, "list at most this many evictions in the table (the first and the last half)")
	gap := fs.Duration("gap", report.DefaultMaxGap, "break the chart's lines where records are further apart than this")
	skipBad := fs.Bool("skip-bad", false, "skip malformed records (counted, the first named on the page and on stderr) instead of failing on the first")
	// Flags may follow the file name: evictd report FILE -o out.html.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && (args[0][0] != '-' || args[0] == "-") {
		file, args = args[0], args[1:]
	}
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
		if fs.NArg() > 1 {
			fmt.Fprintf(stderr, "evictd-tools report: unexpected argument %q\n", fs.Arg(1))
			return cli.ExitError
		}
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd-tools report: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitError
	}
	if file == "" {
		fmt.Fprintln(stderr, "evictd-tools report: name the decision log (see --help)")
		return cli.ExitError
	}
	if *maxRows < 2 {
		fmt.Fprintf(stderr, "evictd-tools report: --max-rows %d: want at least 2\n", *maxRows)
		return cli.ExitError
	}
	var src io.Reader = os.Stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintln(stderr, "evictd-tools report:", err)
			return cli.ExitError
		}
		defer f.Close()
		src, name = f, file
	}
	var page bytes.Buffer
	o := report.Options{MaxRows: *maxRows, MaxGap: *gap, Now: time.Now(), SkipBad: *skipBad}
	sum, err := report.Render(&page, src, name, o)
	if err != nil {
		fmt.Fprintln(stderr, "evictd-tools report:", err)
		return cli.ExitError
	}
	if sum.NotRecords > 0 {
		fmt.Fprintf(stderr, "evictd-tools report: %d lines of %s are not decision records (log lines) and were skipped\n", sum.NotRecords, name)
	}
	if sum.Skipped > 0 {
		fmt.Fprintf(stderr, "evictd-tools report: %d malformed records skipped; the first: %s\n", sum.Skipped, sum.FirstSkipped)
	}
	if *out == "-" {
		if _, err := page.WriteTo(stdout); err != nil {
			fmt.Fprintln(stderr, "evictd-tools report:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	if err := writeFileAtomic(*out, page.Bytes()); err != nil {
		fmt.Fprintln(stderr, "evictd-tools report:", err)
		return cli.ExitError
	}
	return cli.ExitOK
}
