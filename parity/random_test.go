package parity_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/parity/internal/oracle"
	"github.com/evictd/evictd/parity/internal/scenario"
)

// randomSeeds fixes the randomized differential test: the same scenarios on
// every run, so a mismatch reproduces. ~150 scenarios take a few seconds of
// oracle time plus one `evictd simulate` per scenario.
var randomSeeds = func() []uint64 {
	s := make([]uint64, 150)
	for i := range s {
		s[i] = uint64(1000 + i)
	}
	return s
}()

// randomRuns samples the whole-timeline outcomes of a random scenario: a
// quick first check only, since a long random timeline can have more outcomes
// than any sample shows; evictd's timeline outside the sample is then judged
// step by step with stepRuns runs per step, enough to see every decision a
// single synchronize can make (a handful, none rarer than ~1 in 10).
const (
	randomRuns = 64
	stepRuns   = 160
)

const mi = 1 << 20

type gen struct{ r *rand.Rand }

func (g gen) pick(n int) int         { return g.r.IntN(n) }
func (g gen) chance(p float64) bool  { return g.r.Float64() < p }
func (g gen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }
func (g gen) mib(lo, hi int) uint64  { return uint64(g.between(lo, hi)) * mi }
func oneOf[T any](g gen, xs ...T) T  { return xs[g.r.IntN(len(xs))] }
func u64(v uint64) *uint64           { return &v }
func i64(v int64) *int64             { return &v }
func qty(s string) resource.Quantity { return resource.MustParse(s) }
func at(d time.Duration) metav1.Time { return metav1.NewTime(scenario.Start.Add(d)) }

