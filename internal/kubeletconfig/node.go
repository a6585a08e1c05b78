package kubeletconfig

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// NodeSource says how to find the configuration of the kubelet of this
// node (evictd run --kubernetes).
type NodeSource struct {
	// File and DropInDir are given by the user (--config, --config-dir);
	// "" to take the kubelet's own.
	File, DropInDir string
	// DefaultFile is read when File is not given and the kubelet's --config
	// is not visible here: where the DaemonSet mounts it.
	DefaultFile string
	// ProcRoot is where the kubelet's process is looked for (the host's
	// /proc in the host's PID namespace); "" not to look.
	ProcRoot string
	// NodeName is this node's name: a kubelet whose --hostname-override
	// names another node is not this node's (a test cluster on the same
	// host, kind's nodes seen from the host).
	NodeName string
}

// Note is something ReadNode found worth a log line; the caller logs it
// once its own checks have passed, so that a bad flag is still one line.
type Note struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// ReadNode reads the configuration of this node's kubelet as the kubelet
// reads it and lays the eviction flags of its command line over it, as the
// kubelet does: the result is the kubelet's own thresholds. The kubelet's
// --config and --config-dir, from its command line in /proc, are read when
// not given and visible at the same path (on the host; in a pod, where
// mounted there); otherwise the given file or DefaultFile (a missing
// DefaultFile is the kubelet's defaults, with a warning). The notes say what
// it found and what it cannot see (a --config-dir evictd cannot read).
func ReadNode(ns NodeSource) (*Config, []Note, error) {
	var notes []Note
	note := func(l slog.Level, msg string, args ...any) { notes = append(notes, Note{l, msg, args}) }
	src := Source{File: ns.File, DropInDir: ns.DropInDir}
	var kp *KubeletProcess
	if ns.ProcRoot != "" {
		var err error
		switch kp, err = FindKubelet(ns.ProcRoot); {
		case err != nil:
			note(slog.LevelWarn, "cannot tell the kubelet's command line: its --config, --config-dir and eviction flags are not known here", "err", err)
		case kp == nil:
			note(slog.LevelInfo, "no kubelet process is visible (k3s runs its kubelet inside its own process): its command line, and any eviction flags on it, are not known here", "proc", ns.ProcRoot)
		case kp.HostnameOverride != "" && ns.NodeName != "" && !strings.EqualFold(kp.HostnameOverride, ns.NodeName):
			note(slog.LevelInfo, "the kubelet process visible here is another node's (its --hostname-override): its command line is not used", "pid", kp.PID, "hostname_override", kp.HostnameOverride, "node", ns.NodeName)
			kp = nil
		default:
			note(slog.LevelInfo, "the kubelet's command line", "pid", kp.PID, "config", kp.ConfigFile, "config_dir", kp.ConfigDir, "eviction_flags", kp.EvictionArgs)
		}
	}
	if kp != nil {
		if src.File == "" && kp.ConfigFile != "" && visible(kp.ConfigFile, false) {
			src.File = kp.ConfigFile
		}
		if src.DropInDir == "" && kp.ConfigDir != "" {
			if visible(kp.ConfigDir, true) {
				src.DropInDir = kp.ConfigDir
			} else {
				note(slog.LevelWarn, "the kubelet merges the drop-ins of its --config-dir, which evictd cannot read here: evictd's thresholds are its config file's and may not be the kubelet's; mount the directory and pass --config-dir", "config_dir", kp.ConfigDir)
			}
		}
	}
	explicit := src.File != ""
	if !explicit {
		src.File = ns.DefaultFile
	}
	if kp != nil && kp.ConfigFile != "" && src.File != kp.ConfigFile {
		note(slog.LevelInfo, "evictd reads a kubelet configuration file at another path than the kubelet's --config (in a pod: mounted there?)", "file", src.File, "kubelet_config", kp.ConfigFile)
	}
	c, err := Read(src)
	if err != nil && !explicit && errors.Is(err, fs.ErrNotExist) {
		note(slog.LevelWarn, "no kubelet configuration file; using the kubelet's defaults (pass --config if the kubelet reads another file)", "file", src.File)
		c, err = Read(Source{DropInDir: src.DropInDir})
	}
	if err != nil {
		return nil, nil, err
	}
	for _, w := range c.Warnings {
		note(slog.LevelWarn, "the kubelet's configuration has a field evictd does not know or a duplicate key; read leniently, as the kubelet does", "warning", w)
	}
	c.Process = kp
	if kp != nil && len(kp.EvictionArgs) > 0 {
		if err := c.ApplyFlags(kp.Eviction, "the kubelet's"); err != nil {
			return nil, nil, err
		}
		note(slog.LevelInfo, "the kubelet's command line sets eviction settings; laid over its configuration as the kubelet lays them", "flags", kp.EvictionArgs)
	}
	return c, notes, nil
}

// visible reports whether path exists here as a directory (dir) or a file.
func visible(path string, dir bool) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir() == dir
}
