// Package protect keeps, on a host without Kubernetes, the memory protection
// the kubelet gives pods: memory.min, memory.low and memory.high on each
// workload cgroup and the aggregates on the workload root (cgroup v2 only),
// and the oom_score_adj of every workload process (both versions), with the
// values internal/memqos computes from the KubeletConfiguration and the
// workloads file. evictd's own oom_score_adj is the kubelet's −999.
//
// The agent calls Apply with the current workloads on every synchronize (and
// so after every reload of the workloads file). Apply reads before it
// writes, writes only what differs, touches nothing outside the workload
// root, and logs one line per write and per change of a file's state
// (unwritable, refused, vanished), never one per tick.
package protect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/cgroup"
	v2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/workload"
)

// EvictdOOMScoreAdj is the kubelet's own oom_score_adj
// (pkg/kubelet/qos/policy.go KubeletOOMScoreAdj): below every workload, so
// the kernel OOM killer never picks the agent that could free memory by
// evicting first.
const EvictdOOMScoreAdj = -999

// DefaultVerifyEvery is how often Apply reads every file and process again
// even when nothing changed, in case something else wrote them. It is the
// kubelet's periodic QoS cgroup update (periodicQOSCgroupUpdateInterval, one
// minute). Between two verifications a quiet synchronize reads only each
// workload's cgroup.procs.
const DefaultVerifyEvery = time.Minute

// Config configures a Protector.
type Config struct {
	// Settings are the MemoryQoS settings and node facts (memqos.FromKubelet
	// plus capacity, allocatable, page size). CgroupV2 must say whether the
	// workload root is on cgroup v2.
	Settings memqos.Settings
	// Root is the absolute workload root directory. Nothing outside it is
	// ever written.
	Root string
	// ProcRoot is where /proc is ("" = "/proc").
	ProcRoot string
	// DryRun logs what would be written and writes nothing.
	DryRun bool
	Log    *slog.Logger
	// VerifyEvery (0 = DefaultVerifyEvery).
	VerifyEvery time.Duration
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Held, when set, says which workload cgroups an eviction holds at
	// their usage (actuate.Killer.Held): their memory files are left as
	// the hold wrote them until it is released.
	Held func(dir string) bool
}

// Stats count the kernel file operations Apply did (for the benchmark and
// tests).
type Stats struct {
	Reads, Writes uint64
}

// Protector keeps the values. Not safe for concurrent use: the agent calls
// it from its loop.
type Protector struct {
	cfg        Config
	log        *slog.Logger
	self       int
	files      map[string]*fileState // by file path
	procs      map[string]*procState // by workload cgroup
	outcomes   map[string]string     // last logged outcome, by key
	lastVerify time.Time
	Stats      Stats
}

type fileState struct {
	want string // what the file should hold, as the kernel prints it
	done bool   // checked (and written, or found unwritable) for want
	seen bool   // still in the current set (for forgetting vanished ones)
}

type procState struct {
	want int
	pids []int // sorted; the processes already handled for want
	seen bool
}

