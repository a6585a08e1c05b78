package memqos

import (
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func readTestPods(t *testing.T) []*v1.Pod {
	t.Helper()
	data, err := os.ReadFile("testdata/pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.List
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	for _, raw := range list.Items {
		p := &v1.Pod{}
		if err := yaml.Unmarshal(raw.Raw, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return pods
}

// The kubelet's GetContainerOOMScoreAdjust, run on the same pods (see
// testdata/README.md), against ours.
func TestOOMScoreAdjMatchesKubeletOutput(t *testing.T) {
	want, err := os.ReadFile("testdata/kubelet-v1.37.2-oom-16Gi.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSettings()
	s.MemoryCapacity = 16 << 30
	var got strings.Builder
	for _, p := range readTestPods(t) {
		for _, c := range ForPod(p, s).Containers {
			fmt.Fprintf(&got, "%s/%s %s %d\n", p.Namespace, p.Name, c.Name, c.OOMScoreAdj)
		}
	}
	if got.String() != string(want) {
		t.Errorf("oom_score_adj differs from the kubelet's:\n got:\n%s\nwant:\n%s", got.String(), want)
	}
}

// The kubelet's ResourceConfigForPod + ApplyPodLevelMemoryHigh on the same
// pods (TieredReservation, factor 0.9, 4 KiB pages), against ours.
func TestPodCgroupMatchesKubeletOutput(t *testing.T) {
	want, err := os.ReadFile("testdata/kubelet-v1.37.2-podcgroup.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSettings()
	s.MemoryCapacity = 16 << 30
	s.ReservationPolicy = ReservationTiered
	s.ThrottlingFactor = factor(0.9)
	s.PageSize = 4096
	str := func(v Value) string {
		if !v.Written {
			return ""
		}
		return v.String()
	}
	var got strings.Builder
	for _, p := range readTestPods(t) {
		c := ForPod(p, s).Cgroup
		fmt.Fprintf(&got, "%s/%s min=%s low=%s high=%s\n", p.Namespace, p.Name, str(c.MemoryMin), str(c.MemoryLow), str(c.MemoryHigh))
	}
	if got.String() != string(want) {
		t.Errorf("pod cgroup values differ from the kubelet's:\n got:\n%s\nwant:\n%s", got.String(), want)
	}
}
