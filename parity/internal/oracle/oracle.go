// Package oracle runs scenario files through the real kubelet v1.37.2
// eviction manager (k8s.io/kubernetes/pkg/kubelet/eviction), configured
// exactly as the kubelet configures it, and reports what it did per step in
// the shape of `evictd simulate -o json`.
//
// It needs the build overlay of scripts/test-parity.sh, which adds the
// exported ParitySynchronize to the upstream package.
package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/util/codec"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/parity/internal/scenario"
)

// Outcome is one possible result of a scenario, `evictd simulate -o json`'s shape.
type Outcome struct {
	Steps []StepResult `json:"steps"`
}

// StepResult is what one synchronize did.
type StepResult struct {
	At             string     `json:"at"`
	NodeConditions []string   `json:"nodeConditions"`
	Evicted        []Eviction `json:"evicted"`
	NodeReclaim    []string   `json:"nodeReclaim"`
}

// Eviction is one pod the manager killed.
type Eviction struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	GracePeriodSeconds int64  `json:"gracePeriodSeconds"`
	Message            string `json:"message"`
}

// Result is the content of a <scenario>.kubelet.json file.
type Result struct {
	Outcomes []Outcome `json:"outcomes"`
}

// Names of the node-level reclaim functions in StepResult.NodeReclaim.
const (
	ReclaimContainerGC = "containerGC" // ContainerGC.DeleteAllUnusedContainers
	ReclaimImageGC     = "imageGC"     // ImageGC.DeleteUnusedImages
)

// DefaultRuns is how many fresh managers Run drives through a scenario. The
// kubelet iterates Go maps when it parses thresholds and when it selects the
// grace-satisfied ones, so one input can yield several decisions. Measured
// over 3000 runs, the rarest outcome of the corpus comes up 12% of the time;
// 200 runs miss it with probability 0.88^200 < 1e-10, so the committed sets
// are complete and the corpus check does not flake.
const DefaultRuns = 200

// featureGateMu serialises runs, because feature gates are process-global.
var featureGateMu sync.Mutex

// Run drives `runs` fresh managers through the scenario and returns the
// distinct outcomes, sorted by their JSON encoding.
func Run(s *scenario.Scenario, runs int) (*Result, error) {
	r, err := NewRunner(s)
	if err != nil {
		return nil, err
	}
	seen := map[string]Outcome{}
	for range runs {
		out, err := r.run(len(s.Steps), nil)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		seen[string(b)] = *out
	}
	res := &Result{}
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		res.Outcomes = append(res.Outcomes, seen[k])
	}
	return res, nil
}

// StepOutcomes returns the distinct results the kubelet can produce at step k
// when the earlier steps evicted what history says (history[j].Evicted for
// j < k, e.g. evictd's own decisions). Only the evicted pods of the history
// matter: the manager's state (first-observed times, conditions, thresholds
// met, last observations) does not depend on which of its possible decisions
// it made. This judges long random timelines, whose whole-timeline outcome
// sets are too large to enumerate, one step at a time.
func StepOutcomes(s *scenario.Scenario, k int, history []StepResult, runs int) ([]StepResult, error) {
	r, err := NewRunner(s)
	if err != nil {
		return nil, err
	}
	seen := map[string]StepResult{}
	for range runs {
		out, err := r.run(k+1, history[:k])
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out.Steps[k])
		if err != nil {
			return nil, err
		}
		seen[string(b)] = out.Steps[k]
	}
	var res []StepResult
	for _, key := range slices.Sorted(maps.Keys(seen)) {
		res = append(res, seen[key])
	}
	return res, nil
}

// Runner drives fresh managers through one scenario; the kubelet
// configuration is decoded once.
type Runner struct {
	s  *scenario.Scenario
	kc *kubeletconfig.KubeletConfiguration
}

