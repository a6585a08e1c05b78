// Package scenario loads evictd scenario files — a kubelet configuration, a
// filesystem layout and a timeline of stats and pods — and runs them through
// the policy engine, one kubelet synchronize per step.
//
// Format (YAML or JSON):
//
//	kubeletConfig: {...}   # a KubeletConfiguration object, or a path relative to the scenario file
//	filesystems: {dedicatedImageFs: false, splitContainerFs: false}   # optional
//	steps:
//	- at: 0s               # Go duration since the start (2026-01-01T00:00:00Z)
//	  summary: {...}       # a Summary object, or a path
//	  pods: {...}          # a PodList, list of Pods or Pod, or a path; required in the first step
//	  afterReclaim: {...}  # optional: the Summary seen after node-level reclaim ran
//	  meminfo: {memTotalBytes: N, memAvailableBytes: N}  # optional: /proc/meminfo's figures; the
//	                       # kubelet never reads them, evictd's memavailable profile does
//
// Decoding is strict (load.Decode, as for every input file): an unknown
// field, a duplicate key, a second YAML document, a malformed value or a
// missing required field is an error naming the file, the field path and the
// value.
package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// Start is the instant a scenario's step times are added to. A fixed instant
// keeps outputs reproducible; it only matters where stats carry no time of
// their own.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Scenario is a loaded scenario file.
type Scenario struct {
	// Path is the scenario file.
	Path          string
	KubeletConfig *kubeletconfigv1beta1.KubeletConfiguration
	Filesystems   policy.Filesystems
	Steps         []Step
}

// Step is one synchronize.
type Step struct {
	// At is the offset from Start.
	At      time.Duration
	Summary *statsv1alpha1.Summary
	// Pods are this step's active pods (carried over from the previous step
	// when the step has none; pods evicted earlier are removed by Run).
	Pods []*v1.Pod
	// AfterReclaim is the Summary seen after node-level reclaim; nil means
	// reclaim freed nothing (the step's Summary is seen again).
	AfterReclaim *statsv1alpha1.Summary
	// Meminfo is the node's /proc/meminfo figures (nil: not given). Only
	// the memavailable profile reads them (docs/profile.md).
	Meminfo *policy.HostMemory
}

// maxSteps bounds a scenario so that a hostile file cannot exhaust memory
// through a huge step list of tiny entries.
const maxSteps = 100000

type rawScenario struct {
	KubeletConfig json.RawMessage     `json:"kubeletConfig"`
	Filesystems   *policy.Filesystems `json:"filesystems"`
	Steps         []rawStep           `json:"steps"`
}

type rawStep struct {
	At           *string            `json:"at"`
	Summary      json.RawMessage    `json:"summary"`
	Pods         json.RawMessage    `json:"pods"`
	AfterReclaim json.RawMessage    `json:"afterReclaim"`
	Meminfo      *policy.HostMemory `json:"meminfo"`
}

