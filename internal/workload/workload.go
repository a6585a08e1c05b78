// Package workload turns a host-mode workloads file into the Pods the policy
// engine ranks. On a host without Kubernetes, workloads are cgroups under a
// configured root; the file gives each one what a pod spec would: requests
// and limits (memory, ephemeral-storage), priority, terminationGracePeriod
// and whether it is critical. Cgroups under the root that no entry describes
// are BestEffort with priority 0, the first to go under memory pressure.
package workload

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

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

// resources a workload may declare.
// cpu is accepted only so that a workload can be Guaranteed (the QoS class
// needs cpu and memory requests equal to limits); eviction never reads it.
var knownResources = map[v1.ResourceName]bool{v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true, v1.ResourceCPU: true}

// maxGraceSeconds bounds terminationGracePeriodSeconds far above any real
// value (≈ 35 000 years) so that the seconds never overflow a Duration.
const maxGraceSeconds = 1 << 40

// ReadFile reads and parses a workloads file (YAML or JSON), refusing one
// above the input size cap (load.MaxInputBytes).
func ReadFile(p string) (*File, error) {
	b, err := load.ReadYAMLFile(p)
	if err != nil {
		return nil, err
	}
	return Parse(b, p)
}

// rawFile tells an absent workloads list from an empty one.
type rawFile struct {
	Workloads *[]Spec `json:"workloads"`
}

// Parse parses a workloads file strictly with the decoder every input file
// uses (load.Decode): unknown fields, duplicate keys, several YAML
// documents, wrong types and bad quantities are errors, and so are
// duplicate names, two entries for the same cgroup and invalid globs. Errors
// name the file, the field path and the value.
func Parse(data []byte, file string) (*File, error) {
	var raw rawFile
	if err := load.Decode(data, file, &raw); err != nil {
		return nil, err
	}
	if raw.Workloads == nil {
		return nil, &load.Error{File: file, Field: "workloads", Err: errors.New("required (a list of workloads, [] for none)")}
	}
	f := &File{Workloads: *raw.Workloads}
	names := map[string]int{}
	cgroups := map[string]int{}
	for i := range f.Workloads {
		at := fmt.Sprintf("workloads[%d]", i)
		s := &f.Workloads[i]
		written := s.Cgroup
		if err := checkSpec(s, file, at); err != nil {
			return nil, err
		}
		if j, dup := names[s.Name]; dup {
			return nil, &load.Error{File: file, Field: at + ".name", Value: s.Name, Err: fmt.Errorf("duplicate name (also workloads[%d])", j)}
		}
		names[s.Name] = i
		// A second entry for one cgroup would be silently shadowed by the
		// first (Discover gives each cgroup to the first entry naming it).
		if j, dup := cgroups[s.Cgroup]; dup {
			return nil, &load.Error{File: file, Field: at + ".cgroup", Value: written, Err: fmt.Errorf("duplicate cgroup (also workloads[%d], which would shadow this entry)", j)}
		}
		cgroups[s.Cgroup] = i
	}
	return f, nil
}

// checkSpec checks what the types alone do not, and cleans s.Cgroup.
func checkSpec(s *Spec, file, at string) error {
	fail := func(field, value string, err error) error {
		return &load.Error{File: file, Field: at + "." + field, Value: value, Err: err}
	}
	if s.Name == "" {
		return fail("name", "", errors.New("required"))
	}
	// The name becomes a pod name.
	if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 {
		return fail("name", s.Name, errors.New(strings.Join(msgs, "; ")))
	}
	if s.Cgroup == "" {
		return fail("cgroup", "", errors.New("required"))
	}
	clean := path.Clean(strings.TrimPrefix(s.Cgroup, "/"))
	if clean == "." || strings.HasPrefix(clean, "..") {
		return fail("cgroup", s.Cgroup, errors.New("must name a cgroup below the workload root"))
	}
	if strings.Contains(clean, "/") {
		return fail("cgroup", s.Cgroup, errors.New("must name a cgroup directly under the workload root (one path element, glob allowed)"))
	}
	if _, err := path.Match(clean, ""); err != nil {
		return fail("cgroup", s.Cgroup, fmt.Errorf("bad glob: %w", err))
	}
	s.Cgroup = clean
	for field, rl := range map[string]v1.ResourceList{"requests": s.Requests, "limits": s.Limits} {
		for _, r := range sortedResources(rl) {
			q := rl[r]
			if !knownResources[r] {
				return fail(field+"."+string(r), "", errors.New("unknown resource (memory, ephemeral-storage or cpu)"))
			}
			if q.Sign() < 0 {
				return fail(field+"."+string(r), q.String(), errors.New("must not be negative"))
			}
		}
	}
	for _, r := range sortedResources(s.Requests) {
		req := s.Requests[r]
		if lim, ok := s.Limits[r]; ok && req.Cmp(lim) > 0 {
			return fail("requests."+string(r), req.String(), fmt.Errorf("request above the limit %s", lim.String()))
		}
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && (*g < 0 || *g > maxGraceSeconds) {
		return fail("terminationGracePeriodSeconds", strconv.FormatInt(*g, 10), errors.New("want a non-negative whole number of seconds"))
	}
	return nil
}

func sortedResources(rl v1.ResourceList) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(rl))
	for r := range rl {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

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
// directory under memRoot (host.SelfMemoryCgroup).
func SelfCgroup(memRoot string, v2 bool) (string, error) {
	return host.SelfMemoryCgroup("/proc", memRoot, v2)
}

// PodRef is the stats PodReference of the workload named name whose cgroup
// is cgroup (relative to the hierarchy root) under the workload root rootRel
// (also relative, e.g. "/workloads"): the same UID and namespace that
// Discover gives its Pod, so the engine can match stats to pods.
func PodRef(rootRel, cgroup, name string) statsapi.PodReference {
	rel := strings.TrimPrefix(path.Clean(cgroup), "/"+strings.Trim(rootRel, "/")+"/")
	return statsapi.PodReference{Name: name, Namespace: Namespace, UID: string(UID(rel))}
}