// NewRunner decodes the scenario's kubelet configuration.
func NewRunner(s *scenario.Scenario) (*Runner, error) {
	kc, err := KubeletConfig(context.Background(), s.KubeletConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: kubeletConfig: %w", s.Path, err)
	}
	return &Runner{s: s, kc: kc}, nil
}

// RunOnce drives one fresh manager through the scenario.
func RunOnce(s *scenario.Scenario) (*Outcome, error) {
	r, err := NewRunner(s)
	if err != nil {
		return nil, err
	}
	return r.run(len(s.Steps), nil)
}

// KubeletConfig decodes the scenario's KubeletConfiguration as the kubelet
// does: the kubelet's scheme decodes v1beta1, applies its defaults and
// converts to the internal type (codec.DecodeKubeletConfiguration, as
// configfiles.Load), then cmd/kubelet/app/server.go loadConfigFile fills
// evictionHard with the platform defaults when it is absent, or merges the
// missing defaults in when mergeDefaultEvictionSettings is true.
func KubeletConfig(ctx context.Context, raw []byte) (*kubeletconfig.KubeletConfiguration, error) {
	_, codecs, err := scheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	kc, err := codec.DecodeKubeletConfiguration(ctx, codecs, raw)
	if err != nil {
		return nil, err
	}
	// loadConfigFile, re-expressed (cmd/kubelet/app is far too large a build
	// to import for these lines).
	if kc.EvictionHard == nil {
		kc.EvictionHard = maps.Clone(eviction.DefaultEvictionHard)
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
	return kc, nil
}

// run drives one fresh manager through the first n steps. With a forced
// history, the pods evicted in step j < len(forced) are forced[j].Evicted
// instead of the manager's own choices.
func (r *Runner) run(n int, forced []StepResult) (*Outcome, error) {
	s, kc := r.s, r.kc
	ctx := context.Background()
	if os.Getenv("PARITY_KLOG") == "" {
		// The manager logs every decision at Info; hundreds of runs per scenario
		// would drown the test output. PARITY_KLOG=1 shows them.
		ctx = klog.NewContext(ctx, logr.Discard())
	}

	featureGateMu.Lock()
	defer featureGateMu.Unlock()
	restore, err := setFeatureGates(kc.FeatureGates)
	defer restore()
	if err != nil {
		return nil, fmt.Errorf("%s: kubeletConfig.featureGates: %w", s.Path, err)
	}

	// pkg/kubelet/kubelet.go NewMainKubelet.
	thresholds, err := eviction.ParseThresholdConfig(kc.EnforceNodeAllocatable, kc.EvictionHard, kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
	if err != nil {
		return nil, fmt.Errorf("%s: kubeletConfig: %w", s.Path, err)
	}
	config := eviction.Config{
		PressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds: int64(kc.EvictionMaxPodGracePeriod),
		Thresholds:               thresholds,
		KernelMemcgNotification:  kc.KernelMemcgNotification,
		PodCgroupRoot:            "/kubepods",
	}

	clock := testingclock.NewFakeClock(scenario.Start)
	stats := &summaryProvider{}
	gc := &nodeGC{stats: stats}
	var killed []Eviction
	kill := func(pod *v1.Pod, isEvicted bool, gracePeriodOverride *int64, fn func(*v1.PodStatus)) error {
		status := &v1.PodStatus{}
		fn(status)
		var grace int64 = -1 // never the case: the manager always overrides
		if gracePeriodOverride != nil {
			grace = *gracePeriodOverride
		}
		killed = append(killed, Eviction{Namespace: pod.Namespace, Name: pod.Name, GracePeriodSeconds: grace, Message: status.Message})
		return nil
	}
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "node", UID: "node", Namespace: ""}
	manager, _ := eviction.NewManager(stats, config, kill, gc, gc, &record.FakeRecorder{}, nodeRef, clock, kc.LocalStorageCapacityIsolation)
	disks := diskInfo(s.Filesystems)

	out := &Outcome{}
	gone := map[string]bool{}
	for i, st := range s.Steps[:n] {
		clock.SetTime(scenario.Start.Add(st.At))
		stats.current, stats.afterReclaim, stats.reclaimed = st.Summary, st.AfterReclaim, false
		gc.log = nil
		killed = nil
		var pods []*v1.Pod
		for _, p := range st.Pods {
			if !gone[p.Namespace+"/"+p.Name] {
				pods = append(pods, p.DeepCopy())
			}
		}
		podFunc := func() []*v1.Pod { return slices.Clone(pods) }
		// The kubelet logs a synchronize error and tries again next period;
		// the step's result is what the manager did (nothing).
		_, _ = eviction.ParitySynchronize(ctx, manager, disks, podFunc)

		res := StepResult{At: st.At.String(), NodeConditions: []string{}, Evicted: []Eviction{}, NodeReclaim: []string{}}
		for _, c := range eviction.ParityNodeConditions(manager) {
			res.NodeConditions = append(res.NodeConditions, string(c))
		}
		sort.Strings(res.NodeConditions)
		res.Evicted = append(res.Evicted, killed...)
		res.NodeReclaim = append(res.NodeReclaim, gc.log...)
		evicted := killed
		if i < len(forced) {
			evicted = forced[i].Evicted
		}
		for _, e := range evicted {
			gone[e.Namespace+"/"+e.Name] = true
		}
		out.Steps = append(out.Steps, res)
	}
	return out, nil
}

// setFeatureGates applies the configuration's feature gates as the kubelet
// does at start-up, and returns a function that puts the previous values back.
func setFeatureGates(gates map[string]bool) (func(), error) {
	if len(gates) == 0 {
		return func() {}, nil
	}
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	prev := map[string]bool{}
	for k := range gates {
		if _, ok := known[featuregate.Feature(k)]; ok { // Enabled panics on unknown gates
			prev[k] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(k))
		}
	}
	restore := func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(prev) }
	return restore, utilfeature.DefaultMutableFeatureGate.SetFromMap(gates)
}

