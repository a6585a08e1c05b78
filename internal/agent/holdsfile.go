package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/evictd/evictd/internal/actuate"
)

// maxHoldsFile bounds the holds file read at start-up: a record is a few
// hundred bytes, and a node has at most a few hundred pods.
const maxHoldsFile = 1 << 20

// HoldsFile is where the agent keeps the growth stops in force (path: the
// state file's, with ".holds"), so that one a crash leaves behind is undone
// at the next start: its workload would otherwise stay at its limit with
// nothing to end it (on cgroup v1 asleep at the limit for good). It is
// written off the eviction path, by its own goroutine, the latest set
// winning; removed when no stop is in force.
type HoldsFile struct {
	path string
	log  *slog.Logger
	file *latestFile

	mu      sync.Mutex
	lastErr string // the last write's outcome, logged when it changes
}

// HoldsPath is the holds file kept beside stateFile.
func HoldsPath(stateFile string) string { return stateFile + ".holds" }

// OpenHoldsFile undoes the growth stops a previous run left in path (one log
// line for each) and starts the writer.
func OpenHoldsFile(path string, log *slog.Logger) *HoldsFile {
	f := &HoldsFile{path: path, log: log}
	f.undoLeftovers()
	f.file = newLatestFile(f.write, func(err error, _ bool) { f.logOutcome(err) })
	return f
}

func (f *HoldsFile) undoLeftovers() {
	fh, err := openRegular(f.path, os.O_RDONLY, 0) // never a link, never blocking on a FIFO
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		f.log.Warn("cannot read the growth stops a previous run left; any still in force stay", "file", f.path, "err", err)
		return
	}
	var recs []actuate.HoldRecord
	err = json.NewDecoder(&limitedReader{r: fh, n: maxHoldsFile}).Decode(&recs)
	fh.Close()
	if err != nil {
		f.log.Warn("the growth stops file a previous run left is corrupt; any stop still in force stays", "file", f.path, "err", err)
		os.Remove(f.path)
		return
	}
	for _, r := range recs {
		undone, changed, err := actuate.UndoRecord(r)
		attrs := []any{"workload", r.Workload, "mechanism", r.Mechanism, "files_undone", undone}
		if changed > 0 {
			attrs = append(attrs, "files_changed_since_left_alone", changed)
		}
		if err != nil {
			f.log.Warn("cannot fully undo a growth stop a previous run left", append(attrs, "err", err)...)
			continue
		}
		f.log.Warn("undid a growth stop a previous run of evictd left in force", attrs...)
	}
	os.Remove(f.path)
}

// Set records the stops in force now (nil: none), for the writer.
func (f *HoldsFile) Set(recs []actuate.HoldRecord) {
	if len(recs) == 0 {
		f.file.set(nil)
		return
	}
	b, err := json.Marshal(recs)
	if err != nil {
		f.logOutcome(err)
		return
	}
	f.file.set(b)
}

// Close writes the last set and stops the writer.
func (f *HoldsFile) Close() { f.file.close() }

// write writes the records, or removes the file when there are none.
func (f *HoldsFile) write(b []byte) error {
	if b == nil {
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(f.path, b, outputFileMode)
}

// logOutcome logs a write's outcome when it changes.
func (f *HoldsFile) logOutcome(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	f.mu.Lock()
	changed := msg != f.lastErr
	f.lastErr = msg
	f.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		f.log.Warn("cannot keep the growth stops in force on disk; a crash now would leave them in place", "file", f.path, "err", err)
	default:
		f.log.Info("growth stops file writable again", "file", f.path)
	}
}

// limitedReader fails once more than n bytes were read.
type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("longer than %d bytes", maxHoldsFile)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
