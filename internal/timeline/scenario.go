package timeline

import (
	"fmt"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/scenario"
)

// OfScenario is the timeline `evictd-tools simulate --plot` draws: the decisions
// of a Verbose run (res) against every threshold the configuration defines,
// named as the configuration writes them, and the X of every step (the
// chart's ticks).
func OfScenario(s *scenario.Scenario, res *scenario.Result) (*Timeline, []float64, error) {
	cfg, err := policy.ConfigFromKubelet(s.KubeletConfig)
	if err != nil {
		return nil, nil, err
	}
	eng, err := policy.NewEngine(cfg, s.Filesystems)
	if err != nil {
		return nil, nil, err
	}
	b := Builder{Spell: ConfigSpelling(s.KubeletConfig)}
	b.Known(eng.Thresholds())
	steps := make([]float64, 0, len(s.Steps))
	for i, st := range res.Steps {
		if st.Decision == nil {
			return nil, nil, fmt.Errorf("step %d has no decision (internal: run the scenario with Verbose)", i)
		}
		b.Add(SampleOf(scenario.Start.Add(s.Steps[i].At), st.Decision))
		steps = append(steps, s.Steps[i].At.Seconds())
	}
	return b.Build(), steps, nil
}