// LoadFile reads and decodes a scenario file, refusing one above the input
// size cap (load.MaxInputBytes).
func LoadFile(path string) (*Scenario, error) {
	data, err := load.ReadYAMLFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes a scenario with the decoder every input file uses
// (load.Decode). name is the file name for errors and the base of relative
// paths; with name "" relative paths are resolved against the working
// directory.
func Parse(data []byte, name string) (*Scenario, error) {
	fail := func(field, value string, err error) error {
		return &load.Error{File: name, Field: field, Value: value, Err: err}
	}
	var raw rawScenario
	if err := load.Decode(data, name, &raw); err != nil {
		return nil, err
	}
	s := &Scenario{Path: name}
	if isNull(raw.KubeletConfig) {
		return nil, fail("kubeletConfig", "", errors.New("required field missing (a KubeletConfiguration object or a file path)"))
	}
	var err error
	s.KubeletConfig, err = embedded(raw.KubeletConfig, name, "kubeletConfig", load.KubeletConfigFile, load.ParseKubeletConfig)
	if err != nil {
		return nil, err
	}
	if raw.Filesystems != nil {
		s.Filesystems = *raw.Filesystems
	}
	if len(raw.Steps) == 0 {
		return nil, fail("steps", "", errors.New("required field missing: at least one step"))
	}
	if len(raw.Steps) > maxSteps {
		return nil, fail("steps", strconv.Itoa(len(raw.Steps)), fmt.Errorf("more than %d steps", maxSteps))
	}
	var prev time.Duration
	var pods []*v1.Pod
	for i, st := range raw.Steps {
		p := "steps[" + strconv.Itoa(i) + "]"
		if st.At == nil {
			return nil, fail(p+".at", "", errors.New("required field missing (a Go duration since the start, e.g. 0s, 2m)"))
		}
		at, err := time.ParseDuration(*st.At)
		if err != nil {
			return nil, fail(p+".at", *st.At, fmt.Errorf("not a Go duration: %w", err))
		}
		if at < 0 {
			return nil, fail(p+".at", *st.At, errors.New("negative: steps start at 0s"))
		}
		if i > 0 && at < prev {
			return nil, fail(p+".at", *st.At, fmt.Errorf("earlier than the previous step (%v): steps must be in time order", prev))
		}
		prev = at
		step := Step{At: at}
		if isNull(st.Summary) {
			return nil, fail(p+".summary", "", errors.New("required field missing (a Summary object or a file path)"))
		}
		if step.Summary, err = embedded(st.Summary, name, p+".summary", load.SummaryFile, load.ParseSummary); err != nil {
			return nil, err
		}
		if !isNull(st.AfterReclaim) {
			if step.AfterReclaim, err = embedded(st.AfterReclaim, name, p+".afterReclaim", load.SummaryFile, load.ParseSummary); err != nil {
				return nil, err
			}
		}
		if isNull(st.Pods) {
			if i == 0 {
				return nil, fail(p+".pods", "", errors.New("required in the first step (a PodList, a list of Pods, a Pod, or a file path)"))
			}
		} else if pods, err = embedded(st.Pods, name, p+".pods", load.PodsFile, load.ParsePods); err != nil {
			return nil, err
		}
		step.Pods = pods
		if m := st.Meminfo; m != nil {
			switch {
			case m.MemTotalBytes == 0:
				return nil, fail(p+".meminfo.memTotalBytes", "0", errors.New("required and positive"))
			case m.MemAvailableBytes > m.MemTotalBytes:
				return nil, fail(p+".meminfo.memAvailableBytes", strconv.FormatUint(m.MemAvailableBytes, 10),
					fmt.Errorf("more than memTotalBytes (%d)", m.MemTotalBytes))
			}
			step.Meminfo = m
		}
		s.Steps = append(s.Steps, step)
	}
	return s, nil
}

// embedded decodes a field that holds either an object or a path to a file
// holding it. Errors name the scenario file and the full field path, or the
// referenced file and the path inside it.
func embedded[T any](raw json.RawMessage, file, field string,
	fromFile func(string) (T, error), parse func([]byte, string) (T, error)) (T, error) {
	var zero T
	var path string
	if err := json.Unmarshal(raw, &path); err == nil {
		if path == "" {
			return zero, &load.Error{File: file, Field: field, Err: errors.New("empty file path")}
		}
		if !filepath.IsAbs(path) && file != "" {
			path = filepath.Join(filepath.Dir(file), path)
		}
		v, err := fromFile(path)
		if err != nil {
			return zero, fmt.Errorf("%s: %s: %w", file, field, err)
		}
		return v, nil
	}
	v, err := parse(raw, file)
	if err != nil {
		var le *load.Error
		if errors.As(err, &le) {
			c := *le
			c.File = file
			c.Field = joinField(field, le.Field)
			return zero, &c
		}
		return zero, &load.Error{File: file, Field: field, Err: err}
	}
	return v, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func joinField(prefix, field string) string {
	switch {
	case field == "":
		return prefix
	case prefix == "":
		return field
	case field[0] == '[':
		return prefix + field
	}
	return prefix + "." + field
}
