// Package workload turns a host-mode workloads file into the Pods the policy
// engine ranks. On a host without Kubernetes, workloads are cgroups under a
// configured root; the file gives each one what a pod spec would: requests
// and limits (memory, ephemeral-storage), priority, terminationGracePeriod
// and whether it is critical. Cgroups under the root that no entry describes
// are BestEffort with priority 0, the first to go under memory pressure.
package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/load"
)

// Namespace is the namespace of every host-mode pod.
const Namespace = "host"

// systemCriticalPriority is the kubelet's SystemCriticalPriority: a pod at or
// above it is critical and never evicted.
const systemCriticalPriority = 2000000000

// staticSource marks a host-mode critical pod as static (config.source
// "file"), which the kubelet's IsCriticalPod treats as critical.
const (
	configSourceAnnotation = "kubernetes.io/config.source"
	staticSource           = "file"
	// CgroupAnnotation carries the workload's cgroup directory on its Pod.
	CgroupAnnotation = "evictd.io/cgroup"
)

// Spec is one entry of the workloads file.
type Spec struct {
	Name string `json:"name"`
	// Cgroup names a cgroup directly under the workload root ("web"); a
	// glob ("batch-*") matches every such cgroup.
	Cgroup                        string          `json:"cgroup"`
	Requests                      v1.ResourceList `json:"requests,omitempty"`
	Limits                        v1.ResourceList `json:"limits,omitempty"`
	Priority                      int32           `json:"priority,omitempty"`
	TerminationGracePeriodSeconds *int64          `json:"terminationGracePeriodSeconds,omitempty"`
	Critical                      bool            `json:"critical,omitempty"`
}

// File is a parsed workloads file.
type File struct {
	Workloads []Spec `json:"workloads"`
}

// fields of a Spec, for strict decoding with field paths.
var specFields = map[string]bool{"name": true, "cgroup": true, "requests": true, "limits": true, "priority": true,
	"terminationGracePeriodSeconds": true, "critical": true}

// resources a workload may declare.
// cpu is accepted only so that a workload can be Guaranteed (the QoS class
// needs cpu and memory requests equal to limits); eviction never reads it.
var knownResources = map[v1.ResourceName]bool{v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true, v1.ResourceCPU: true}

// ReadFile reads and parses a workloads file (YAML or JSON).
func ReadFile(p string) (*File, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("workloads file: %w", err)
	}
	return Parse(b, p)
}

// Parse parses a workloads file strictly: unknown fields, duplicate keys,
// wrong types, bad quantities, duplicate names and invalid globs are errors
// that name the file, the field path and the value.
func Parse(data []byte, file string) (*File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &load.Error{File: file, Err: load.ErrEmpty}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &load.Error{File: file, Err: err}
	}
	var top any
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, &load.Error{File: file, Err: err}
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, &load.Error{File: file, Value: short(js), Err: errors.New("want an object with a workloads list")}
	}
	for k := range obj {
		if k != "workloads" {
			return nil, &load.Error{File: file, Field: k, Err: load.ErrUnknownField}
		}
	}
	list, ok := obj["workloads"].([]any)
	if !ok {
		return nil, &load.Error{File: file, Field: "workloads", Value: jsonText(obj["workloads"]), Err: errors.New("want a list")}
	}
	f := &File{}
	names := map[string]int{}
	for i, item := range list {
		at := fmt.Sprintf("workloads[%d]", i)
		s, err := parseSpec(item, file, at)
		if err != nil {
			return nil, err
		}
		if j, dup := names[s.Name]; dup {
			return nil, &load.Error{File: file, Field: at + ".name", Value: s.Name, Err: fmt.Errorf("duplicate name (also workloads[%d])", j)}
		}
		names[s.Name] = i
		f.Workloads = append(f.Workloads, s)
	}
	return f, nil
}

