package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds of the decision log. A record is 1–30 KB (the ranking is most of
// it: about 240 bytes per pod); under steady pressure the agent writes one
// only when something changed and a heartbeat every DecisionLogHeartbeat
// (see logFilter), so 32 MiB holds days of an incident, and the whole log
// never takes more than MaxSize × (Keep + 1) of the disk it may be
// protecting.
const (
	DefaultDecisionLogMaxSize = 32 << 20
	DefaultDecisionLogKeep    = 3
	// DefaultDecisionLogQueue records may wait for a slow disk or pipe
	// (with at most maxQueuedBytes of them); more are dropped and counted.
	DefaultDecisionLogQueue = 256
	maxQueuedBytes          = 8 << 20
	// outputFileMode: the log names the node's workloads and their usage,
	// which is the node owner's and their group's business.
	outputFileMode = 0o640
)

// DecisionLogOptions bound the decision log file.
type DecisionLogOptions struct {
	// MaxSize rotates the file when the next record would take it past
	// this many bytes (0: never).
	MaxSize int64
	// Keep is how many rotated files are kept: PATH.1 (the newest) to
	// PATH.Keep; 0 keeps none.
	Keep int
	// Queue is how many records may wait for the disk (0:
	// DefaultDecisionLogQueue).
	Queue int
}

// DecisionLog writes one JSON object per line: a Record, whose decision is
// the same data `evictd explain -o json` prints.
//
// The agent hands records to Log, which queues them for a goroutine of the
// log's own: a slow or full disk or a stalled pipe never delays a decision
// or a kill, and a record that does not fit in the queue is dropped and
// counted. A record is written with one write(2) of the whole line. When a
// write fails (ENOSPC, EIO), a partial line is cut off again, the file is
// closed, and the next record reopens it: the log resumes as soon as the
// disk has room, and a reader never sees half a record.
//
// The file is a regular file or nothing: a symbolic link, a FIFO or a
// device at the path is refused (O_NOFOLLOW, and the opened file checked).
// It is rotated at MaxSize, reopened on Reopen (SIGHUP), and reopened when
// it was renamed or removed under it (logrotate without copytruncate), so
// a record never goes to a file nobody will read.
type DecisionLog struct {
	mu       sync.Mutex
	path     string    // "" when writing to w (standard output)
	w        io.Writer // standard output, or nil for a file
	opts     DecisionLogOptions
	f        *os.File // the open file; nil after a failed write
	dev, ino uint64   // of f, to tell a renamed or removed file
	done     bool     // closed: never reopen

	q      *Queue[[]byte]
	queued atomic.Int64 // bytes waiting in q
}

// NewDecisionLog writes to w.
func NewDecisionLog(w io.Writer) *DecisionLog {
	l := &DecisionLog{w: w}
	l.start()
	return l
}

// OpenDecisionLog appends to the file at path ("-" is standard output),
// creating it (mode 0640) and its directory if needed.
func OpenDecisionLog(path string, o DecisionLogOptions) (*DecisionLog, error) {
	if path == "-" {
		return NewDecisionLog(os.Stdout), nil
	}
	l := &DecisionLog{path: path, opts: o}
	if err := l.open(); err != nil {
		return nil, err
	}
	l.start()
	return l, nil
}

func (l *DecisionLog) start() {
	n := l.opts.Queue
	if n <= 0 {
		n = DefaultDecisionLogQueue
	}
	l.q = NewQueue(n, func(b []byte) error {
		defer l.queued.Add(-int64(len(b)))
		return l.writeLine(b)
	})
}

func (l *DecisionLog) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := openRegular(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, outputFileMode)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f = f
	l.dev, l.ino = fileID(st)
	return nil
}

// openRegular opens path as evictd opens its own files: never through a
// symbolic link at the path (O_NOFOLLOW), never blocking on a FIFO with no
// reader or writer (O_NONBLOCK; a FIFO without a reader is ENXIO), and only
// a regular file: anything else is refused before and after the open.
func openRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil {
		if err := checkRegular(path, st.Mode()); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%s: is a symbolic link, want a file (evictd writes and reads its own files only as regular files)", path)
	case errors.Is(err, syscall.ENXIO):
		return nil, fmt.Errorf("%s: is a FIFO or socket, want a file", path)
	case err != nil:
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkRegular(path, st.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular refuses a path that is not a regular file, naming what it is.
func checkRegular(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	what := "not a regular file"
	switch {
	case m&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%s: is %s, want a file (evictd writes and reads its own files only as regular files)", path, what)
}

// CheckOutputPath refuses a path that exists and is not a regular file (a
// symbolic link, a FIFO, a device, a directory), as the decision log and
// the state file refuse it when opened: for --check and the start.
func CheckOutputPath(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil // missing: created when written
	}
	return checkRegular(path, st.Mode())
}

func fileID(st fs.FileInfo) (dev, ino uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), s.Ino
	}
	return 0, 0
}

