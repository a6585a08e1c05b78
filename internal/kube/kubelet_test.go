package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestDecodeDiskPart: the part of the kubelet's Summary that fetch decodes
// and keeps between fetches merges into evictd's Summary exactly as the
// whole one, decoded from the same JSON, does; it holds none of the figures
// evictd reads itself; and a Summary that is not JSON is an error.
func TestDecodeDiskPart(t *testing.T) {
	full := fullSummary(3)
	full.Node.Fs.Time = metav1.NewTime(time.Date(2026, 12, 6, 7, 0, 1, 0, time.UTC))
	full.Pods[1].Containers[0].Logs.Time = metav1.NewTime(time.Date(2026, 12, 6, 7, 0, 2, 0, time.UTC))
	js, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var whole statsapi.Summary
	if err := json.Unmarshal(js, &whole); err != nil {
		t.Fatal(err)
	}
	kept, err := decodeDiskPart(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	fromWhole, fromKept := ownSummary(full), ownSummary(full)
	mergeDisk(fromWhole, &whole)
	mergeDisk(fromKept, kept)
	if !reflect.DeepEqual(fromWhole, fromKept) {
		a, _ := json.Marshal(fromWhole)
		b, _ := json.Marshal(fromKept)
		t.Fatalf("merged from the whole Summary:\n%s\nfrom the part kept:\n%s", a, b)
	}
	if fromKept.Node.Fs == nil || fromKept.Node.Runtime == nil || fromKept.Node.Runtime.ImageFs == nil || fromKept.Pods[2].EphemeralStorage == nil ||
		len(fromKept.Pods[2].VolumeStats) != 2 || fromKept.Pods[2].Containers[1].Rootfs == nil || fromKept.Pods[2].Containers[1].Logs == nil {
		t.Fatalf("a disk figure is missing after the merge: %+v", fromKept.Pods[2])
	}
	if got, want := kept.Pods[1].Containers[0].Logs.Time, full.Pods[1].Containers[0].Logs.Time; !got.Equal(&want) {
		t.Errorf("a container's logs time: %v, want %v", got, want)
	}
	p, c := kept.Pods[1], kept.Pods[1].Containers[0]
	if kept.Node.CPU != nil || kept.Node.Memory != nil || kept.Node.Network != nil || len(kept.Node.SystemContainers) != 0 ||
		p.CPU != nil || p.Memory != nil || p.Network != nil || p.ProcessStats != nil || p.Swap != nil ||
		c.CPU != nil || c.Memory != nil || c.Swap != nil || len(c.UserDefinedMetrics) != 0 || len(c.Accelerators) != 0 {
		t.Errorf("the part kept holds figures evictd reads itself: node %+v, pod %+v", kept.Node, p)
	}
	if _, err := decodeDiskPart(strings.NewReader(`{"node": {"nodeName": 7}}`)); err == nil {
		t.Error("a node name that is a number decoded without an error")
	}
}

// BenchmarkKubeletSummaryHeap is what decoding the kubelet Summary of a
// 110-pod node costs on each fetch (every field set, as fullSummary makes
// it): the bytes allocated, the garbage each synchronize leaves, and the
// live heap held until the next fetch; decoded whole, and into its disk
// part alone as fetch does.
//
//	go test -run '^$' -bench KubeletSummaryHeap -benchmem ./internal/kube/
func BenchmarkKubeletSummaryHeap(b *testing.B) {
	js, err := json.Marshal(fullSummary(110))
	if err != nil {
		b.Fatal(err)
	}
	for _, how := range []string{"whole", "decodeDiskPart"} {
		b.Run(how, func(b *testing.B) {
			var held float64
			b.ReportAllocs()
			for b.Loop() {
				m0 := liveHeap()
				var kept *statsapi.Summary
				if how == "decodeDiskPart" {
					if kept, err = decodeDiskPart(bytes.NewReader(js)); err != nil {
						b.Fatal(err)
					}
				} else {
					var s statsapi.Summary
					if err := json.NewDecoder(bytes.NewReader(js)).Decode(&s); err != nil {
						b.Fatal(err)
					}
					kept = &s
				}
				held = float64(liveHeap()) - float64(m0)
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(held/(1<<20), "heap-MiB")
			b.ReportMetric(float64(len(js))/(1<<10), "json-KiB")
		})
	}
}
