package host

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// ProcCgroup is one line of /proc/<pid>/cgroup (cgroups(7)):
// "hierarchy-ID:controller-list:cgroup-path". The cgroup v2 line is
// "0::path" (no controllers); a v1 named hierarchy lists "name=…".
type ProcCgroup struct {
	HierarchyID int
	Controllers []string // empty for the v2 line
	Path        string   // relative to the hierarchy's mount root
}

// errFieldCount is wrapped by the *ParseError for a line that is not three
// colon-separated fields.
var errFieldCount = errors.New("want hierarchy-ID:controllers:path")

// ReadSelfCgroup reads <procRoot>/self/cgroup: the cgroups of this process.
func ReadSelfCgroup(procRoot string) ([]ProcCgroup, error) {
	return readFile(procRoot+"/self/cgroup", "", parseProcCgroup)
}

func parseProcCgroup(r io.Reader) ([]ProcCgroup, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var out []ProcCgroup
	err = lines(b, func(n int, l []byte) error {
		if len(l) == 0 {
			return nil
		}
		f := bytes.SplitN(l, []byte{':'}, 3)
		if len(f) != 3 {
			return &ParseError{Line: n, Token: string(l), Err: errFieldCount}
		}
		id, err := parseUint(f[0])
		if err != nil || id > 1<<31-1 {
			return &ParseError{Line: n, Token: string(f[0]), Err: errNotNumber}
		}
		if len(f[2]) == 0 || f[2][0] != '/' {
			return &ParseError{Line: n, Token: string(f[2]), Err: errFormat}
		}
		c := ProcCgroup{HierarchyID: int(id), Path: string(f[2])}
		if len(f[1]) > 0 {
			c.Controllers = strings.Split(string(f[1]), ",")
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SelfMemoryCgroup returns the memory cgroup of this process as an absolute
// directory under memRoot, the memory controller's mount (v1: the "memory"
// controller line of <procRoot>/self/cgroup; v2: the "0::" line).
func SelfMemoryCgroup(procRoot, memRoot string, v2 bool) (string, error) {
	cs, err := ReadSelfCgroup(procRoot)
	if err != nil {
		return "", err
	}
	for _, c := range cs {
		if v2 && c.HierarchyID == 0 && len(c.Controllers) == 0 {
			return filepath.Join(memRoot, c.Path), nil
		}
		if !v2 && slices.Contains(c.Controllers, "memory") {
			return filepath.Join(memRoot, c.Path), nil
		}
	}
	return "", errors.New(procRoot + "/self/cgroup has no memory cgroup line")
}
