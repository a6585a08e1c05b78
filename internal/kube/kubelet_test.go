package kube

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fullSummary is a kubelet Summary of pods pods with every field set: each
// pointer points at a value, each slice has two elements, each string and
// number differs from the others (so a figure moved to the wrong place
// shows), as the kubelet fills its Summary for a running pod.
func fullSummary(pods int) *statsapi.Summary {
	n := uint64(0)
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			if v.Type().PkgPath() == "time" {
				return // metav1.Time's time.Time: its zero is a time
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					fill(v.Field(i))
				}
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range 2 {
				fill(v.Index(i))
			}
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
		case reflect.String:
			n++
			v.SetString(fmt.Sprintf("s%d", n))
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			n++
			v.SetUint(n)
		case reflect.Int64, reflect.Int32, reflect.Int:
			n++
			v.SetInt(int64(n))
		case reflect.Float64, reflect.Float32:
			n++
			v.SetFloat(float64(n))
		case reflect.Bool:
			v.SetBool(true)
		}
	}
	s := &statsapi.Summary{}
	fill(reflect.ValueOf(s).Elem())
	s.Pods = make([]statsapi.PodStats, pods)
	for i := range s.Pods {
		fill(reflect.ValueOf(&s.Pods[i]).Elem())
	}
	return s
}

// ownSummary is evictd's own Summary of the same pods: names and UIDs
// only, no disk figures (what SummaryOf has before mergeDisk).
func ownSummary(ks *statsapi.Summary) *statsapi.Summary {
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: ks.Node.NodeName}}
	for _, p := range ks.Pods {
		op := statsapi.PodStats{PodRef: p.PodRef}
		for _, c := range p.Containers {
			op.Containers = append(op.Containers, statsapi.ContainerStats{Name: c.Name})
		}
		s.Pods = append(s.Pods, op)
	}
	return s
}

// TestDiskPartKeepsWhatMergeDiskTakes: the part of the kubelet's Summary
// kept between fetches merges into evictd's Summary exactly as the whole
// one does, and holds none of the figures evictd reads itself.
func TestDiskPartKeepsWhatMergeDiskTakes(t *testing.T) {
	full := fullSummary(3)
	kept := diskPart(full)
	fromFull, fromKept := ownSummary(full), ownSummary(full)
	mergeDisk(fromFull, full)
	mergeDisk(fromKept, kept)
	if !reflect.DeepEqual(fromFull, fromKept) {
		a, _ := json.Marshal(fromFull)
		b, _ := json.Marshal(fromKept)
		t.Fatalf("merged from the whole Summary:\n%s\nfrom the part kept:\n%s", a, b)
	}
	if fromKept.Node.Fs == nil || fromKept.Node.Runtime == nil || fromKept.Pods[2].EphemeralStorage == nil ||
		len(fromKept.Pods[2].VolumeStats) != 2 || fromKept.Pods[2].Containers[1].Rootfs == nil || fromKept.Pods[2].Containers[1].Logs == nil {
		t.Fatalf("a disk figure is missing after the merge: %+v", fromKept.Pods[2])
	}
	p, c := kept.Pods[1], kept.Pods[1].Containers[0]
	if kept.Node.CPU != nil || kept.Node.Memory != nil || kept.Node.Network != nil || len(kept.Node.SystemContainers) != 0 ||
		p.CPU != nil || p.Memory != nil || p.Network != nil || p.ProcessStats != nil || p.Swap != nil ||
		c.CPU != nil || c.Memory != nil || c.Swap != nil || len(c.UserDefinedMetrics) != 0 || len(c.Accelerators) != 0 {
		t.Errorf("the part kept holds figures evictd reads itself: node %+v, pod %+v", kept.Node, p)
	}
}

// BenchmarkKubeletSummaryHeap is the live heap the kubelet's Summary of a
// 110-pod node holds between two fetches (every field set, as
// fullSummary makes it, decoded from its JSON as fetch decodes it), whole
// and as diskPart keeps it.
//
//	go test -run '^$' -bench KubeletSummaryHeap -benchtime 1x ./internal/kube/
func BenchmarkKubeletSummaryHeap(b *testing.B) {
	js, err := json.Marshal(fullSummary(110))
	if err != nil {
		b.Fatal(err)
	}
	for _, part := range []bool{false, true} {
		b.Run(fmt.Sprintf("diskPart=%t", part), func(b *testing.B) {
			var held float64
			for b.Loop() {
				m0 := liveHeap()
				var s statsapi.Summary
				if err := json.Unmarshal(js, &s); err != nil {
					b.Fatal(err)
				}
				kept := &s
				if part {
					kept = diskPart(&s)
				}
				held = float64(liveHeap()) - float64(m0)
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(held/(1<<20), "heap-MiB")
			b.ReportMetric(float64(len(js))/(1<<10), "json-KiB")
		})
	}
}
