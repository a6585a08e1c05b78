package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// DecisionLog writes one JSON object per line: a Record, whose decision is
// the same data `evictd explain -o json` prints.
//
// A record is written with one write(2) of the whole line. When a write to
// the file fails (ENOSPC, EIO), a partial line is cut off again, the file is
// closed, and the next Write reopens it: the log resumes as soon as the disk
// has room, and a reader never sees half a record.
type DecisionLog struct {
	mu   sync.Mutex
	path string    // "" when writing to w (standard output)
	w    io.Writer // standard output, or nil for a file
	f    *os.File  // the open file; nil after a failed write
	done bool      // closed: never reopen
}

// NewDecisionLog writes to w.
func NewDecisionLog(w io.Writer) *DecisionLog {
	return &DecisionLog{w: w}
}

// OpenDecisionLog appends to the file at path ("-" is standard output),
// creating its directory if needed.
func OpenDecisionLog(path string) (*DecisionLog, error) {
	if path == "-" {
		return NewDecisionLog(os.Stdout), nil
	}
	l := &DecisionLog{path: path}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *DecisionLog) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// Write appends r as one line.
func (l *DecisionLog) Write(r Record) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // thresholds and messages hold '<' and quotes
	if err := enc.Encode(r); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		_, err := l.w.Write(buf.Bytes())
		return err
	}
	if l.done {
		return fmt.Errorf("%s: %w", l.path, os.ErrClosed)
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return fmt.Errorf("reopening %s: %w", l.path, err)
		}
	}
	// With O_APPEND every write lands at the end; the end before the write
	// is where a partial line must be cut.
	st, err := l.f.Stat()
	if err != nil {
		return l.fail(err)
	}
	if n, err := l.f.Write(buf.Bytes()); err != nil {
		if n > 0 {
			_ = l.f.Truncate(st.Size())
		}
		return l.fail(err)
	}
	return nil
}

// fail closes the file after a failed write so that the next Write starts on
// a fresh descriptor.
func (l *DecisionLog) fail(err error) error {
	l.f.Close()
	l.f = nil
	return fmt.Errorf("%s: %w", l.path, err)
}

// Close closes the file (not standard output).
func (l *DecisionLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if l.f != nil {
		err := l.f.Close()
		l.f = nil
		return err
	}
	return nil
}