// encodeRecord is one record as its log line.
func encodeRecord(r Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // thresholds and messages hold '<' and quotes
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write appends r as one line now, on the caller's goroutine (tools and
// tests; the agent uses Log).
func (l *DecisionLog) Write(r Record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	return l.writeLine(b)
}

// Log queues r for the log's goroutine and reports whether it fit. It
// never blocks on the disk.
func (l *DecisionLog) Log(r Record) bool {
	b, err := encodeRecord(r)
	if err != nil {
		return false
	}
	if l.queued.Add(int64(len(b))) > maxQueuedBytes {
		l.queued.Add(-int64(len(b)))
		l.q.mu.RLock()
		l.q.countDrop()
		l.q.mu.RUnlock()
		return false
	}
	if !l.q.Put(b) {
		l.queued.Add(-int64(len(b)))
		return false
	}
	return true
}

// setHooks tells the log where to report each write's outcome and each
// dropped record (the agent's fault tracking and metrics).
func (l *DecisionLog) setHooks(result func(error), dropped func()) {
	l.q.SetResult(result)
	l.q.SetDropped(dropped)
}

// Dropped is how many records did not fit in the queue.
func (l *DecisionLog) Dropped() uint64 { return l.q.Dropped() }

func (l *DecisionLog) writeLine(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		_, err := l.w.Write(b)
		return err
	}
	if l.done {
		return fmt.Errorf("%s: %w", l.path, os.ErrClosed)
	}
	if l.f != nil && l.moved() {
		// Renamed or removed (logrotate): the records belong in a file at
		// the path, not in one nobody will read.
		l.f.Close()
		l.f = nil
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
	size := st.Size()
	if l.opts.MaxSize > 0 && size > 0 && size+int64(len(b)) > l.opts.MaxSize {
		if err := l.rotate(); err != nil {
			return fmt.Errorf("rotating %s: %w", l.path, err)
		}
		size = 0
	}
	if n, err := l.f.Write(b); err != nil {
		if n > 0 {
			_ = l.f.Truncate(size)
		}
		return l.fail(err)
	}
	return nil
}

// moved reports whether the path no longer names the open file.
func (l *DecisionLog) moved() bool {
	st, err := os.Lstat(l.path)
	if err != nil {
		return true
	}
	dev, ino := fileID(st)
	return dev != l.dev || ino != l.ino
}

// rotate shifts PATH.1 … to PATH.2 …, dropping the oldest beyond Keep,
// moves PATH to PATH.1 and opens a new PATH.
func (l *DecisionLog) rotate() error {
	l.f.Close()
	l.f = nil
	if l.opts.Keep <= 0 {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return l.open()
	}
	if err := os.Remove(fmt.Sprintf("%s.%d", l.path, l.opts.Keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := l.opts.Keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.open()
}

// fail closes the file after a failed write so that the next write starts
// on a fresh descriptor.
func (l *DecisionLog) fail(err error) error {
	l.f.Close()
	l.f = nil
	return fmt.Errorf("%s: %w", l.path, err)
}

// Reopen closes the file and opens the path again (SIGHUP, after an
// external rotation), after the records queued before it. Standard output
// is not reopened.
func (l *DecisionLog) Reopen() error {
	if l.path == "" {
		return nil
	}
	var err error
	if !l.q.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.done {
			return
		}
		if l.f != nil {
			l.f.Close()
			l.f = nil
		}
		err = l.open()
	}, DefaultFlushTimeout) {
		return fmt.Errorf("%s: the writer is still busy with an earlier write after %s", l.path, DefaultFlushTimeout)
	}
	return err
}

// Flush waits at most wait for the queued records to be written.
func (l *DecisionLog) Flush(wait time.Duration) bool { return l.q.Flush(wait) }

// Close writes what is queued (waiting at most DefaultFlushTimeout: a pipe
// nobody reads must not hold up the exit) and closes the file (not
// standard output).
func (l *DecisionLog) Close() error {
	if !l.q.Close(DefaultFlushTimeout) {
		// The writer is stuck in a write (a pipe nobody reads) and holds
		// the file: leave both to the exit.
		return fmt.Errorf("decision log: records still queued after %s: the output does not take them", DefaultFlushTimeout)
	}
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