func parseSpec(item any, file, at string) (Spec, error) {
	var s Spec
	m, ok := item.(map[string]any)
	if !ok {
		return s, &load.Error{File: file, Field: at, Value: jsonText(item), Err: errors.New("want an object")}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !specFields[k] {
			return s, &load.Error{File: file, Field: at + "." + k, Err: load.ErrUnknownField}
		}
	}
	str := func(k string, required bool) (string, error) {
		v, ok := m[k]
		if !ok {
			if required {
				return "", &load.Error{File: file, Field: at + "." + k, Err: errors.New("required")}
			}
			return "", nil
		}
		x, ok := v.(string)
		if !ok || (required && x == "") {
			return "", &load.Error{File: file, Field: at + "." + k, Value: jsonText(v), Err: errors.New("want a non-empty string")}
		}
		return x, nil
	}
	var err error
	if s.Name, err = str("name", true); err != nil {
		return s, err
	}
	if msgs := validateName(s.Name); msgs != "" {
		return s, &load.Error{File: file, Field: at + ".name", Value: s.Name, Err: errors.New(msgs)}
	}
	if s.Cgroup, err = str("cgroup", true); err != nil {
		return s, err
	}
	clean := path.Clean(strings.TrimPrefix(s.Cgroup, "/"))
	if clean == "." || strings.HasPrefix(clean, "..") {
		return s, &load.Error{File: file, Field: at + ".cgroup", Value: s.Cgroup, Err: errors.New("must name a cgroup below the workload root")}
	}
	if strings.Contains(clean, "/") {
		return s, &load.Error{File: file, Field: at + ".cgroup", Value: s.Cgroup, Err: errors.New("must name a cgroup directly under the workload root (one path element, glob allowed)")}
	}
	if _, err := path.Match(clean, ""); err != nil {
		return s, &load.Error{File: file, Field: at + ".cgroup", Value: s.Cgroup, Err: fmt.Errorf("bad glob: %w", err)}
	}
	s.Cgroup = clean
	for _, k := range []string{"requests", "limits"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		rm, ok := v.(map[string]any)
		if !ok {
			return s, &load.Error{File: file, Field: at + "." + k, Value: jsonText(v), Err: errors.New("want an object of resource: quantity")}
		}
		rl := v1.ResourceList{}
		rkeys := make([]string, 0, len(rm))
		for rk := range rm {
			rkeys = append(rkeys, rk)
		}
		sort.Strings(rkeys)
		for _, rk := range rkeys {
			rv := rm[rk]
			field := at + "." + k + "." + rk
			if !knownResources[v1.ResourceName(rk)] {
				return s, &load.Error{File: file, Field: field, Err: errors.New("unknown resource (memory, ephemeral-storage or cpu)")}
			}
			var text string
			switch x := rv.(type) {
			case string:
				text = x
			case float64:
				text = jsonText(x)
			default:
				return s, &load.Error{File: file, Field: field, Value: jsonText(rv), Err: errors.New("want a quantity such as 256Mi")}
			}
			q, err := resource.ParseQuantity(text)
			if err != nil {
				return s, &load.Error{File: file, Field: field, Value: text, Err: err}
			}
			if q.Sign() < 0 {
				return s, &load.Error{File: file, Field: field, Value: text, Err: errors.New("must not be negative")}
			}
			rl[v1.ResourceName(rk)] = q
		}
		if k == "requests" {
			s.Requests = rl
		} else {
			s.Limits = rl
		}
	}
	for r, req := range s.Requests {
		if lim, ok := s.Limits[r]; ok && req.Cmp(lim) > 0 {
			return s, &load.Error{File: file, Field: at + ".requests." + string(r), Value: req.String(),
				Err: fmt.Errorf("request above the limit %s", lim.String())}
		}
	}
	if v, ok := m["priority"]; ok {
		n, ok := v.(float64)
		if !ok || n != float64(int32(n)) {
			return s, &load.Error{File: file, Field: at + ".priority", Value: jsonText(v), Err: errors.New("want a 32-bit integer")}
		}
		s.Priority = int32(n)
	}
	if v, ok := m["terminationGracePeriodSeconds"]; ok {
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) || n < 0 || n > 1<<40 {
			return s, &load.Error{File: file, Field: at + ".terminationGracePeriodSeconds", Value: jsonText(v), Err: errors.New("want a non-negative whole number of seconds")}
		}
		g := int64(n)
		s.TerminationGracePeriodSeconds = &g
	}
	if v, ok := m["critical"]; ok {
		b, ok := v.(bool)
		if !ok {
			return s, &load.Error{File: file, Field: at + ".critical", Value: jsonText(v), Err: errors.New("want true or false")}
		}
		s.Critical = b
	}
	return s, nil
}

// validateName accepts DNS-label-like names, since they become pod names.
func validateName(n string) string {
	if len(n) > 63 {
		return "longer than 63 characters"
	}
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' || r == '.') && i > 0 && i < len(n)-1
		if !ok {
			return "must be lower-case letters, digits, '-' or '.', starting and ending with a letter or digit"
		}
	}
	return ""
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func short(b []byte) string { return string(b) }

// Workload is one cgroup under the root as a Pod.
type Workload struct {
	Pod    *v1.Pod
	Cgroup string // absolute cgroup directory
	Rel    string // path relative to the root
	Spec   *Spec  // nil for a cgroup the file does not describe
	Self   bool   // evictd runs in it
}

// UID is the pod UID of the workload in cgroup rel (relative to the root):
// stable across restarts so the engine state and logs stay meaningful.
func UID(rel string) types.UID {
	return types.UID("host:" + strings.TrimPrefix(path.Clean("/"+rel), "/"))
}

