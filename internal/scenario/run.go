package scenario

import (
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/policy"
)

// Result is a scenario's timeline as "evictd simulate -o json" prints it.
// Parity is judged on At, NodeConditions, Evicted and NodeReclaim.
type Result struct {
	Steps []StepResult `json:"steps"`
}

// StepResult is one synchronize's outcome.
type StepResult struct {
	At             string                 `json:"at"`
	NodeConditions []v1.NodeConditionType `json:"nodeConditions"`
	Evicted        []Evicted              `json:"evicted"`
	NodeReclaim    []string               `json:"nodeReclaim"`
	// Extra fields for people; not part of the parity comparison.
	Signal            policy.Signal `json:"signal,omitempty"`
	ReclaimSufficient bool          `json:"reclaimSufficient,omitempty"`
	Error             string        `json:"error,omitempty"`
	// Decision is the full engine decision (only with RunOptions.Verbose).
	Decision *policy.Decision `json:"decision,omitempty"`
}

// Evicted is one evicted pod: the four fields compared with the kubelet byte
// for byte.
type Evicted struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	GracePeriodSeconds int64  `json:"gracePeriodSeconds"`
	Message            string `json:"message"`
}

// RunOptions tunes Run.
type RunOptions struct {
	// Verbose attaches each step's full Decision.
	Verbose bool
	// Profile is the policy profile (zero: the kubelet's, which the parity
	// tier compares with the kubelet).
	Profile policy.Profile
}

// Run drives a fresh engine through the scenario: one Step per step, the
// node-level reclaim continuation when the engine asks for it (with the
// step's afterReclaim Summary, or the same Summary when there is none), and
// pods evicted in a step removed from every later step.
func Run(s *Scenario, opt RunOptions) (*Result, error) {
	cfg, err := policy.ConfigFromKubelet(s.KubeletConfig)
	if err != nil {
		return nil, err
	}
	cfg.Profile = opt.Profile
	eng, err := policy.NewEngine(cfg, s.Filesystems)
	if err != nil {
		return nil, err
	}
	type key struct{ ns, name string }
	gone := map[key]bool{}
	res := &Result{Steps: make([]StepResult, 0, len(s.Steps))}
	for _, st := range s.Steps {
		now := Start.Add(st.At)
		pods := make([]*v1.Pod, 0, len(st.Pods))
		for _, p := range st.Pods {
			if !gone[key{p.Namespace, p.Name}] {
				pods = append(pods, p)
			}
		}
		d := eng.StepHost(now, policy.Input{Summary: st.Summary, Pods: pods}, st.Meminfo)
		reclaim := d.Reclaim
		if d.ReclaimPending {
			after := st.AfterReclaim
			if after == nil {
				after = st.Summary
			}
			d = eng.ReclaimedHost(now, after, st.Meminfo)
		}
		sr := StepResult{
			At:                st.At.String(),
			NodeConditions:    d.NodeConditions,
			Evicted:           []Evicted{},
			NodeReclaim:       append([]string{}, reclaim...),
			Signal:            d.Signal,
			ReclaimSufficient: d.ReclaimSufficient,
			Error:             d.Error,
		}
		if sr.NodeConditions == nil {
			sr.NodeConditions = []v1.NodeConditionType{}
		}
		for _, ev := range d.Evictions {
			sr.Evicted = append(sr.Evicted, Evicted{Namespace: ev.Pod.Namespace, Name: ev.Pod.Name,
				GracePeriodSeconds: ev.GracePeriodSeconds, Message: ev.Message})
			gone[key{ev.Pod.Namespace, ev.Pod.Name}] = true
		}
		if opt.Verbose {
			dd := d
			sr.Decision = &dd
		}
		res.Steps = append(res.Steps, sr)
	}
	return res, nil
}