// randomScenario builds a valid scenario: several thresholds (hard, soft with
// grace, minimum reclaim) over memory, nodefs, imagefs, inodes and PIDs, a
// few pods with random requests, priorities and usage, and several steps
// whose availability wanders around the thresholds.
func randomScenario(seed uint64) map[string]any {
	g := gen{rand.New(rand.NewPCG(seed, 0x5eed))}
	const memCap, allocCap, diskCap, inodes, maxPID = 8192 * mi, 7168 * mi, 32768 * mi, 1000000, 20000

	hard, soft, grace, minReclaim := map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	type sig struct{ name, hardQ, softQ, reclaim string }
	sigs := []sig{
		{"memory.available", oneOf(g, "500Mi", "1Gi", "10%"), oneOf(g, "1500Mi", "2Gi", "20%"), oneOf(g, "100Mi", "500Mi", "5%")},
		{"nodefs.available", oneOf(g, "2Gi", "10%"), oneOf(g, "4Gi", "15%"), oneOf(g, "500Mi", "1Gi")},
		{"nodefs.inodesFree", oneOf(g, "50k", "5%"), oneOf(g, "100k", "10%"), "10k"},
		{"imagefs.available", oneOf(g, "2Gi", "15%"), oneOf(g, "4Gi", "20%"), "1Gi"},
		{"pid.available", oneOf(g, "1000", "10%"), oneOf(g, "2000", "20%"), "500"},
	}
	for _, s := range sigs {
		if g.chance(0.6) {
			hard[s.name] = s.hardQ
		}
		if g.chance(0.35) {
			soft[s.name] = s.softQ
			grace[s.name] = oneOf(g, "0s", "20s", "1m")
		}
		if g.chance(0.25) {
			minReclaim[s.name] = s.reclaim
		}
	}
	kc := map[string]any{
		"apiVersion":                       "kubelet.config.k8s.io/v1beta1",
		"kind":                             "KubeletConfiguration",
		"evictionMaxPodGracePeriod":        oneOf(g, 0, 5, 30),
		"evictionPressureTransitionPeriod": oneOf(g, "30s", "1m", "5m"),
	}
	if len(hard) > 0 || g.chance(0.5) {
		kc["evictionHard"] = hard
	}
	if len(soft) > 0 {
		kc["evictionSoft"], kc["evictionSoftGracePeriod"] = soft, grace
	}
	if len(minReclaim) > 0 {
		kc["evictionMinimumReclaim"] = minReclaim
	}
	if g.chance(0.2) {
		kc["mergeDefaultEvictionSettings"] = true
	}
	if g.chance(0.2) {
		kc["enforceNodeAllocatable"] = []string{"none"}
	}
	if g.chance(0.15) {
		kc["localStorageCapacityIsolation"] = false
	}
	layout := oneOf(g, [2]bool{false, false}, [2]bool{true, false}, [2]bool{true, true})

	// Pods.
	type usage struct {
		mem, rootfs, logs, vol uint64
		rootIn, logIn          uint64
		procs                  uint64
		noEphemeral            bool // no pod ephemeral-storage stats: only container limits can fire
	}
	var pods []v1.Pod
	npods := g.between(2, 6)
	if g.chance(0.15) {
		npods = g.between(13, 20) // more than 12: sort.Sort switches from insertion sort to pdqsort
	}
	for i := range npods {
		name := fmt.Sprintf("pod-%d", i)
		req, lim := v1.ResourceList{}, v1.ResourceList{}
		switch g.pick(3) {
		case 0: // BestEffort
		case 1: // Burstable
			req[v1.ResourceMemory] = qty(oneOf(g, "100Mi", "256Mi", "1Gi"))
			if g.chance(0.5) {
				req[v1.ResourceEphemeralStorage] = qty(oneOf(g, "100Mi", "1Gi"))
			}
		case 2: // Guaranteed
			m := qty(oneOf(g, "256Mi", "512Mi", "1Gi"))
			req[v1.ResourceMemory], lim[v1.ResourceMemory] = m, m
			req[v1.ResourceCPU], lim[v1.ResourceCPU] = qty("100m"), qty("100m")
		}
		p := v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: oneOf(g, "default", "team-a"), UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "main", Image: "registry.example/main:1", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}},
				Priority:   new(int32(oneOf(g, 0, 100, 1000, 100000))),
				Volumes:    []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			},
			Status: v1.PodStatus{Phase: v1.PodRunning},
		}
		if g.chance(0.3) {
			p.Spec.TerminationGracePeriodSeconds = i64(int64(oneOf(g, 0, 10, 60)))
		}
		if g.chance(0.35) { // a container ephemeral-storage limit, also the pod's total
			lim[v1.ResourceEphemeralStorage] = qty(oneOf(g, "200Mi", "500Mi", "2Gi"))
		}
		if g.chance(0.25) {
			p.Spec.Volumes[0].EmptyDir.SizeLimit = new(qty(oneOf(g, "200Mi", "800Mi")))
		}
		if g.chance(0.05) {
			p.Annotations = map[string]string{"kubernetes.io/config.source": "file"} // static pod
		}
		if g.chance(0.1) {
			p.Spec.Priority = new(int32(2000000000))
		}
		pods = append(pods, p)
	}
	baseUse := make([]usage, npods)
	for i := range baseUse {
		baseUse[i] = usage{mem: g.mib(10, 1500), rootfs: g.mib(1, 2000), logs: g.mib(1, 200), vol: g.mib(0, 1000),
			rootIn: uint64(g.between(10, 20000)), logIn: uint64(g.between(1, 500)), procs: uint64(g.between(1, 3000)),
			noEphemeral: g.chance(0.4)}
	}

	podStats := func(t metav1.Time, skip int) []statsapi.PodStats {
		var out []statsapi.PodStats
		for i, p := range pods {
			if i == skip {
				continue // a pod without stats
			}
			u := baseUse[i]
			fsC := func(b, in uint64) *statsapi.FsStats {
				return &statsapi.FsStats{Time: t, UsedBytes: u64(b), InodesUsed: u64(in)}
			}
			eph := &statsapi.FsStats{Time: t, UsedBytes: u64(u.rootfs + u.logs + u.vol)}
			if u.noEphemeral {
				eph = nil
			}
			out = append(out, statsapi.PodStats{
				PodRef:           statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
				Containers:       []statsapi.ContainerStats{{Name: "main", Memory: &statsapi.MemoryStats{Time: t, WorkingSetBytes: u64(u.mem)}, Rootfs: fsC(u.rootfs, u.rootIn), Logs: fsC(u.logs, u.logIn)}},
				Memory:           &statsapi.MemoryStats{Time: t, WorkingSetBytes: u64(u.mem)},
				VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{Time: t, UsedBytes: u64(u.vol), InodesUsed: u64(10)}}},
				EphemeralStorage: eph,
				ProcessStats:     &statsapi.ProcessStats{ProcessCount: u64(u.procs)},
			})
		}
		return out
	}
	noStats := -1
	if g.chance(0.15) {
		noStats = g.pick(npods)
	}
	mkSummary := func(t metav1.Time) *statsapi.Summary {
		memAvail := g.mib(0, 3000)
		allocAvail := g.mib(0, 3000)
		fsStats := func() *statsapi.FsStats {
			avail := g.mib(0, 8000)
			free := uint64(g.between(0, 150000))
			return &statsapi.FsStats{Time: t, AvailableBytes: u64(avail), CapacityBytes: u64(diskCap), UsedBytes: u64(diskCap - avail),
				InodesFree: u64(free), Inodes: u64(inodes), InodesUsed: u64(inodes - free)}
		}
		nodeFs := fsStats()
		imageFs, containerFs := nodeFs, nodeFs
		if layout[0] {
			imageFs = fsStats()
			containerFs = imageFs
			if layout[1] {
				containerFs = nodeFs
			}
		}
		return &statsapi.Summary{
			Node: statsapi.NodeStats{
				NodeName:         "node-1",
				Memory:           &statsapi.MemoryStats{Time: t, AvailableBytes: u64(memAvail), WorkingSetBytes: u64(memCap - memAvail), UsageBytes: u64(memCap - memAvail + 100*mi)},
				SystemContainers: []statsapi.ContainerStats{{Name: "pods", Memory: &statsapi.MemoryStats{Time: t, AvailableBytes: u64(allocAvail), WorkingSetBytes: u64(allocCap - allocAvail), UsageBytes: u64(allocCap - allocAvail)}}},
				Fs:               nodeFs,
				Runtime:          &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: containerFs},
				Rlimit:           &statsapi.RlimitStats{Time: t, MaxPID: i64(maxPID), NumOfRunningProcesses: i64(int64(g.between(15000, 20500)))},
			},
			Pods: podStats(t, noStats),
		}
	}

	var steps []map[string]any
	now := time.Duration(0)
	nsteps := g.between(3, 6)
	for i := range nsteps {
		if i > 0 {
			now += oneOf(g, 10*time.Second, 20*time.Second, 40*time.Second, 2*time.Minute)
		}
		t := at(now)
		if g.chance(0.1) && i > 0 {
			t = at(now - 10*time.Second) // stale stats
		}
		step := map[string]any{"at": now.String(), "summary": mkSummary(t)}
		if i == 0 {
			step["pods"] = pods
		}
		if g.chance(0.3) {
			step["afterReclaim"] = mkSummary(t)
		}
		steps = append(steps, step)
	}
	return map[string]any{
		"kubeletConfig": kc,
		"filesystems":   map[string]bool{"dedicatedImageFs": layout[0], "splitContainerFs": layout[1]},
		"steps":         steps,
	}
}

