// Package scenario loads evictd scenario files (the format of issue 2 item 5,
// shared with `evictd simulate`): a kubelet configuration, the filesystem
// layout and a timeline of steps, each with a /stats/summary and the pods.
//
// It keeps the kubelet configuration as raw JSON, because the oracle decodes it
// with the kubelet's own codec (defaulting and conversion included) and must
// see exactly what the user wrote.
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Filesystems is the layout the kubelet's cadvisor would detect.
type Filesystems struct {
	DedicatedImageFs bool `json:"dedicatedImageFs"`
	SplitContainerFs bool `json:"splitContainerFs"`
}

// Step is one synchronize of the eviction manager.
type Step struct {
	// At is the time since the start instant 2026-01-01T00:00:00Z.
	At time.Duration
	// Summary is what the summary provider returns for this step.
	Summary *statsapi.Summary
	// AfterReclaim is what the summary provider returns once node-level
	// reclaim (container/image GC) ran in this step; nil means reclaim freed
	// nothing, i.e. Summary again.
	AfterReclaim *statsapi.Summary
	// Pods are the active pods (before removing those evicted earlier).
	Pods []*v1.Pod
}

// Scenario is a loaded scenario file.
type Scenario struct {
	// Path is the file it was loaded from.
	Path string
	// KubeletConfig is the KubeletConfiguration as JSON, with apiVersion and
	// kind filled in when the file left them out.
	KubeletConfig []byte
	Filesystems   Filesystems
	Steps         []Step
}

// Start is the instant step times are relative to.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fileStep struct {
	At           string          `json:"at"`
	Summary      json.RawMessage `json:"summary"`
	Pods         json.RawMessage `json:"pods"`
	AfterReclaim json.RawMessage `json:"afterReclaim"`
	// Meminfo is /proc/meminfo's figures for evictd's memavailable profile
	// (docs/profile.md). The kubelet never reads /proc/meminfo for
	// eviction, so the oracle accepts the field and ignores it.
	Meminfo json.RawMessage `json:"meminfo"`
}

type file struct {
	KubeletConfig json.RawMessage `json:"kubeletConfig"`
	Filesystems   *Filesystems    `json:"filesystems"`
	Steps         []fileStep      `json:"steps"`
}

// Load reads and validates a scenario file (YAML or JSON).
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	s := &Scenario{Path: path}
	if f.Filesystems != nil {
		s.Filesystems = *f.Filesystems
	}
	kc, err := resolve(dir, f.KubeletConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: kubeletConfig: %w", path, err)
	}
	if kc == nil {
		return nil, fmt.Errorf("%s: kubeletConfig: required", path)
	}
	if s.KubeletConfig, err = withTypeMeta(kc); err != nil {
		return nil, fmt.Errorf("%s: kubeletConfig: %w", path, err)
	}
	if len(f.Steps) == 0 {
		return nil, fmt.Errorf("%s: steps: at least one step is required", path)
	}
	var prev Step
	for i, fs := range f.Steps {
		field := fmt.Sprintf("%s: steps[%d]", path, i)
		var st Step
		if st.At, err = time.ParseDuration(fs.At); err != nil {
			return nil, fmt.Errorf("%s.at: %q: %w", field, fs.At, err)
		}
		if i > 0 && st.At < prev.At {
			return nil, fmt.Errorf("%s.at: %s is before the previous step's %s", field, st.At, prev.At)
		}
		raw, err := resolve(dir, fs.Summary)
		if err != nil {
			return nil, fmt.Errorf("%s.summary: %w", field, err)
		}
		if raw == nil {
			return nil, fmt.Errorf("%s.summary: required", field)
		}
		if st.Summary, err = decodeSummary(raw); err != nil {
			return nil, fmt.Errorf("%s.summary: %w", field, err)
		}
		if raw, err = resolve(dir, fs.AfterReclaim); err != nil {
			return nil, fmt.Errorf("%s.afterReclaim: %w", field, err)
		}
		if raw != nil {
			if st.AfterReclaim, err = decodeSummary(raw); err != nil {
				return nil, fmt.Errorf("%s.afterReclaim: %w", field, err)
			}
		}
		if raw, err = resolve(dir, fs.Pods); err != nil {
			return nil, fmt.Errorf("%s.pods: %w", field, err)
		}
		switch {
		case raw != nil:
			if st.Pods, err = decodePods(raw); err != nil {
				return nil, fmt.Errorf("%s.pods: %w", field, err)
			}
		case i == 0:
			return nil, fmt.Errorf("%s.pods: required in the first step", field)
		default:
			st.Pods = prev.Pods
		}
		s.Steps = append(s.Steps, st)
		prev = st
	}
	return s, nil
}

// resolve returns the JSON of an inline object, or of the file a string
// names (relative to dir); nil when the field is absent.
func resolve(dir string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '"' {
		return raw, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return js, nil
}

func withTypeMeta(raw []byte) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	}
	if _, ok := m["kind"]; !ok {
		m["kind"] = "KubeletConfiguration"
	}
	return json.Marshal(m)
}

func decodeSummary(raw []byte) (*statsapi.Summary, error) {
	var s statsapi.Summary
	if err := yaml.UnmarshalStrict(raw, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// decodePods accepts a PodList (or List), a JSON list of Pods, or one Pod.
func decodePods(raw []byte) ([]*v1.Pod, error) {
	var items []v1.Pod
	switch {
	case raw[0] == '[':
		if err := yaml.UnmarshalStrict(raw, &items); err != nil {
			return nil, err
		}
	default:
		var probe struct {
			Kind  string          `json:"kind"`
			Items json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, err
		}
		if probe.Items != nil || probe.Kind == "PodList" || probe.Kind == "List" {
			var list v1.PodList
			if err := yaml.UnmarshalStrict(raw, &list); err != nil {
				return nil, err
			}
			items = list.Items
		} else {
			var p v1.Pod
			if err := yaml.UnmarshalStrict(raw, &p); err != nil {
				return nil, err
			}
			items = []v1.Pod{p}
		}
	}
	pods := make([]*v1.Pod, len(items))
	for i := range items {
		pods[i] = &items[i]
	}
	return pods, nil
}
