package policy

import (
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/*.txt from the engine (review the diff)")

// TestDataDriven runs the scripts in testdata/*.txt, raft style: each
// command's input (config, pods, stats in a compact notation) sits next to
// the engine's explain-style answer. The scripts re-express the kubelet's
// eviction_manager_test.go scenarios. go test ./internal/policy -run
// TestDataDriven -update rewrites the answers; review the diff before
// committing it.
//
// Commands (one per block, arguments on the command line):
//
//	config            lines: hard SIGNAL<VALUE | soft SIGNAL<VALUE grace=DUR |
//	                  reclaim SIGNAL=VALUE | maxgrace N | transition DUR |
//	                  enforce pods | fs single|imagefs|split | gate NAME=BOOL |
//	                  lsci BOOL. Starts a new engine.
//	pods              lines: NAME [prio=N] [req=RES:Q,…] [lim=RES:Q,…] [static]
//	                  [tgp=SECONDS] [vol=NAME[:SIZELIMIT]] [standby] — one
//	                  container named NAME, as the kubelet's test pods; a
//	                  standby pod is not active (for admit only).
//	stats             lines: memory avail=Q [ws=Q] | allocatable avail=Q [ws=Q]
//	                  (default: as memory, as the kubelet's makeMemoryStats) |
//	                  nodefs|imagefs|containerfs avail=Q cap=Q [ifree=N inodes=N] |
//	                  pid max=N procs=N | pod NAME [mem=Q] [rootfs=Q] [logs=Q]
//	                  [vol=Q] [irootfs=N] [ilogs=N] [ivol=N] [procs=N]. A block
//	                  without pod lines keeps the pods' previous stats.
//	step at=DUR [stale]  one synchronize at t0+DUR with the stats taken now
//	                  (stale: taken at the previous step's time).
//	reclaimed at=DUR [nostats]  the reclaim continuation, with the current stats.
//	admit NAME…       admission of pods (from the pods block) under the
//	                  current conditions.
func TestDataDriven(t *testing.T) {
	if *update {
		if err := flag.Set("rewrite", "true"); err != nil {
			t.Fatal(err)
		}
	}
	datadriven.Walk(t, "testdata/datadriven", func(t *testing.T, path string) {
		r := &ddRunner{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			// A script that does not parse fails; it never becomes expected output.
			out, err := r.run(t, td)
			if err != nil {
				t.Fatalf("%s: %v", td.Pos, err)
			}
			return out
		})
	})
}

type ddRunner struct {
	cfg       Config
	fs        Filesystems
	eng       *Engine
	pods      []*v1.Pod
	byName    map[string]*v1.Pod
	stats     *statsv1alpha1.Summary
	lastStats time.Time
}

func (r *ddRunner) run(t *testing.T, td *datadriven.TestData) (string, error) {
	switch td.Cmd {
	case "config":
		return r.config(td.Input)
	case "pods":
		return r.podsCmd(td.Input)
	case "stats":
		return "", r.statsCmd(td.Input)
	case "step":
		if r.eng == nil || r.stats == nil {
			return "", fmt.Errorf("step needs a config and stats")
		}
		now, err := ddAt(td)
		if err != nil {
			return "", err
		}
		at := now
		if td.HasArg("stale") {
			at = r.lastStats
		}
		r.lastStats = at
		d := r.eng.Step(now, Input{Summary: stampStats(r.stats, at), Pods: r.pods})
		return explainDecision(d), nil
	case "reclaimed":
		now, err := ddAt(td)
		if err != nil {
			return "", err
		}
		var fresh *statsv1alpha1.Summary
		if !td.HasArg("nostats") {
			fresh = stampStats(r.stats, now)
		}
		return explainDecision(r.eng.Reclaimed(now, fresh)), nil
	case "admit":
		var b strings.Builder
		for _, a := range td.CmdArgs {
			p := r.byName[a.Key]
			if p == nil {
				return "", fmt.Errorf("admit: no pod %q", a.Key)
			}
			res := r.eng.Admit(p)
			if res.Admit {
				fmt.Fprintf(&b, "%s (%s): admitted\n", a.Key, PodQOS(p, r.cfg.Features))
			} else {
				fmt.Fprintf(&b, "%s (%s): rejected: %s: %q\n", a.Key, PodQOS(p, r.cfg.Features), res.Reason, res.Message)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown command %q", td.Cmd)
}

func ddAt(td *datadriven.TestData) (time.Time, error) {
	a, ok := td.Arg("at")
	if !ok || len(a.Vals) != 1 {
		return time.Time{}, fmt.Errorf("%s needs at=DURATION", td.Cmd)
	}
	d, err := time.ParseDuration(a.Vals[0])
	return t0.Add(d), err
}

func (r *ddRunner) config(input string) (string, error) {
	hard, soft, grace, reclaim := map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	var enforce []string
	r.cfg = Config{PressureTransitionPeriod: DefaultPressureTransitionPeriod, LocalStorageCapacityIsolation: true, Features: DefaultFeatureGates()}
	r.fs = Filesystems{}
	for _, line := range lines(input) {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", fmt.Errorf("config: %q: want KEY VALUE", line)
		}
		key, val := f[0], f[1]
		var err error
		switch key {
		case "hard", "soft":
			sig, v, ok := strings.Cut(val, "<")
			if !ok {
				return "", fmt.Errorf("config: %q: want SIGNAL<VALUE", line)
			}
			if key == "hard" {
				hard[sig] = v
			} else {
				soft[sig] = v
				for _, o := range f[2:] {
					if g, ok := strings.CutPrefix(o, "grace="); ok {
						grace[sig] = g
					}
				}
			}
		case "reclaim":
			sig, v, _ := strings.Cut(val, "=")
			reclaim[sig] = v
		case "maxgrace":
			r.cfg.MaxPodGracePeriodSeconds, err = strconv.ParseInt(val, 10, 64)
		case "transition":
			r.cfg.PressureTransitionPeriod, err = time.ParseDuration(val)
		case "enforce":
			enforce = append(enforce, val)
		case "fs":
			switch val {
			case "single":
			case "imagefs":
				r.fs.DedicatedImageFs = true
			case "split":
				r.fs.DedicatedImageFs, r.fs.SplitContainerFs = true, true
			default:
				err = fmt.Errorf("fs %q: want single, imagefs or split", val)
			}
		case "gate":
			name, v, _ := strings.Cut(val, "=")
			var on bool
			if on, err = strconv.ParseBool(v); err == nil {
				err = r.cfg.Features.apply(map[string]bool{name: on})
			}
		case "lsci":
			r.cfg.LocalStorageCapacityIsolation, err = strconv.ParseBool(val)
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return "", fmt.Errorf("config: %q: %w", line, err)
		}
	}
	th, err := ParseThresholdConfig(enforce, hard, soft, grace, reclaim)
	if err != nil {
		return "", err
	}
	r.cfg.Thresholds = th
	if r.eng, err = NewEngine(r.cfg, r.fs); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, t := range th {
		fmt.Fprintf(&b, "threshold %s\n", t)
	}
	return b.String(), nil
}

func (r *ddRunner) podsCmd(input string) (string, error) {
	r.pods, r.byName = nil, map[string]*v1.Pod{}
	var b strings.Builder
	for _, line := range lines(input) {
		f := strings.Fields(line)
		name := f[0]
		var prio int32
		standby := false
		c := v1.Container{Name: name}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
		for _, o := range f[1:] {
			k, v, _ := strings.Cut(o, "=")
			var err error
			switch k {
			case "prio":
				var n int64
				n, err = strconv.ParseInt(v, 10, 32)
				prio = int32(n)
			case "req":
				c.Resources.Requests, err = resourceList(v)
			case "lim":
				c.Resources.Limits, err = resourceList(v)
			case "standby":
				standby = true
			case "static":
				p.Annotations = map[string]string{configSourceAnnotationKey: "file"}
			case "tgp":
				var n int64
				n, err = strconv.ParseInt(v, 10, 64)
				p.Spec.TerminationGracePeriodSeconds = &n
			case "vol":
				vn, limit, _ := strings.Cut(v, ":")
				ed := &v1.EmptyDirVolumeSource{}
				if limit != "" {
					var q resource.Quantity
					q, err = resource.ParseQuantity(limit)
					ed.SizeLimit = &q
				}
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: vn, VolumeSource: v1.VolumeSource{EmptyDir: ed}})
			default:
				err = fmt.Errorf("unknown key %q", k)
			}
			if err != nil {
				return "", fmt.Errorf("pods: %q: %w", o, err)
			}
		}
		p.Spec.Priority = &prio
		p.Spec.Containers = []v1.Container{c}
		r.byName[name] = p
		extra := ""
		if IsCriticalPod(p) {
			extra += " critical"
		}
		if standby {
			extra += " standby"
		} else {
			r.pods = append(r.pods, p)
		}
		fmt.Fprintf(&b, "pod %s %s prio=%d%s\n", name, PodQOS(p, r.cfg.Features), prio, extra)
	}
	return b.String(), nil
}

func resourceList(s string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want RESOURCE:QUANTITY", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, err
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}

func (r *ddRunner) statsCmd(input string) error {
	s := &statsv1alpha1.Summary{}
	var alloc *statsv1alpha1.MemoryStats
	for _, line := range lines(input) {
		f := strings.Fields(line)
		kv := map[string]string{}
		opts := f[1:]
		if f[0] == "pod" && len(f) > 1 {
			opts = f[2:]
		}
		for _, o := range opts {
			k, v, _ := strings.Cut(o, "=")
			kv[k] = v
		}
		u := func(k string) (*uint64, error) {
			v, ok := kv[k]
			if !ok {
				return nil, nil
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("stats: %s=%q: %w", k, v, err)
			}
			n := uint64(q.Value())
			return &n, nil
		}
		var err error
		mem := func() (*statsv1alpha1.MemoryStats, error) {
			avail, err := u("avail")
			if err != nil || avail == nil {
				return nil, fmt.Errorf("stats: %q: want avail=Q: %v", line, err)
			}
			ws, err := u("ws")
			if ws == nil {
				ws = avail // the kubelet's makeMemoryStats: working set = available
			}
			return &statsv1alpha1.MemoryStats{AvailableBytes: avail, WorkingSetBytes: ws}, err
		}
		fsStats := func() (*statsv1alpha1.FsStats, error) {
			fs := &statsv1alpha1.FsStats{}
			var errs [4]error
			fs.AvailableBytes, errs[0] = u("avail")
			fs.CapacityBytes, errs[1] = u("cap")
			fs.InodesFree, errs[2] = u("ifree")
			fs.Inodes, errs[3] = u("inodes")
			for _, e := range errs {
				if e != nil {
					return nil, e
				}
			}
			return fs, nil
		}
		runtime := func() *statsv1alpha1.RuntimeStats {
			if s.Node.Runtime == nil {
				s.Node.Runtime = &statsv1alpha1.RuntimeStats{}
			}
			return s.Node.Runtime
		}
		switch f[0] {
		case "memory":
			s.Node.Memory, err = mem()
		case "allocatable":
			alloc, err = mem()
		case "nodefs":
			s.Node.Fs, err = fsStats()
		case "imagefs":
			runtime().ImageFs, err = fsStats()
		case "containerfs":
			runtime().ContainerFs, err = fsStats()
		case "pid":
			maxPID, e1 := strconv.ParseInt(kv["max"], 10, 64)
			procs, e2 := strconv.ParseInt(kv["procs"], 10, 64)
			if e1 != nil || e2 != nil {
				return fmt.Errorf("stats: %q: want max=N procs=N", line)
			}
			s.Node.Rlimit = &statsv1alpha1.RlimitStats{MaxPID: &maxPID, NumOfRunningProcesses: &procs}
		case "pod":
			err = r.podStats(s, f[1], u, kv)
		default:
			err = fmt.Errorf("stats: unknown line %q", line)
		}
		if err != nil {
			return err
		}
	}
	if len(s.Pods) == 0 && r.stats != nil {
		s.Pods = r.stats.Pods // no pod lines: the pods' stats stay as they were
	}
	if alloc == nil && s.Node.Memory != nil {
		m := *s.Node.Memory
		alloc = &m
	}
	if alloc != nil {
		s.Node.SystemContainers = []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods, Memory: alloc}}
	}
	r.stats = s
	return nil
}

func (r *ddRunner) podStats(s *statsv1alpha1.Summary, name string, u func(string) (*uint64, error), kv map[string]string) error {
	p := r.byName[name]
	if p == nil {
		return fmt.Errorf("stats: no pod %q", name)
	}
	vals := map[string]*uint64{}
	for _, k := range []string{"mem", "rootfs", "logs", "vol", "irootfs", "ilogs", "ivol", "procs"} {
		v, err := u(k)
		if err != nil {
			return err
		}
		vals[k] = v
	}
	for k := range kv {
		if _, ok := vals[k]; !ok {
			return fmt.Errorf("stats: pod %s: unknown key %q", name, k)
		}
	}
	ps := statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}
	cs := statsv1alpha1.ContainerStats{Name: p.Spec.Containers[0].Name}
	if m := vals["mem"]; m != nil {
		ps.Memory = &statsv1alpha1.MemoryStats{WorkingSetBytes: m}
		cs.Memory = &statsv1alpha1.MemoryStats{WorkingSetBytes: m}
	}
	fs := func(bytes, inodes *uint64) *statsv1alpha1.FsStats {
		if bytes == nil && inodes == nil {
			return nil
		}
		return &statsv1alpha1.FsStats{UsedBytes: bytes, InodesUsed: inodes}
	}
	cs.Rootfs, cs.Logs = fs(vals["rootfs"], vals["irootfs"]), fs(vals["logs"], vals["ilogs"])
	ps.Containers = []statsv1alpha1.ContainerStats{cs}
	if v := fs(vals["vol"], vals["ivol"]); v != nil {
		for _, vol := range p.Spec.Volumes {
			ps.VolumeStats = append(ps.VolumeStats, statsv1alpha1.VolumeStats{Name: vol.Name, FsStats: *v})
		}
	}
	if n := vals["procs"]; n != nil {
		ps.ProcessStats = &statsv1alpha1.ProcessStats{ProcessCount: n}
	}
	s.Pods = append(s.Pods, ps)
	return nil
}

// stampStats returns a copy of s whose node stats carry time at.
func stampStats(s *statsv1alpha1.Summary, at time.Time) *statsv1alpha1.Summary {
	c := &statsv1alpha1.Summary{}
	if b, err := json.Marshal(s); err != nil || json.Unmarshal(b, c) != nil {
		panic(fmt.Sprintf("copying a summary: %v", err))
	}
	ts := metav1.NewTime(at)
	if c.Node.Memory != nil {
		c.Node.Memory.Time = ts
	}
	for i := range c.Node.SystemContainers {
		if m := c.Node.SystemContainers[i].Memory; m != nil {
			m.Time = ts
		}
	}
	for _, fs := range []*statsv1alpha1.FsStats{c.Node.Fs} {
		if fs != nil {
			fs.Time = ts
		}
	}
	if rt := c.Node.Runtime; rt != nil {
		for _, fs := range []*statsv1alpha1.FsStats{rt.ImageFs, rt.ContainerFs} {
			if fs != nil {
				fs.Time = ts
			}
		}
	}
	if c.Node.Rlimit != nil {
		c.Node.Rlimit.Time = ts
	}
	return c
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// explainDecision renders a Decision the way a person reads it: what was
// observed, which thresholds are met and where they stand, the conditions,
// what decides, node-level reclaim, the ranking and the eviction with its
// grace period and message. Times are relative to t0.
func explainDecision(d Decision) string {
	var b strings.Builder
	rel := func(at time.Time) string { return at.Sub(t0).String() }
	if d.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", d.Error)
	}
	obs := func(label string, list []Observation) {
		if len(list) == 0 {
			return
		}
		parts := make([]string, len(list))
		for i, o := range list {
			parts[i] = fmt.Sprintf("%s=%s/%s", o.Signal, o.Available.String(), o.Capacity.String())
		}
		fmt.Fprintf(&b, "%s: %s\n", label, strings.Join(parts, " "))
	}
	obs("observed", d.Observations)
	for _, st := range d.Met {
		fmt.Fprintf(&b, "met: %s", st.Threshold)
		if st.Quantity != nil && st.Available != nil {
			fmt.Fprintf(&b, " (threshold %s, available %s)", st.Quantity, st.Available)
		}
		fmt.Fprintf(&b, " since %s", rel(st.FirstObserved))
		if st.MinReclaimActive {
			b.WriteString(", until min-reclaim")
		}
		if st.GraceRemaining > 0 {
			fmt.Fprintf(&b, ", in grace (%s left)", st.GraceRemaining)
		}
		b.WriteString("\n")
	}
	for _, st := range d.Stale {
		fmt.Fprintf(&b, "stale: %s (stats not newer than the last synchronize)\n", st.Threshold)
	}
	for _, t := range d.Unevaluated {
		fmt.Fprintf(&b, "unevaluated: %s (derived on the first synchronize, seen from the second)\n", t)
	}
	if len(d.NodeConditions) > 0 {
		fmt.Fprintf(&b, "conditions: %v\n", d.NodeConditions)
	}
	if d.Deciding != nil {
		fmt.Fprintf(&b, "deciding: %s, reclaim %s\n", d.Deciding.Threshold, d.Resource)
		if len(d.Actionable) > 1 {
			var rest []string
			for _, st := range d.Actionable[1:] {
				rest = append(rest, st.Threshold.String())
			}
			fmt.Fprintf(&b, "also actionable: %s\n", strings.Join(rest, ", "))
		}
	}
	if len(d.Reclaim) > 0 {
		state := "ran"
		if d.ReclaimPending {
			state = "pending"
		}
		fmt.Fprintf(&b, "node reclaim: %s (%s)\n", strings.Join(d.Reclaim, ", "), state)
	}
	obs("after reclaim", d.AfterReclaim)
	if d.ReclaimSufficient {
		b.WriteString("node reclaim was enough: no eviction\n")
	}
	if len(d.Candidates) > 0 {
		b.WriteString("ranking:\n")
		for _, c := range d.Candidates {
			fmt.Fprintf(&b, "  %d %s prio=%d", c.Rank, c.Pod.Name, c.Priority)
			if !c.HasStats {
				b.WriteString(" no-stats")
			}
			if c.ExceedsRequest {
				b.WriteString(" exceeds-request")
			}
			if c.ProcessCount > 0 {
				fmt.Fprintf(&b, " procs=%d", c.ProcessCount)
			} else if c.Usage != nil {
				fmt.Fprintf(&b, " usage=%s", c.Usage)
			}
			if c.Request != nil {
				fmt.Fprintf(&b, " request=%s", c.Request)
			}
			if c.Critical {
				b.WriteString(" critical")
			}
			b.WriteString("\n")
		}
	}
	for _, e := range d.Evictions {
		kind := "threshold"
		if e.Limit {
			kind = "limit"
		}
		fmt.Fprintf(&b, "evict: %s grace=%ds signal=%s (%s)\n  message: %q\n", e.Pod.Name, e.GracePeriodSeconds, e.Signal, kind, e.Message)
		if len(e.Annotations) > 0 {
			keys := make([]string, 0, len(e.Annotations))
			for k := range e.Annotations {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "  annotation %s=%s\n", k, e.Annotations[k])
			}
		}
		if e.Condition != nil {
			fmt.Fprintf(&b, "  condition %s=%s reason=%s\n", e.Condition.Type, e.Condition.Status, e.Condition.Reason)
		}
	}
	for _, p := range d.SkippedCritical {
		fmt.Fprintf(&b, "not evicted (critical): %s\n", p.Name)
	}
	for _, e := range d.Events {
		if e.Object == "Node" {
			fmt.Fprintf(&b, "event Node %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	for _, n := range d.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if b.Len() == 0 {
		return "nothing\n"
	}
	return b.String()
}