// summaryProvider returns the step's summary (the manager only reads it), or the after-reclaim summary
// once a node-level reclaim function ran in this step.
type summaryProvider struct {
	current, afterReclaim *statsapi.Summary
	reclaimed             bool
}

func (p *summaryProvider) Get(context.Context, bool) (*statsapi.Summary, error) {
	if p.reclaimed && p.afterReclaim != nil {
		return p.afterReclaim, nil
	}
	return p.current, nil
}

func (p *summaryProvider) GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error) {
	return p.Get(ctx, false)
}

// nodeGC records the node-level reclaim functions the manager invokes.
type nodeGC struct {
	stats *summaryProvider
	log   []string
}

func (g *nodeGC) DeleteUnusedImages(context.Context) error {
	g.log = append(g.log, ReclaimImageGC)
	g.stats.reclaimed = true
	return nil
}

func (g *nodeGC) DeleteAllUnusedContainers(context.Context) error {
	g.log = append(g.log, ReclaimContainerGC)
	g.stats.reclaimed = true
	return nil
}

type diskInfo scenario.Filesystems

func (d diskInfo) HasDedicatedImageFs(context.Context) (bool, error) { return d.DedicatedImageFs, nil }
func (d diskInfo) HasDedicatedContainerFs(context.Context) (bool, error) {
	return d.SplitContainerFs, nil
}

// Encode formats a result as committed in <scenario>.kubelet.json: indented,
// one trailing newline, and without HTML escaping (messages contain quotes).
func Encode(res *Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ResultPath is where a scenario's kubelet outcomes live: the scenario's
// name with .kubelet.json instead of .yaml/.yml/.json.
func ResultPath(scenarioPath string) string {
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(scenarioPath, ext) && !strings.HasSuffix(scenarioPath, ".kubelet.json") {
			return strings.TrimSuffix(scenarioPath, ext) + ".kubelet.json"
		}
	}
	return scenarioPath + ".kubelet.json"
}
