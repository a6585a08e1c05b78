package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/evictd/evictd/internal/host"
)

// Mode is how cgroups are mounted on a host.
type Mode int

const (
	// Unified: one cgroup2 hierarchy serves every controller.
	Unified Mode = iota + 1
	// Hybrid: controllers on cgroup v1, plus a cgroup2 mount beside them
	// (systemd's /sys/fs/cgroup/unified), which may hold some controllers
	// or none. Our machines: memory on v1, a controller-less cgroup2.
	Hybrid
	// Legacy: cgroup v1 only.
	Legacy
)

func (m Mode) String() string {
	switch m {
	case Unified:
		return "unified"
	case Hybrid:
		return "hybrid"
	case Legacy:
		return "legacy"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Hierarchy says where each controller lives.
type Hierarchy struct {
	Mode Mode
	// UnifiedRoot is the cgroup2 mount point ("" when there is none).
	UnifiedRoot string
	// UnifiedControllers are the controllers the cgroup2 root offers
	// (its cgroup.controllers).
	UnifiedControllers []string
	// V1 maps a v1 controller ("memory", "cpu", "cpuacct", "pids", …) to its
	// mount point.
	V1 map[string]string
}

// ErrNoCgroups says no cgroup filesystem is mounted.
var ErrNoCgroups = errors.New("no cgroup or cgroup2 filesystem is mounted")

// Controller returns the hierarchy root that serves ctrl and its version
// (1 or 2). A controller mounted on v1 is served there even when cgroup2 is
// mounted too: the kernel binds each controller to one hierarchy.
func (h Hierarchy) Controller(ctrl string) (root string, version int, ok bool) {
	if r, ok := h.V1[ctrl]; ok {
		return r, 1, true
	}
	if h.UnifiedRoot != "" {
		for _, c := range h.UnifiedControllers {
			if c == ctrl {
				return h.UnifiedRoot, 2, true
			}
		}
	}
	return "", 0, false
}

// Detect reads <procRoot>/self/mountinfo and the cgroup2 root's
// cgroup.controllers.
func Detect(procRoot string) (Hierarchy, error) {
	ms, err := host.ReadMountinfo(procRoot)
	if err != nil {
		return Hierarchy{}, err
	}
	return DetectFromMounts(ms, ReadCgroupControllers)
}

// DetectFromMounts works out the Hierarchy from mounts; controllers reads a
// cgroup2 directory's cgroup.controllers (ReadCgroupControllers on a live host).
func DetectFromMounts(ms []host.Mount, controllers func(dir string) ([]string, error)) (Hierarchy, error) {
	h := Hierarchy{V1: map[string]string{}}
	for _, m := range ms {
		switch m.FSType {
		case "cgroup2":
			if h.UnifiedRoot == "" {
				h.UnifiedRoot = m.MountPoint
			}
		case "cgroup":
			for _, opt := range strings.Split(m.SuperOptions, ",") {
				switch {
				case opt == "rw" || opt == "ro" || strings.HasPrefix(opt, "name=") ||
					strings.HasPrefix(opt, "release_agent=") || opt == "clone_children" ||
					opt == "noprefix" || opt == "xattr" || opt == "cpuset_v2_mode" || opt == "favordynmods":
				default:
					if _, seen := h.V1[opt]; !seen {
						h.V1[opt] = m.MountPoint
					}
				}
			}
		}
	}
	switch {
	case h.UnifiedRoot == "" && len(h.V1) == 0:
		return Hierarchy{}, ErrNoCgroups
	case len(h.V1) == 0:
		h.Mode = Unified
	case h.UnifiedRoot == "":
		h.Mode = Legacy
	default:
		h.Mode = Hybrid
	}
	if h.UnifiedRoot != "" {
		cs, err := controllers(h.UnifiedRoot)
		if err != nil {
			return Hierarchy{}, err
		}
		h.UnifiedControllers = cs
	}
	return h, nil
}

// ReadCgroupControllers reads a cgroup2 directory's cgroup.controllers: the
// controllers its parent makes available to it.
func ReadCgroupControllers(dir string) ([]string, error) {
	return ReadFile(dir, "cgroup.controllers", "4.5", ParseControllerList)
}

// ParseControllerList parses a space-separated controller list
// (cgroup.controllers, cgroup.subtree_control). An empty file is an empty
// list: a cgroup2 root with every controller on v1 has none.
func ParseControllerList(r io.Reader) ([]string, error) {
	b, err := Bytes(r)
	if err != nil {
		return nil, err
	}
	f := bytes.Fields(b)
	out := make([]string, 0, len(f))
	for _, c := range f {
		for _, ch := range c {
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
				return nil, &ParseError{Line: 1 + bytes.Count(b[:bytes.Index(b, c)], []byte{'\n'}), Token: string(c), Err: errors.New("not a controller name")}
			}
		}
		out = append(out, string(c))
	}
	return out, nil
}