// Discover lists the cgroups directly under root and turns each into a Pod. selfCgroup (absolute, may be "") is evictd's own memory cgroup: the
// workload holding it is made critical so it is never evicted.
func Discover(f *File, root, selfCgroup string) ([]Workload, error) {
	if f == nil {
		f = &File{}
	}
	rels := map[string]bool{}
	children, err := cgroup.Children(root)
	if err != nil {
		return nil, fmt.Errorf("workload root: %w", err)
	}
	for _, c := range children {
		rels[c] = true
	}
	claimed := map[string]bool{}
	var out []Workload
	for i := range f.Workloads {
		s := &f.Workloads[i]
		var matches []string
		if strings.ContainsAny(s.Cgroup, "*?[") {
			ms, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(s.Cgroup)))
			for _, m := range ms {
				if st, err := os.Stat(m); err == nil && st.IsDir() {
					rel, _ := filepath.Rel(root, m)
					matches = append(matches, filepath.ToSlash(rel))
				}
			}
		} else if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(s.Cgroup))); err == nil && st.IsDir() {
			matches = []string{s.Cgroup}
		}
		sort.Strings(matches)
		for _, rel := range matches {
			if claimed[rel] {
				continue // an earlier entry describes it
			}
			claimed[rel] = true
			name := s.Name
			if strings.ContainsAny(s.Cgroup, "*?[") {
				name = s.Name + "." + podName(path.Base(rel))
			}
			out = append(out, build(name, rel, root, s, selfCgroup))
		}
	}
	var unknown []string
	for rel := range rels {
		if !claimed[rel] {
			unknown = append(unknown, rel)
		}
	}
	sort.Strings(unknown)
	for _, rel := range unknown {
		out = append(out, build(podName(rel), rel, root, nil, selfCgroup))
	}
	return out, nil
}

// podName turns a cgroup name into a valid pod name.
func podName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	n := strings.Trim(b.String(), "-.")
	if n == "" {
		n = "cgroup"
	}
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-.")
	}
	return n
}

func build(name, rel, root string, s *Spec, selfCgroup string) Workload {
	dir := filepath.Join(root, filepath.FromSlash(rel))
	w := Workload{Cgroup: dir, Rel: rel, Spec: s}
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace, UID: UID(rel),
			Annotations: map[string]string{CgroupAnnotation: dir},
		},
		Spec:   v1.PodSpec{Containers: []v1.Container{{Name: "main"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	prio := int32(0)
	if s != nil {
		pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: s.Requests.DeepCopy(), Limits: s.Limits.DeepCopy()}
		prio = s.Priority
		if s.TerminationGracePeriodSeconds != nil {
			g := *s.TerminationGracePeriodSeconds
			pod.Spec.TerminationGracePeriodSeconds = &g
		}
		if s.Critical {
			pod.Annotations[configSourceAnnotation] = staticSource
		}
	}
	if selfCgroup != "" && (selfCgroup == dir || strings.HasPrefix(selfCgroup, dir+"/")) {
		w.Self = true
		pod.Annotations[configSourceAnnotation] = staticSource
	}
	pod.Spec.Priority = &prio
	w.Pod = pod
	return w
}

// Pods returns the Pods of ws in order.
func Pods(ws []Workload) []*v1.Pod {
	out := make([]*v1.Pod, len(ws))
	for i := range ws {
		out[i] = ws[i].Pod
	}
	return out
}

// SelfCgroup returns the memory cgroup of this process as an absolute
// directory under memRoot (v1: the "memory" controller line of
// /proc/self/cgroup; v2: the "0::" line).
func SelfCgroup(memRoot string, v2 bool) (string, error) {
	cs, err := host.ReadSelfCgroup("/proc")
	if err != nil {
		return "", err
	}
	for _, c := range cs {
		if v2 && c.HierarchyID == 0 && len(c.Controllers) == 0 {
			return filepath.Join(memRoot, c.Path), nil
		}
		if !v2 && slices.Contains(c.Controllers, "memory") {
			return filepath.Join(memRoot, c.Path), nil
		}
	}
	return "", errors.New("/proc/self/cgroup has no memory cgroup line")
}

// PodRef is the stats PodReference of the workload named name whose cgroup
// is cgroup (relative to the hierarchy root) under the workload root rootRel
// (also relative, e.g. "/workloads"): the same UID and namespace that
// Discover gives its Pod, so the engine can match stats to pods.
func PodRef(rootRel, cgroup, name string) statsapi.PodReference {
	rel := strings.TrimPrefix(path.Clean(cgroup), "/"+strings.Trim(rootRel, "/")+"/")
	return statsapi.PodReference{Name: name, Namespace: Namespace, UID: string(UID(rel))}
}
