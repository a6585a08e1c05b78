package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// tableWidth is the width the table output fits (terminal default plus margin).
const tableWidth = 100

// Report is the JSON form of a lint run.
type Report struct {
	// Source says what was linted: the file and/or the flags.
	Source   string    `json:"source"`
	Findings []Finding `json:"findings"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
	Infos    int       `json:"infos"`
}

// NewReport counts the findings.
func NewReport(source string, findings []Finding) Report {
	if findings == nil {
		findings = []Finding{}
	}
	e, w, i := Counts(findings)
	return Report{Source: source, Findings: findings, Errors: e, Warnings: w, Infos: i}
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the report for people: one block per finding, wrapped
// to 100 columns.
func WriteTable(w io.Writer, r Report) {
	fmt.Fprintf(w, "Linted %s\n", r.Source)
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "No findings: the kubelet accepts this configuration and none of the known pitfalls apply.")
		return
	}
	const indent = "         " // under the field, after the severity column
	for _, f := range r.Findings {
		fmt.Fprintln(w)
		head := f.Field
		if f.Value != "" {
			head += " = " + quote(f.Value)
		}
		writeWrapped(w, fmt.Sprintf("%-7s  ", strings.ToUpper(string(f.Severity))), head, indent)
		writeWrapped(w, indent, f.Message, indent)
		writeWrapped(w, indent+"why: ", f.Why, indent+"     ")
		writeWrapped(w, indent+"fix: ", f.Fix, indent+"     ")
		fmt.Fprintf(w, "%s(%s)\n", indent, f.Rule)
	}
	fmt.Fprintf(w, "\n%d error(s), %d warning(s), %d info(s)\n", r.Errors, r.Warnings, r.Infos)
}

func quote(s string) string {
	if strings.ContainsAny(s, " \t\"") || s == "" {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// writeWrapped writes prefix and text wrapped at tableWidth on word
// boundaries; continuation lines start with indent. A word longer than the
// width is not split.
func writeWrapped(w io.Writer, prefix, text, indent string) {
	line := prefix
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && len([]rune(line))+1+len([]rune(word)) > tableWidth {
			fmt.Fprintln(w, line)
			line, empty = indent, true
		}
		if empty {
			line += word
			empty = false
		} else {
			line += " " + word
		}
	}
	fmt.Fprintln(w, line)
}
