package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/scenario"
	"github.com/evictd/evictd/internal/timeline"
)

// scenarioTimeline is what `simulate --plot` draws: the steps' decisions (res
// from a Verbose run) against every threshold the configuration defines.
func scenarioTimeline(s *scenario.Scenario, res *scenario.Result) (*timeline.Timeline, []float64, error) {
	cfg, err := policy.ConfigFromKubelet(s.KubeletConfig)
	if err != nil {
		return nil, nil, err
	}
	eng, err := policy.NewEngine(cfg, s.Filesystems)
	if err != nil {
		return nil, nil, err
	}
	var b timeline.Builder
	b.Known(eng.Thresholds())
	steps := make([]float64, 0, len(s.Steps))
	for i, st := range res.Steps {
		if st.Decision == nil {
			return nil, nil, fmt.Errorf("step %d has no decision (internal: run the scenario with Verbose)", i)
		}
		at := scenario.Start.Add(s.Steps[i].At)
		b.Add(timeline.SampleOf(at, st.Decision))
		steps = append(steps, s.Steps[i].At.Seconds())
	}
	return b.Build(), steps, nil
}

// writePlot draws the scenario's timeline to path (.svg or .png). The file
// is written whole or not at all.
func writePlot(path string, s *scenario.Scenario, res *scenario.Result) error {
	f, err := chart.FormatOf(path)
	if err != nil {
		return err
	}
	tl, steps, err := scenarioTimeline(s, res)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	title := "evictd simulate — " + filepath.Base(s.Path)
	if err := chart.Write(&buf, f, tl, chart.Options{Title: title, X: chart.XAxis{Steps: steps}}); err != nil {
		return err
	}
	return writeFileAtomic(path, buf.Bytes())
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so a reader never sees half a picture or page.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
