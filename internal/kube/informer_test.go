package kube

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/evictd/evictd/internal/kube/kubetest"
)

// appPod is a pod as a Deployment of kubectl apply makes it: the
// last-applied annotation, environment, command, probes, and the managed
// fields the API server adds on create and on the status update.
func appPod(ns, name string) *v1.Pod {
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	var env []v1.EnvVar
	for i := range 12 {
		env = append(env, v1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", i), Value: fmt.Sprintf("value-of-setting-%02d", i)})
	}
	return testPod(ns, name, func(p *v1.Pod) {
		p.Labels["app.kubernetes.io/part-of"] = "shop"
		p.Annotations = map[string]string{
			lastAppliedAnnotation: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","namespace":"` + ns +
				`"},"spec":{"containers":[{"name":"main","image":"busybox","command":["/bin/app","--listen=:8080"]}]}}`,
			"prometheus.io/scrape": "true",
		}
		c := &p.Spec.Containers[0]
		c.Command, c.Args, c.Env = []string{"/bin/app"}, []string{"--listen=:8080", "--log-level=info"}, env
		c.LivenessProbe, c.ReadinessProbe = probe, probe
		c.Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("50m")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
		}
	})
}

// TestInformerTrimsPods on a real API server: the pods the informer caches
// have no managed fields, no last-applied annotation and no container
// environment, command or probes, and keep what evictd reads (labels, the
// other annotations, resources, the status).
func TestInformerTrimsPods(t *testing.T) {
	srv := apiserver(t)
	srv.Namespace(t, "trim")
	created := srv.RunningPod(t, appPod("trim", "web"), "node-a")
	if len(created.ManagedFields) == 0 {
		t.Fatal("the API server set no managed fields: nothing to trim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps, err := NewPods(ctx, srv.API, "node-a", Self{})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	var p *v1.Pod
	waitUntil(t, "the informer to have the pod", func() bool {
		p = ps.Get("trim", "web", created.UID)
		return p != nil && p.Status.Phase == v1.PodRunning
	})
	c := p.Spec.Containers[0]
	if len(p.ManagedFields) != 0 || p.Annotations[lastAppliedAnnotation] != "" || c.Env != nil || c.Command != nil || c.Args != nil ||
		c.LivenessProbe != nil || c.ReadinessProbe != nil {
		t.Errorf("cached pod keeps what evictd never reads: %d managed fields, last-applied %t, env %d, command %v, args %v, probes %v %v",
			len(p.ManagedFields), p.Annotations[lastAppliedAnnotation] != "", len(c.Env), c.Command, c.Args, c.LivenessProbe != nil, c.ReadinessProbe != nil)
	}
	if p.Labels["app.kubernetes.io/part-of"] != "shop" || p.Annotations["prometheus.io/scrape"] != "true" ||
		c.Resources.Requests.Memory().String() != "64Mi" || c.Resources.Limits.Memory().String() != "128Mi" ||
		len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID == "" || p.Status.StartTime == nil {
		t.Errorf("cached pod lost what evictd reads: labels %v, annotations %v, resources %v, status %+v", p.Labels, p.Annotations, c.Resources, p.Status)
	}
}

// BenchmarkPodInformerMemory is the heap the pod informer holds for a node
// with 110 pods (the kubelet's default maxPods) and 250 (a large maxPods;
// the node tier's pod range holds 250), each an appPod
// bound to the node and running, with and without the transform (trimPod):
// live heap after a GC with the informer synced, less before it started.
// Needs the apiserver tier (EVICTD_TEST_APISERVER=1).
//
//	EVICTD_TEST_APISERVER=1 EVICTD_K8S_BIN=.cache/node/bin go test -run '^$' -bench PodInformerMemory -benchtime 1x ./internal/kube/
func BenchmarkPodInformerMemory(b *testing.B) {
	srv := kubetest.Start(b)
	srv.Namespace(b, "mem")
	// Every informer stays open to the end: one closed earlier would be
	// collected between another's two readings and hide its heap.
	var open []*Pods
	defer func() {
		for _, ps := range open {
			ps.Close()
		}
	}()
	made := 0
	for _, n := range []int{110, 250} {
		for ; made < n; made++ {
			srv.RunningPod(b, appPod("mem", fmt.Sprintf("app-%03d", made)), "node-a")
		}
		for _, trim := range []bool{true, false} {
			b.Run(fmt.Sprintf("pods=%d/trimmed=%t", n, trim), func(b *testing.B) {
				saved := podTransform
				defer func() { podTransform = saved }()
				if !trim {
					podTransform = nil
				}
				var held float64
				for b.Loop() {
					m0 := liveHeap()
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					ps, err := NewPods(ctx, srv.API, "node-a", Self{})
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					open = append(open, ps)
					if got := len(ps.All()); got != n {
						b.Fatalf("the informer lists %d pods, want %d", got, n)
					}
					held = float64(liveHeap()) - float64(m0)
				}
				b.ReportMetric(held/(1<<20), "heap-MiB")
				b.ReportMetric(held/float64(n)/(1<<10), "KiB/pod")
			})
		}
	}
}

// liveHeap is the heap in live objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
