package protect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/workload"
)

// Row compares one file of one cgroup (or the oom_score_adj of one
// workload's processes) with what evictd keeps there.
type Row struct {
	Workload string         `json:"workload"` // "(workload root)" for the root
	Cgroup   string         `json:"cgroup"`
	QOSClass v1.PodQOSClass `json:"qosClass,omitempty"`
	File     string         `json:"file"` // memory.min, memory.low, memory.high or oom_score_adj
	Want     string         `json:"want"`
	// Now is what the kernel holds: the file's value; for oom_score_adj the
	// distinct values of the processes with their counts ("875", or
	// "875 ×2, 0 ×1"); "-" when the workload has no process; an error's text
	// when it could not be read.
	Now     string `json:"now"`
	Differs bool   `json:"differs"`
}

// Observe reads what is written now on the workloads ws under root and
// compares it with what Apply keeps there, for `evictd qos --live`. As in
// the agent, only workloads holding a process count (for the root's
// aggregates too); empty ones are left out. evictd's own process is not
// listed among its workload's processes.
func Observe(s memqos.Settings, root, procRoot string, ws []workload.Workload) []Row {
	if procRoot == "" {
		procRoot = "/proc"
	}
	p := &Protector{cfg: Config{Settings: s, Root: filepath.Clean(root), ProcRoot: procRoot}}
	var rows []Row
	var pods []*v1.Pod
	for i := range ws {
		w := &ws[i]
		if !p.inside(w.Cgroup) {
			continue
		}
		pids, err := p.readProcs(w.Cgroup)
		if err != nil || len(pids) == 0 {
			continue
		}
		pods = append(pods, w.Pod)
		files, oom := memqos.HostWorkload(w.Pod, s)
		qos := memqos.ForPod(w.Pod, s).QOSClass
		for _, r := range observeFiles(w.Cgroup, files) {
			r.Workload, r.QOSClass = w.Pod.Name, qos
			rows = append(rows, r)
		}
		rows = append(rows, observeOOM(w.Pod.Name, w.Cgroup, qos, procRoot, pids, oom))
	}
	for _, r := range observeFiles(p.cfg.Root, memqos.HostRoot(pods, s)) {
		r.Workload = "(workload root)"
		rows = append(rows, r)
	}
	return rows
}

func observeFiles(dir string, files memqos.CgroupFiles) []Row {
	var rows []Row
	for _, mf := range memoryFiles {
		v := mf.value(files)
		if !v.Written {
			continue
		}
		want := limitOf(v)
		r := Row{Cgroup: dir, File: mf.name, Want: cgroup.FormatLimit(want)}
		cur, err := mf.read(dir)
		if err != nil {
			r.Now, r.Differs = "unreadable: "+err.Error(), true
		} else {
			r.Now, r.Differs = cgroup.FormatLimit(cur), cur != want
		}
		rows = append(rows, r)
	}
	return rows
}

func observeOOM(name, dir string, qos v1.PodQOSClass, procRoot string, pids []int, want int) Row {
	r := Row{Workload: name, Cgroup: dir, QOSClass: qos, File: "oom_score_adj", Want: strconv.Itoa(want)}
	counts := map[int]int{}
	var errs []string
	self := os.Getpid()
	for _, pid := range pids {
		if pid == self {
			continue
		}
		v, err := host.ReadOOMScoreAdj(procRoot, pid)
		switch {
		case err == nil:
			counts[v]++
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err.Error())
		}
	}
	vals := make([]int, 0, len(counts))
	for v := range counts {
		vals = append(vals, v)
	}
	sort.Ints(vals)
	var parts []string
	for _, v := range vals {
		if len(vals) == 1 {
			parts = append(parts, strconv.Itoa(v))
		} else {
			parts = append(parts, fmt.Sprintf("%d ×%d", v, counts[v]))
		}
		if v != want {
			r.Differs = true
		}
	}
	if len(errs) > 0 {
		parts = append(parts, "unreadable: "+errs[0])
		r.Differs = true
	}
	r.Now = strings.Join(parts, ", ")
	if r.Now == "" {
		r.Now = "-"
	}
	return r
}