// New checks the configuration. Nothing is read or written until Start.
func New(cfg Config) (*Protector, error) {
	if err := cfg.Settings.Validate(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("workload root %q: must be absolute", cfg.Root)
	}
	cfg.Root = filepath.Clean(cfg.Root)
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.VerifyEvery <= 0 {
		cfg.VerifyEvery = DefaultVerifyEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Protector{cfg: cfg, log: cfg.Log, self: os.Getpid(),
		files: map[string]*fileState{}, procs: map[string]*procState{}, outcomes: map[string]string{}}, nil
}

// Start says once what will be kept (and what cannot be, on this host) and
// sets evictd's own oom_score_adj to −999.
func (p *Protector) Start() {
	s := p.cfg.Settings
	factor := "unset (no memory.high)"
	if s.ThrottlingFactor != nil {
		factor = fmt.Sprint(*s.ThrottlingFactor)
	}
	switch {
	case !s.CgroupV2:
		p.log.Info("memory QoS: cgroup v1 has no memory.min/low/high; applying oom_score_adj only, as the kubelet does on v1",
			"root", p.cfg.Root, "dry_run", p.cfg.DryRun)
	case !s.MemoryQoS:
		p.log.Info("memory QoS: feature gate MemoryQoS off; keeping memory.high at max and oom_score_adj, as the kubelet does",
			"root", p.cfg.Root, "dry_run", p.cfg.DryRun)
	default:
		p.log.Info("memory QoS: keeping memory.min/low/high of each workload and the root's aggregates, and oom_score_adj",
			"root", p.cfg.Root, "memoryReservationPolicy", policyName(s), "memoryThrottlingFactor", factor, "dry_run", p.cfg.DryRun)
	}
	if ok, err := host.HasCapSysResource(); err == nil && !ok {
		p.log.Warn("memory QoS: no CAP_SYS_RESOURCE, so no oom_score_adj can be lowered below a process's floor (0 unless a privileged process set it): " +
			"Guaranteed workloads (-997) and evictd itself (-999) keep their current value; Burstable and BestEffort values are still raised")
	}
	p.keepOOM("evictd", "evictd itself", []int{p.self}, EvictdOOMScoreAdj, nil)
}

// Apply keeps the values for ws, the current workloads (the active ones the
// agent ranks). Workloads that left the set are forgotten; what was written
// on them stays (see docs/qos.md).
func (p *Protector) Apply(ws []workload.Workload) {
	now := p.cfg.Now()
	if now.Sub(p.lastVerify) >= p.cfg.VerifyEvery {
		p.lastVerify = now
		for _, f := range p.files {
			f.done = false
		}
		for _, pr := range p.procs {
			pr.pids = nil
		}
	}
	for _, f := range p.files {
		f.seen = false
	}
	for _, pr := range p.procs {
		pr.seen = false
	}
	s := p.cfg.Settings
	pods := make([]*v1.Pod, 0, len(ws))
	for i := range ws {
		w := &ws[i]
		if !p.inside(w.Cgroup) {
			p.outcome("outside:"+w.Cgroup, "outside", slog.LevelError, "memory QoS: refusing a workload cgroup outside the workload root",
				"cgroup", w.Cgroup, "root", p.cfg.Root)
			continue
		}
		pods = append(pods, w.Pod)
		files, oom := memqos.HostWorkload(w.Pod, s)
		pids, err := p.readProcs(w.Cgroup)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				p.outcome("procs:"+w.Cgroup, err.Error(), slog.LevelWarn, "memory QoS: cannot list the workload's processes",
					"workload", w.Pod.Name, "err", err)
			}
			continue // vanished: forgotten below
		}
		p.outcome("procs:"+w.Cgroup, "", 0, "")
		st := p.procs[w.Cgroup]
		if st == nil {
			st = &procState{}
			p.procs[w.Cgroup] = st
		} else if !slices.Equal(st.pids, pids) {
			// New processes, or a cgroup removed and made again under the
			// same name: check its files again too.
			p.recheckFiles(w.Cgroup)
		}
		st.seen = true
		if p.cfg.Held == nil || !p.cfg.Held(w.Cgroup) {
			p.keepFiles(w.Pod.Name, w.Cgroup, files)
		} else {
			p.keepSeen(w.Cgroup)
		}
		if st.want != oom || !slices.Equal(st.pids, pids) {
			var known []int
			if st.want == oom {
				known = st.pids
			}
			p.keepOOM(w.Cgroup, w.Pod.Name, pids, oom, known)
			st.want, st.pids = oom, pids
		}
	}
	p.keepFiles("(workload root)", p.cfg.Root, memqos.HostRoot(pods, s))
	for k, f := range p.files {
		if !f.seen {
			delete(p.files, k)
		}
	}
	for k, pr := range p.procs {
		if !pr.seen {
			delete(p.procs, k)
			delete(p.outcomes, "oom:"+k)
			delete(p.outcomes, "procs:"+k)
		}
	}
}

