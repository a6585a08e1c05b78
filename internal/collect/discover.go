// Package collect builds a kubelet-shaped stats Summary
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) of the live node from the cgroup
// and host readers, and discovers the workloads it covers: the kubelet's pod
// cgroups (systemd or cgroupfs driver, cgroup v1 or v2) or, on hosts without
// Kubernetes, the children of a plain workload root.
package collect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/evictd/evictd/internal/cgroup"
)

// Workload is one pod, or one plain workload, found in the cgroup hierarchy.
type Workload struct {
	// Name is the cgroup directory's name (a plain workload's only name).
	Name string
	// PodUID is the pod's UID with dashes ("" for a plain workload).
	PodUID string
	// QOS is "guaranteed", "burstable" or "besteffort" from the cgroup
	// layout ("" for a plain workload).
	QOS string
	// Cgroup is the workload's cgroup path relative to the hierarchy root,
	// starting with "/" (e.g. "/kubepods/burstable/pod<uid>").
	Cgroup string
	// Containers are the pod's container cgroups (empty for a plain workload).
	Containers []Container
}

// Container is one container cgroup of a pod.
type Container struct {
	// ID is the runtime's container ID (the part after containerd:// in the
	// pod status), taken from the cgroup name.
	ID string
	// Runtime is "containerd", "crio" or "docker" when the cgroup name says
	// so (systemd driver scopes), else "".
	Runtime string
	// Cgroup is the container's cgroup path relative to the hierarchy root.
	Cgroup string
}

// Pod cgroup roots the kubelet creates, per cgroup driver.
const (
	PodsCgroupSystemd  = "/kubepods.slice"
	PodsCgroupCgroupfs = "/kubepods"
)

// ErrNoPodsCgroup says neither kubepods.slice nor kubepods exists.
var ErrNoPodsCgroup = errors.New("no pods cgroup (neither /kubepods.slice nor /kubepods) under the hierarchy root: is this a Kubernetes node? (set the pods cgroup, or use a plain workload root)")

// DetectPodsCgroup returns the kubelet's pod cgroup root under root:
// "/kubepods.slice" (systemd driver) or "/kubepods" (cgroupfs driver).
func DetectPodsCgroup(root string) (string, error) {
	for _, c := range []string{PodsCgroupSystemd, PodsCgroupCgroupfs} {
		if st, err := os.Stat(root + c); err == nil && st.IsDir() {
			return c, nil
		}
	}
	return "", ErrNoPodsCgroup
}

// DiscoverPods lists the pods under the pods cgroup podsCgroup (relative to
// root, e.g. "/kubepods.slice"), with both cgroup drivers' naming:
//
//	systemd:  kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//	          (Guaranteed pods directly: kubepods.slice/kubepods-pod<uid_>.slice; also crio-<id>.scope, docker-<id>.scope)
//	cgroupfs: kubepods/burstable/pod<uid>/<id>   (Guaranteed: kubepods/pod<uid>/<id>)
//
// Pods are returned sorted by cgroup path. A pod cgroup that vanishes while
// being listed is skipped.
func DiscoverPods(root, podsCgroup string) ([]Workload, error) {
	podsCgroup = "/" + strings.Trim(podsCgroup, "/")
	top, err := cgroup.Children(root + podsCgroup)
	if err != nil {
		return nil, fmt.Errorf("listing pods cgroup: %w", err)
	}
	var out []Workload
	add := func(parent, name, qos string) {
		uid, ok := parsePodCgroupName(name)
		if !ok {
			return
		}
		w := Workload{Name: name, PodUID: uid, QOS: qos, Cgroup: path.Join(parent, name)}
		cs, err := cgroup.Children(root + w.Cgroup)
		if errors.Is(err, fs.ErrNotExist) {
			return // the pod went away while we looked
		}
		for _, c := range cs {
			if id, rt, ok := parseContainerCgroupName(c); ok {
				w.Containers = append(w.Containers, Container{ID: id, Runtime: rt, Cgroup: path.Join(w.Cgroup, c)})
			}
		}
		out = append(out, w)
	}
	for _, n := range top {
		if qos, ok := parseQOSCgroupName(n); ok {
			sub, err := cgroup.Children(root + path.Join(podsCgroup, n))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("listing %s pods: %w", qos, err)
			}
			for _, p := range sub {
				add(path.Join(podsCgroup, n), p, qos)
			}
			continue
		}
		add(podsCgroup, n, "guaranteed")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cgroup < out[j].Cgroup })
	return out, nil
}

// DiscoverPlain lists the workloads of a plain workload root (relative to
// root): each child cgroup is one workload, named after its directory.
func DiscoverPlain(root, workloadRoot string) ([]Workload, error) {
	workloadRoot = "/" + strings.Trim(workloadRoot, "/")
	es, err := cgroup.Children(root + workloadRoot)
	if err != nil {
		return nil, fmt.Errorf("listing workload root: %w", err)
	}
	var out []Workload
	for _, e := range es {
		out = append(out, Workload{Name: e, Cgroup: path.Join(workloadRoot, e)})
	}
	return out, nil
}

// parseQOSCgroupName recognises the QoS-class cgroups of both drivers.
func parseQOSCgroupName(n string) (string, bool) {
	switch n {
	case "burstable", "kubepods-burstable.slice":
		return "burstable", true
	case "besteffort", "kubepods-besteffort.slice":
		return "besteffort", true
	}
	return "", false
}

// parsePodCgroupName returns the pod UID (with dashes) of a pod cgroup name:
// "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid with _>.slice" (systemd).
func parsePodCgroupName(n string) (string, bool) {
	var uid string
	switch {
	case strings.HasSuffix(n, ".slice"):
		i := strings.LastIndex(n, "-pod")
		if i < 0 || !strings.HasPrefix(n, "kubepods-") {
			return "", false
		}
		uid = strings.ReplaceAll(strings.TrimSuffix(n[i+len("-pod"):], ".slice"), "_", "-")
	case strings.HasPrefix(n, "pod"):
		uid = n[len("pod"):]
	default:
		return "", false
	}
	if !validUID(uid) {
		return "", false
	}
	return uid, true
}

// validUID accepts what the API server issues (a UUID) and, for static pods,
// the kubelet's hash-based UIDs: lower-case hex and dashes, at least 8 long.
func validUID(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// parseContainerCgroupName returns the container ID and runtime of a
// container cgroup name. The conmon scopes CRI-O creates beside its
// containers ("crio-conmon-<id>.scope") are not containers.
func parseContainerCgroupName(n string) (id, runtime string, ok bool) {
	if strings.HasPrefix(n, "crio-conmon-") {
		return "", "", false
	}
	trimmed := strings.TrimSuffix(n, ".scope")
	for _, p := range []struct{ prefix, runtime string }{
		{"cri-containerd-", "containerd"}, {"crio-", "crio"}, {"docker-", "docker"},
	} {
		if strings.HasPrefix(trimmed, p.prefix) {
			if id = trimmed[len(p.prefix):]; id == "" {
				return "", "", false
			}
			return id, p.runtime, true
		}
	}
	if trimmed != n { // some other .scope: not a container we know
		return "", "", false
	}
	// cgroupfs driver: the directory is the container ID itself.
	return n, "", n != ""
}
