package host

import (
	"bytes"
	"io"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo (proc(5)).
type Mount struct {
	ID, Parent   int
	Major, Minor uint64
	Root         string // the mount's root within its filesystem
	MountPoint   string
	Options      string // per-mount options
	FSType       string // e.g. "cgroup", "cgroup2", "ext4"
	Source       string
	SuperOptions string // per-superblock options; a v1 cgroup lists its controllers here
}

// ReadMountinfo reads <procRoot>/self/mountinfo.
func ReadMountinfo(procRoot string) ([]Mount, error) {
	return readFile(procRoot+"/self/mountinfo", "", ParseMountinfo)
}

// ParseMountinfo parses the mountinfo format:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var ms []Mount
	err = lines(b, func(n int, l []byte) error {
		if len(l) == 0 {
			return nil
		}
		f := bytes.Fields(l)
		sep := -1
		for i := 6; i < len(f); i++ {
			if string(f[i]) == "-" {
				sep = i
				break
			}
		}
		if len(f) < 10 || sep < 0 || len(f) < sep+4 {
			return &ParseError{Line: n, Token: string(l), Err: errFormat}
		}
		var m Mount
		id, err := parseUint(f[0])
		if err != nil {
			return &ParseError{Line: n, Token: string(f[0]), Err: err}
		}
		parent, err := parseUint(f[1])
		if err != nil {
			return &ParseError{Line: n, Token: string(f[1]), Err: err}
		}
		m.ID, m.Parent = int(id), int(parent)
		c := bytes.IndexByte(f[2], ':')
		if c <= 0 {
			return &ParseError{Line: n, Token: string(f[2]), Err: errFormat}
		}
		if m.Major, err = parseUint(f[2][:c]); err != nil {
			return &ParseError{Line: n, Token: string(f[2]), Err: err}
		}
		if m.Minor, err = parseUint(f[2][c+1:]); err != nil {
			return &ParseError{Line: n, Token: string(f[2]), Err: err}
		}
		m.Root = unescapeOctal(string(f[3]))
		m.MountPoint = unescapeOctal(string(f[4]))
		m.Options = string(f[5])
		m.FSType = string(f[sep+1])
		m.Source = unescapeOctal(string(f[sep+2]))
		m.SuperOptions = string(f[sep+3])
		ms = append(ms, m)
		return nil
	})
	return ms, err
}

// unescapeOctal undoes the kernel's \040-style escaping of spaces, tabs,
// newlines and backslashes in paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOct(s[i+1]) && isOct(s[i+2]) && isOct(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOct(c byte) bool { return c >= '0' && c <= '7' }
