package memqos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The cases of pkg/kubelet/qos/policy_test.go TestGetContainerOOMScoreAdjust
// (v1.37.2), re-expressed. The kubelet's table gives a low-high range per
// container; its ranges are exact except for three pods whose range was
// left loose upstream, where we check the exact value the formula yields.
func TestContainerOOMScoreAdj(t *testing.T) {
	const standard = 8000000000
	critical := int32(2000000000)
	nodeCriticalPrio := int32(2000001000)

	sampleReq, sampleLim := mem(standard/8), mem(1000+standard/8)
	sampleRes := res(rl("", sampleReq), rl("", sampleLim))
	podMemReq, podMemLim := mem(standard/4), mem(1000+standard/4)
	withPodRes := func(p *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	withInit := func(p *v1.Pod, cs ...v1.Container) *v1.Pod {
		p.Spec.InitContainers = cs
		return p
	}
	clusterCritical := podOf(ctr("cluster-critical", res(nil, nil)))
	clusterCritical.Spec.PriorityClassName = "system-cluster-critical"
	clusterCritical.Spec.Priority = &critical
	nodeCritical := podOf(ctr("node-critical", res(nil, nil)))
	nodeCritical.Spec.PriorityClassName = "system-node-critical"
	nodeCritical.Spec.Priority = &nodeCriticalPrio

	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		capacity int64
		want     map[string]int
	}{
		{"cpu-limit", podOf(ctr("c", res(nil, rl("10", "")))), 4000000000, map[string]int{"c": 999}},
		{"memory-limit-cpu-request", podOf(ctr("c", res(rl("0", ""), rl("", "10G")))), 8000000000, map[string]int{"c": 999}},
		{"zero-memory-limit", podOf(ctr("c", res(nil, rl("", "0")))), 7230457451, map[string]int{"c": 1000}},
		{"no-request-limit", podOf(ctr("c", res(nil, nil))), 4000000000, map[string]int{"c": 1000}},
		{"equal-request-limit-cpu-memory", podOf(ctr("c", res(rl("5m", "10G"), rl("5m", "10G")))), 123456789, map[string]int{"c": -997}},
		// upstream range 495..505; 1000 - 1000*4e9/8e9 = 500
		{"cpu-unlimited-memory-limited-with-requests", podOf(ctr("c", res(rl("5m", mem(standard/2)), rl("", "10G")))), standard, map[string]int{"c": 500}},
		// 1000 - 999 = 1, clamped to 3
		{"request-no-limit", podOf(ctr("c", res(rl("5m", mem(standard-1)), nil))), standard, map[string]int{"c": 3}},
		{"cluster-critical is only BestEffort", clusterCritical, 4000000000, map[string]int{"cluster-critical": 1000}},
		{"node-critical", nodeCritical, 4000000000, map[string]int{"node-critical": -997}},
		// upstream range 875..880; 1000 - 1000*1e9/8e9 = 875
		{"burstable-unique-container", podOf(ctr("c", sampleRes)), standard, map[string]int{"c": 875}},
		{"burstable-mixed-unique-main-container", withInit(podOf(ctr("main-1", sampleRes)), ctr("init-container", sampleRes)), standard,
			map[string]int{"init-container": 875, "main-1": 875}},
		{"burstable-mixed-multi-container-small-sidecar", withInit(podOf(ctr("main-1", sampleRes)), ctr("init-container", sampleRes),
			sidecar("sidecar-small-container", res(rl("", mem(standard/20)), rl("", sampleLim)))), standard,
			map[string]int{"init-container": 875, "sidecar-small-container": 875, "main-1": 875}},
		{"burstable-mixed-multi-container-same-request", withInit(podOf(ctr("main-1", sampleRes)), ctr("init-container", sampleRes),
			sidecar("sidecar-container", sampleRes)), standard,
			map[string]int{"init-container": 875, "sidecar-container": 875, "main-1": 875}},
		{"burstable-mixed-multi-container-big-sidecar", withInit(podOf(ctr("main-1", sampleRes)), ctr("init-container", sampleRes),
			sidecar("sidecar-big-container", res(rl("", mem(standard/2)), rl("", sampleLim)))), standard,
			map[string]int{"init-container": 875, "sidecar-big-container": 500, "main-1": 875}},
		{"guaranteed-pod-resources-no-container-resources", withPodRes(podOf(ctr("a", res(nil, nil)), ctr("b", res(nil, nil))),
			rl("5m", podMemReq), rl("5m", podMemReq)), 4000000000, map[string]int{"a": -997, "b": -997}},
		{"guaranteed-pod-resources-unequal-container-requests", withPodRes(podOf(
			ctr("burstable-container", res(rl("3m", sampleReq), rl("5m", sampleReq))), ctr("best-effort-container", res(nil, nil))),
			rl("5m", podMemReq), rl("5m", podMemReq)), 4000000000, map[string]int{"burstable-container": -997, "best-effort-container": -997}},
		{"burstable-pod-resources-no-container-resources", withPodRes(podOf(ctr("a", res(nil, nil)), ctr("b", res(nil, nil))),
			rl("5m", podMemReq), rl("5m", podMemLim)), 4000000000, map[string]int{"a": 750, "b": 750}},
		{"burstable-pod-resources-equal-container-requests", withPodRes(podOf(
			ctr("a", res(rl("5m", sampleReq), rl("5m", sampleReq))), ctr("b", res(rl("5m", sampleReq), rl("5m", sampleReq)))),
			rl("5m", podMemReq), rl("5m", podMemLim)), 4000000000, map[string]int{"a": 750, "b": 750}},
		{"burstable-pod-resources-unequal-container-requests", withPodRes(podOf(
			ctr("burstable-container", res(rl("3m", sampleReq), rl("5m", sampleReq))), ctr("best-effort-container", res(nil, nil))),
			rl("5m", podMemReq), rl("5m", podMemLim)), 4000000000, map[string]int{"burstable-container": 625, "best-effort-container": 875}},
		{"burstable-pod-resources-no-container-resources-with-sidecar", withInit(withPodRes(podOf(ctr("main", res(nil, nil))),
			rl("5m", podMemReq), rl("5m", podMemLim)), sidecar("side", res(nil, nil))), 4000000000, map[string]int{"main": 750, "side": 750}},
		{"burstable-pod-resources-equal-container-requests-with-sidecar", withInit(withPodRes(podOf(
			ctr("burstable-container", res(rl("5m", sampleReq), rl("5m", sampleLim)))), rl("5m", podMemReq), rl("5m", podMemLim)),
			sidecar("burstable-sidecar", res(rl("5m", sampleReq), rl("5m", sampleLim)))), 4000000000,
			map[string]int{"burstable-container": 750, "burstable-sidecar": 750}},
		{"burstable-pod-resources-unequal-container-requests-with-sidecar", withInit(withPodRes(podOf(
			ctr("burstable-container-1", res(rl("5m", "1000000000"), rl("5m", podMemLim))),
			ctr("burstable-container-2", res(rl("5m", "500000000"), rl("5m", podMemLim)))), rl("5m", "2000000000"), rl("5m", podMemLim)),
			sidecar("burstable-sidecar", res(rl("5m", "200000000"), rl("5m", podMemLim)))), 4000000000,
			map[string]int{"burstable-container-1": 725, "burstable-container-2": 850, "burstable-sidecar": 850}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			s.MemoryCapacity = tc.capacity
			seen := 0
			all := append(append([]v1.Container{}, tc.pod.Spec.InitContainers...), tc.pod.Spec.Containers...)
			for i := range all {
				want, ok := tc.want[all[i].Name]
				if !ok {
					continue
				}
				seen++
				if got := ContainerOOMScoreAdj(tc.pod, &all[i], s); got != want {
					t.Errorf("%s: oom_score_adj %d, want %d", all[i].Name, got, want)
				}
			}
			if seen != len(tc.want) {
				t.Fatalf("checked %d containers, table names %d", seen, len(tc.want))
			}
		})
	}
}

