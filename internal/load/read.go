package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// DefaultMaxInputBytes caps the size of every input file (kubelet config,
// Summary, pods, scenarios, workloads). Decoding costs about 45 times a
// file's size in memory (a 55 MB pod list took 2.4 GB of RSS in `evictd
// qos`), so a file far above any real one is refused before it is read. 16
// MiB holds a kubectl pod list of a full node (110 pods with managedFields,
// ≈ 2–3 MB) several times over, and bounds decoding to well under 1 GB;
// --max-input-size raises it.
const DefaultMaxInputBytes int64 = 16 << 20

var maxInputBytes atomic.Int64

func init() { maxInputBytes.Store(DefaultMaxInputBytes) }

// SetMaxInputBytes sets the input size cap (a command's --max-input-size);
// n <= 0 restores the default.
func SetMaxInputBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxInputBytes
	}
	maxInputBytes.Store(n)
}

// MaxInputBytes is the current input size cap.
func MaxInputBytes() int64 { return maxInputBytes.Load() }

// ErrTooLarge: an input file is larger than the cap.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads a whole input file, refusing one larger than the cap
// without reading it all. Its errors are *Error naming the path.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	defer f.Close()
	limit := MaxInputBytes()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, &Error{File: path, Err: tooLarge(st.Size(), limit)}
	}
	// Not only regular files are read (a pipe, /dev/stdin): read at most
	// one byte more than the cap to tell a file at the cap from a larger one.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &Error{File: path, Err: tooLarge(-1, limit)}
	}
	return data, nil
}

func tooLarge(size, limit int64) error {
	if size >= 0 {
		return fmt.Errorf("%w: %d bytes, more than the %d-byte cap (raise it with --max-input-size)", ErrTooLarge, size, limit)
	}
	return fmt.Errorf("%w: more than the %d-byte cap (raise it with --max-input-size)", ErrTooLarge, limit)
}

// ErrTruncated: a YAML file whose last line has no newline.
var ErrTruncated = errors.New("the last line has no newline: the file looks truncated (a partial copy or write); end it with a newline if it is complete")

// ReadYAMLFile is ReadFile for files people write by hand (scenarios,
// workloads), which also refuses a YAML file whose last line is not ended by
// a newline. A file cut short by a partial copy or an interrupted write is
// often still valid YAML — one workload fewer, a step without its pods —
// and would be run as if it were whole; every editor and `cat >` ends a
// file with a newline, so a missing one is the sign of a cut. JSON needs no
// such check: a cut JSON document does not parse. A cut exactly at a line
// end cannot be told from a shorter file.
func ReadYAMLFile(path string) ([]byte, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	isJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed)
	if len(trimmed) > 0 && !isJSON && data[len(data)-1] != '\n' {
		return nil, &Error{File: path, Err: ErrTruncated}
	}
	return data, nil
}
