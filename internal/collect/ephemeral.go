package collect

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// emptyDirPlugin is the kubelet's directory name for emptyDir volumes.
const emptyDirPlugin = "kubernetes.io~empty-dir"

// addEphemeralStorage fills a pod's emptyDir volume stats, its containers'
// log stats and its ephemeral-storage total from the kubelet's directories,
// measured like the kubelet's du-based metrics: bytes are allocated blocks
// (st_blocks × 512) and inodes are the entries counted.
//
// Not covered: the containers' writable layers (rootfs), which only the
// container runtime (CRI) knows; docs/stat.md says so.
func (c *Collector) addEphemeralStorage(p *statsapi.PodStats, w Workload, logDirs map[string]string, now metav1.Time) {
	var totalBytes, totalInodes uint64
	found := false
	volRoot := filepath.Join(c.cfg.KubeletRoot, "pods", w.PodUID, "volumes", emptyDirPlugin)
	if vols, err := os.ReadDir(volRoot); err == nil {
		for _, v := range vols {
			if !v.IsDir() {
				continue
			}
			b, i := du(filepath.Join(volRoot, v.Name()))
			p.VolumeStats = append(p.VolumeStats, statsapi.VolumeStats{Name: v.Name(),
				FsStats: statsapi.FsStats{Time: now, UsedBytes: u64(b), InodesUsed: u64(i)}})
			totalBytes, totalInodes, found = totalBytes+b, totalInodes+i, true
		}
	}
	if logDir := logDirs[w.PodUID]; logDir != "" {
		byName := map[string]*statsapi.ContainerStats{}
		for i := range p.Containers {
			byName[p.Containers[i].Name] = &p.Containers[i]
		}
		b, i := du(logDir)
		totalBytes, totalInodes, found = totalBytes+b, totalInodes+i, true
		if es, err := os.ReadDir(logDir); err == nil {
			for _, e := range es {
				if cs, ok := byName[e.Name()]; ok && e.IsDir() {
					cb, ci := du(filepath.Join(logDir, e.Name()))
					cs.Logs = &statsapi.FsStats{Time: now, UsedBytes: u64(cb), InodesUsed: u64(ci)}
				}
			}
		}
	}
	if found {
		p.EphemeralStorage = &statsapi.FsStats{Time: now, UsedBytes: u64(totalBytes), InodesUsed: u64(totalInodes)}
	}
}

// podLogDirs maps pod UIDs to their log directories
// <PodLogsRoot>/<namespace>_<name>_<uid>, listing the root once per Summary.
func (c *Collector) podLogDirs() map[string]string {
	es, err := os.ReadDir(c.cfg.PodLogsRoot)
	if err != nil {
		return nil
	}
	m := make(map[string]string, len(es))
	for _, e := range es {
		if i := strings.LastIndexByte(e.Name(), '_'); e.IsDir() && i >= 0 {
			m[e.Name()[i+1:]] = filepath.Join(c.cfg.PodLogsRoot, e.Name())
		}
	}
	return m
}

// du returns the bytes allocated (st_blocks × 512) and inodes used under
// dir, counting each hard-linked inode once, without crossing filesystems.
func du(dir string) (bytes, inodes uint64) {
	root, err := os.Lstat(dir)
	if err != nil {
		return 0, 0
	}
	rootDev := root.Sys().(*syscall.Stat_t).Dev
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable entries are skipped, like du
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Dev != rootDev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		bytes += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	return bytes, inodes
}