// inside reports whether dir is the workload root or below it.
func (p *Protector) inside(dir string) bool {
	rel, err := filepath.Rel(p.cfg.Root, filepath.Clean(dir))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// readProcs lists the processes of dir and its descendants, sorted: one
// read of cgroup.procs, and a walk only when the cgroup has children (its
// link count says so).
func (p *Protector) readProcs(dir string) ([]int, error) {
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	pids, err := cgroup.ReadCgroupProcsAt(d)
	p.Stats.Reads++
	if err != nil {
		return nil, err
	}
	if n, err := d.Nlink(); err == nil && n > 2 {
		if pids, err = cgroup.ReadCgroupProcsRecursive(dir); err != nil {
			return nil, err
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// memoryFile is one memory file evictd keeps.
type memoryFile struct {
	name  string
	read  func(string) (uint64, error)
	write func(string, uint64) error
	value func(memqos.CgroupFiles) memqos.Value
}

var memoryFiles = []memoryFile{
	{"memory.min", v2.ReadMemoryMin, v2.WriteMemoryMin, func(f memqos.CgroupFiles) memqos.Value { return f.MemoryMin }},
	{"memory.low", v2.ReadMemoryLow, v2.WriteMemoryLow, func(f memqos.CgroupFiles) memqos.Value { return f.MemoryLow }},
	{"memory.high", v2.ReadMemoryHigh, v2.WriteMemoryHigh, func(f memqos.CgroupFiles) memqos.Value { return f.MemoryHigh }},
}

// limitOf is a memqos value as the v2 readers return it.
func limitOf(v memqos.Value) uint64 {
	if v.Max {
		return cgroup.Max
	}
	return uint64(v.Bytes)
}

func (p *Protector) recheckFiles(dir string) {
	for _, mf := range memoryFiles {
		if f := p.files[dir+"/"+mf.name]; f != nil {
			f.done = false
		}
	}
}

// keepSeen keeps dir's file states (not checked this time) and makes them
// be checked again once dir is no longer held.
func (p *Protector) keepSeen(dir string) {
	for _, mf := range memoryFiles {
		if f := p.files[dir+"/"+mf.name]; f != nil {
			f.seen, f.done = true, false
		}
	}
}

func (p *Protector) keepFiles(name, dir string, files memqos.CgroupFiles) {
	for _, mf := range memoryFiles {
		v := mf.value(files)
		if !v.Written {
			continue
		}
		path := dir + "/" + mf.name
		want := limitOf(v)
		wantText := cgroup.FormatLimit(want)
		f := p.files[path]
		if f == nil {
			f = &fileState{}
			p.files[path] = f
		}
		f.seen = true
		if f.done && f.want == wantText {
			continue
		}
		f.want, f.done = wantText, true
		cur, err := mf.read(dir)
		p.Stats.Reads++
		if err == nil && cur == want {
			p.outcome(path, "ok", 0, "")
			continue
		}
		switch {
		case err != nil && cgroup.IsVanished(err):
			delete(p.files, path)
			continue
		case err != nil:
			p.outcome(path, "unreadable: "+err.Error(), slog.LevelWarn, "memory QoS: cannot read a memory file; not writing it",
				"workload", name, "file", path, "err", err, "hint", hintFor(err))
			continue
		case p.cfg.DryRun:
			p.outcome(path, "would "+wantText+" over "+cgroup.FormatLimit(cur), slog.LevelInfo, "dry run: memory QoS would write",
				"workload", name, "file", path, "value", wantText, "now", cgroup.FormatLimit(cur))
			continue
		}
		err = mf.write(dir, want)
		p.Stats.Writes++
		if err != nil {
			if cgroup.IsVanished(err) {
				delete(p.files, path)
				continue
			}
			p.outcome(path, "unwritable: "+err.Error(), slog.LevelWarn, "memory QoS: cannot write a memory file; retrying every minute",
				"workload", name, "file", path, "value", wantText, "err", err, "hint", hintFor(err))
			continue
		}
		p.outcomes[path] = "ok"
		p.log.Info("memory QoS: wrote", "workload", name, "file", path, "value", wantText, "was", cgroup.FormatLimit(cur))
	}
}

// keepOOM sets oom_score_adj of pids (but of those in known, already
// handled) to want. One line per workload when something was written, and
// one per change of what could not be.
func (p *Protector) keepOOM(key, name string, pids []int, want int, known []int) {
	var written, refused, would []int
	var froms []int
	var refuseErr error
	for _, pid := range pids {
		if _, ok := slices.BinarySearch(known, pid); ok {
			continue
		}
		if pid == p.self && key != "evictd" {
			continue // evictd keeps its own −999
		}
		cur, err := host.ReadOOMScoreAdj(p.cfg.ProcRoot, pid)
		p.Stats.Reads++
		if err != nil || cur == want {
			continue // exited, or already right
		}
		if p.cfg.DryRun {
			would = append(would, pid)
			continue
		}
		err = host.WriteOOMScoreAdj(p.cfg.ProcRoot, pid, want)
		p.Stats.Writes++
		switch {
		case err == nil:
			written = append(written, pid)
			froms = append(froms, cur)
		case errors.Is(err, fs.ErrNotExist):
		default:
			refused = append(refused, pid)
			refuseErr = err
		}
	}
	if len(written) > 0 {
		p.log.Info("memory QoS: set oom_score_adj", "workload", name, "value", want, "pids", written, "was", froms)
	}
	okey := "oom:" + key
	switch {
	case len(would) > 0:
		p.outcome(okey, fmt.Sprint("would ", want), slog.LevelInfo, "dry run: memory QoS would set oom_score_adj",
			"workload", name, "value", want, "pids", would)
	case len(refused) > 0:
		hint := "the kernel refused the value"
		if errors.Is(refuseErr, fs.ErrPermission) {
			hint = "lowering oom_score_adj needs CAP_SYS_RESOURCE"
		}
		p.outcome(okey, fmt.Sprint("refused ", want), slog.LevelWarn, "memory QoS: cannot set oom_score_adj; retrying every minute",
			"workload", name, "value", want, "pids", refused, "err", refuseErr, "hint", hint)
	case len(written) > 0 || known == nil:
		// Every process was looked at (or some just written): whatever
		// was refused before is resolved.
		p.outcomes[okey] = "ok"
	}
}

// outcome logs msg when key's outcome differs from the last one logged for
// it: one line per state change, never per tick. An outcome of "" or "ok"
// is recorded silently.
func (p *Protector) outcome(key, outcome string, level slog.Level, msg string, attrs ...any) {
	if p.outcomes[key] == outcome {
		return
	}
	p.outcomes[key] = outcome
	if outcome == "" || outcome == "ok" {
		return
	}
	p.log.Log(context.Background(), level, msg, attrs...)
}

// hintFor says what to do about a file error.
func hintFor(err error) string {
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return "the memory controller is not enabled for this cgroup: add +memory to its parent's cgroup.subtree_control"
	case errors.Is(err, fs.ErrPermission):
		return "evictd needs write access to the workload cgroups (root, or a delegated subtree)"
	}
	return ""
}

func policyName(s memqos.Settings) string {
	if s.ReservationPolicy == "" {
		return string(memqos.ReservationNone)
	}
	return string(s.ReservationPolicy)
}
