package memqos

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a ResourceList from cpu and memory strings; "" leaves one out.
func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func res(req, lim v1.ResourceList) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: req, Limits: lim}
}

func ctr(name string, r v1.ResourceRequirements) v1.Container {
	return v1.Container{Name: name, Resources: r}
}

func sidecar(name string, r v1.ResourceRequirements) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c := ctr(name, r)
	c.RestartPolicy = &always
	return c
}

func podOf(containers ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: containers}}
}

func mem(n int64) string { return strconv.FormatInt(n, 10) }

func mib(n int64) int64 { return n * 1024 * 1024 }

func factor(f float64) *float64 { return &f }
