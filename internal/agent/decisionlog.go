package agent

import (
	"encoding/json"
	"io"
	"os"
	"sync"
)

// DecisionLog writes one JSON object per line: a Record, whose decision is
// the same data `evictd explain -o json` prints.
type DecisionLog struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	c   io.Closer
}

// NewDecisionLog writes to w.
func NewDecisionLog(w io.Writer) *DecisionLog {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // thresholds and messages hold '<' and quotes
	return &DecisionLog{w: w, enc: enc}
}

// OpenDecisionLog appends to the file at path ("-" is standard output).
func OpenDecisionLog(path string) (*DecisionLog, error) {
	if path == "-" {
		return NewDecisionLog(os.Stdout), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l := NewDecisionLog(f)
	l.c = f
	return l, nil
}

// Write appends r as one line.
func (l *DecisionLog) Write(r Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enc.Encode(r)
}

// Close closes the file (not standard output).
func (l *DecisionLog) Close() error {
	if l.c != nil {
		return l.c.Close()
	}
	return nil
}
