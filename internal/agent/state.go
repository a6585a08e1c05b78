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
	"time"

	"github.com/evictd/evictd/internal/policy"
)

// stateVersion guards the state file's shape.
const stateVersion = 1

// MaxStateFileBytes caps the state file before it is read: a real one is a
// few KiB (thresholds met, conditions, last observations), so anything near
// this is not evictd's, and reading it whole would cost its size in memory.
const MaxStateFileBytes = 1 << 20

type stateFile struct {
	Version int          `json:"version"`
	State   policy.State `json:"state"`
	// Evicting is the eviction whose grace period was running when the
	// agent stopped (or when this state was saved): the next start finishes
	// it at its deadline instead of deciding again from scratch.
	Evicting *PendingEviction `json:"evicting,omitempty"`
}

// PendingEviction is an eviction whose grace period is running.
type PendingEviction struct {
	Pod      policy.PodRef   `json:"pod"`
	Eviction policy.Eviction `json:"eviction"`
	Grace    time.Duration   `json:"graceNs"`
	Started  time.Time       `json:"started"`
	Deadline time.Time       `json:"deadline"`
}

// LoadState reads a state file. A missing file is (nil, nil): a first start.
// A corrupt or foreign file is (nil, err): the caller warns and starts fresh.
func LoadState(path string) (*policy.State, error) {
	f, err := loadStateFile(path)
	if f == nil {
		return nil, err
	}
	return &f.State, nil
}

func loadStateFile(path string) (*stateFile, error) {
	fd, err := openRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if st, err := fd.Stat(); err == nil && st.Size() > MaxStateFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a state file can be: not evictd's", path, st.Size(), MaxStateFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(fd, MaxStateFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxStateFileBytes {
		return nil, fmt.Errorf("%s: more than the %d bytes a state file can be: not evictd's", path, MaxStateFileBytes)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: corrupt: %w", path, err)
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, f.Version, stateVersion)
	}
	return &f, nil
}

// SaveState writes the state atomically: a temporary file in the same
// directory, fsync, rename, fsync of the directory. A crash leaves the old
// file or the new one, never half of one.
func SaveState(path string, s policy.State) error {
	b, err := json.Marshal(stateFile{Version: stateVersion, State: s})
	if err != nil {
		return err
	}
	return saveStateBytes(path, b)
}

func saveStateBytes(path string, b []byte) error { return writeFileAtomic(path, b, outputFileMode) }

// writeFileAtomic writes b to path atomically: a temporary file in the same
// directory (made if missing), fsync, rename, fsync of the directory. A
// link, a FIFO or a device at path is refused, not replaced.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := CheckOutputPath(path); err != nil {
		return err // the rename would replace a link or a FIFO someone put there
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// stateWriter saves the state file off the eviction loop. Only the newest
// state matters, so it holds one: a state handed over while an older one is
// still being written replaces the one waiting. A state equal to the last
// one handed over (apart from the last observations, which move every
// synchronize and only filter stale stats) is not written at all: an idle
// node writes its state file once, not 8,640 times a day.
type stateWriter struct {
	file *latestFile

	mu      sync.Mutex
	lastKey []byte // what the last handed-over state compares as
}

func newStateWriter(path string, result func(error)) *stateWriter {
	w := &stateWriter{}
	w.file = newLatestFile(func(b []byte) error { return saveStateBytes(path, b) }, func(err error, newer bool) {
		if err != nil && !newer {
			// Not written: the next synchronize hands it over again, even
			// if nothing changed (the retry the error log line promises).
			w.mu.Lock()
			w.lastKey = nil
			w.mu.Unlock()
		}
		if result != nil {
			result(err)
		}
	})
	return w
}

// save hands f over to be written, unless it equals the last state handed
// over.
func (w *stateWriter) save(f stateFile) {
	last := f.State.LastObservations
	f.State.LastObservations = nil
	key, err := json.Marshal(f)
	if err != nil {
		return
	}
	f.State.LastObservations = last
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	w.mu.Lock()
	same := bytes.Equal(key, w.lastKey)
	if !same {
		w.lastKey = key
	}
	w.mu.Unlock()
	if !same {
		w.file.set(b)
	}
}

// flush waits at most wait for the state handed over to be written.
func (w *stateWriter) flush(wait time.Duration) bool { return w.file.flush(wait) }
