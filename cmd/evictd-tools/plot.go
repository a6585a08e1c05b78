package main

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/evictd/evictd/internal/cli"

	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/scenario"
	"github.com/evictd/evictd/internal/timeline"
)

func init() { cli.Plotter = plotter{} }

// plotter draws simulate --plot's picture (cli.Plotter).
type plotter struct{}

// CheckPath fails for a file that is neither .svg nor .png.
func (plotter) CheckPath(path string) error {
	_, err := chart.FormatOf(path)
	return err
}

// Plot draws the scenario's timeline to path (.svg or .png). The file is
// written whole or not at all.
func (plotter) Plot(path string, s *scenario.Scenario, res *scenario.Result) error {
	f, err := chart.FormatOf(path)
	if err != nil {
		return err
	}
	tl, steps, err := timeline.OfScenario(s, res)
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
