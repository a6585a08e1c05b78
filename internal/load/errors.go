package load

import (
	"errors"
	"fmt"
	"strings"

	"github.com/evictd/evictd/internal/safetext"
)

// Sentinel causes, for errors.Is on an *Error's Err.
var (
	// ErrEmpty: the file has no content (or only whitespace and comments).
	ErrEmpty = errors.New("file is empty")
	// ErrUnknownField: a field the Kubernetes type does not have (often a typo).
	ErrUnknownField = errors.New("unknown field")
	// ErrDuplicateKey: the same key appears twice in one map or object; the
	// kubelet would silently keep the last one.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrWrongDocument: an object none of whose keys is a field of the
	// expected type — the wrong file, whose keys are not repeated in the
	// error (they may be secrets).
	ErrWrongDocument = errors.New("none of its keys is a field of this kind of document (is it the right file?)")
)

// maxValueLen bounds the value quoted in an error so that the error stays one
// readable line even when the offending value is a whole object.
const maxValueLen = 60

// Error is a decoding error that names the file, the field path inside it
// (dot-separated, list indexes in brackets, e.g. "spec.containers[0].name")
// and the offending value. Field and Value are empty when they do not apply
// (an empty file, a YAML syntax error).
type Error struct {
	File  string
	Field string
	Value string
	Err   error
}

// Error renders the error as one line: "file: field: "value": cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(safetext.Escape(e.Field)) // a YAML key may hold a newline or an escape
	}
	if e.Value != "" {
		v := e.Value
		if len(v) > maxValueLen {
			v = v[:maxValueLen] + "…"
		}
		fmt.Fprintf(&b, ": %q", v)
	}
	b.WriteString(": ")
	if e.Err == nil {
		b.WriteString("invalid")
	} else {
		// Causes from YAML and JSON decoders may span lines; keep one.
		b.WriteString(oneLine(e.Err.Error()))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	}
	return prefix + "." + field
}