// With PodLevelResources off, pod-level requests are ignored: the pod is
// classified by its containers and the formula uses container requests only.
func TestContainerOOMScoreAdjPodLevelResourcesOff(t *testing.T) {
	p := podOf(ctr("a", res(rl("3m", "1000000000"), rl("5m", "1000000000"))), ctr("b", res(nil, nil)))
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("5m", "2000000000"), Limits: rl("5m", "2000001000")}
	s := DefaultSettings()
	s.MemoryCapacity = 4000000000
	s.PodLevelResources = false
	if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[0], s); got != 750 {
		t.Errorf("a: %d, want 750 (1000 - 1000*1e9/4e9)", got)
	}
	if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[1], s); got != 999 {
		t.Errorf("b: %d, want 999 (no request: 1000, lowered below BestEffort)", got)
	}
	s.PodLevelResources = true
	if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[1], s); got != 875 {
		t.Errorf("b with pod-level resources: %d, want 875 (1000 - 1000*(0+1e9/2)/4e9)", got)
	}
}

// status.qosClass wins over the computed class, as in the kubelet.
func TestContainerOOMScoreAdjUsesStatusQOSClass(t *testing.T) {
	p := podOf(ctr("a", res(rl("", "1Gi"), nil)))
	p.Status.QOSClass = v1.PodQOSGuaranteed
	s := DefaultSettings()
	s.MemoryCapacity = 8000000000
	if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[0], s); got != -997 {
		t.Errorf("got %d, want -997", got)
	}
}