// TestRandomDifferential runs random but valid scenarios (fixed seeds)
// through the kubelet and `evictd simulate` and reports every mismatch.
func TestRandomDifferential(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	multi, mismatches, stepwise := 0, 0, 0
	for _, seed := range randomSeeds {
		path := filepath.Join(dir, fmt.Sprintf("random-%d.json", seed))
		data, err := json.MarshalIndent(randomScenario(seed), "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := scenario.Load(path)
		if err != nil {
			t.Fatalf("seed %d: generated an invalid scenario: %v", seed, err)
		}
		res, err := oracle.Run(s, randomRuns)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(res.Outcomes) > 1 {
			multi++
		}
		if evictdBin == "" {
			continue
		}
		got, raw, err := simulate(path)
		if err != nil {
			mismatches++
			t.Errorf("seed %d: %v\noutput: %.500s", seed, err, raw)
			continue
		}
		if ok, _ := judge(got, res); ok {
			continue
		}
		// The whole-timeline outcome set of a long random scenario is too
		// large to enumerate, so judge evictd step by step: at each step its
		// decision must be one the kubelet can make after the same evictions.
		stepwise++
		if why := judgeStepwise(s, got); why != "" {
			mismatches++
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("evictd-parity-random-%d.json", seed))
			_ = os.WriteFile(keep, data, 0o644)
			t.Errorf("seed %d (scenario kept in %s): %s", seed, keep, why)
		}
	}
	t.Logf("%d random scenarios in %v, %d with several kubelet outcomes (%d judged step by step), %d mismatches",
		len(randomSeeds), time.Since(start).Round(time.Millisecond), multi, stepwise, mismatches)
	if evictdBin == "" {
		t.Skip("oracle ran on every random scenario; the comparison with evictd simulate needs EVICTD_BIN, which scripts/test-parity.sh sets to the evictd it builds (and fails without)")
	}
}

// judgeStepwise returns "" when every step of evictd's outcome is one of the
// kubelet's possible results for that step given evictd's earlier evictions,
// or else explains the first step where it is not.
func judgeStepwise(s *scenario.Scenario, got *oracle.Outcome) string {
	if len(got.Steps) != len(s.Steps) {
		return fmt.Sprintf("evictd printed %d steps, the scenario has %d", len(got.Steps), len(s.Steps))
	}
	for k := range s.Steps {
		options, err := oracle.StepOutcomes(s, k, got.Steps, stepRuns)
		if err != nil {
			return err.Error()
		}
		want := stepJSON(got.Steps[k])
		var lines []string
		for _, o := range options {
			if stepJSON(o) == want {
				lines = nil
				break
			}
			lines = append(lines, "    kubelet: "+stepJSON(o))
		}
		if lines != nil {
			return fmt.Sprintf("step %d (at %s) after the same evictions, the kubelet does one of:\n%s\n    evictd:  %s",
				k, got.Steps[k].At, strings.Join(lines, "\n"), want)
		}
	}
	return ""
}
