package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evictd/evictd/internal/policy"
)

// stateVersion guards the state file's shape.
const stateVersion = 1

type stateFile struct {
	Version int          `json:"version"`
	State   policy.State `json:"state"`
}

// LoadState reads a state file. A missing file is (nil, nil): a first start.
// A corrupt or foreign file is (nil, err): the caller warns and starts fresh.
func LoadState(path string) (*policy.State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: corrupt: %w", path, err)
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, f.Version, stateVersion)
	}
	return &f.State, nil
}

// SaveState writes the state atomically: a temporary file in the same
// directory, fsync, rename, fsync of the directory. A crash leaves the old
// file or the new one, never half of one.
func SaveState(path string, s policy.State) error {
	b, err := json.Marshal(stateFile{Version: stateVersion, State: s})
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o644)
}

// writeFileAtomic writes b to path atomically: a temporary file in the same
// directory (made if missing), fsync, rename, fsync of the directory.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
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
