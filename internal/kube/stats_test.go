package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/policy"
)

func TestMain(m *testing.M) {
	cgrouptest.RunHogIfChild()
	os.Exit(m.Run())
}

const (
	uidA     = "0a0a0a0a-1111-2222-3333-444444444444"
	uidB     = "0b0b0b0b-1111-2222-3333-444444444444"
	uidC     = "0c0c0c0c-1111-2222-3333-444444444444"
	cidMain  = "1111111111111111111111111111111111111111111111111111111111111111"
	cidSide  = "2222222222222222222222222222222222222222222222222222222222222222"
	cidPause = "9999999999999999999999999999999999999999999999999999999999999999"
	cidB     = "3333333333333333333333333333333333333333333333333333333333333333"
)

func runningPod(ns, name, uid string, containers map[string]string) *v1.Pod {
	now := metav1.Now()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &now, QOSClass: v1.PodQOSBestEffort}}
	for name, cid := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: name, ContainerID: "containerd://" + cid})
	}
	return p
}

// kubepodsTree lays out, under a pods cgroup named for the driver: pod A
// (containers main 24 MiB, side 8 MiB and the sandbox 1 MiB), pod B (not in
// the informer) and no cgroup for pod C. It returns the pods cgroup
// relative to the hierarchy root.
func kubepodsTree(t *testing.T, root string, v2 bool, driver string) string {
	base := cgrouptest.UniqueName(t) + "-" + driver
	var pods, podA, podB string
	cont := func(pod, id string) string {
		if driver == "systemd" {
			return pod + "/cri-containerd-" + id + ".scope"
		}
		return pod + "/" + id
	}
	switch driver {
	case "systemd":
		pods = base + "/kubepods.slice"
		podA = pods + "/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uidA, "-", "_") + ".slice"
		podB = pods + "/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uidB, "-", "_") + ".slice"
	default:
		pods = base + "/kubepods"
		podA = pods + "/besteffort/pod" + uidA
		podB = pods + "/besteffort/pod" + uidB
	}
	dirs := map[string]int{cont(podA, cidMain): 24, cont(podA, cidSide): 8, cont(podA, cidPause): 1, cont(podB, cidB): 4}
	made := map[string]string{}
	for rel := range dirs {
		made[rel] = cgrouptest.Mkdirs(t, root, rel)
		if v2 {
			cgrouptest.EnableV2Controllers(t, root, filepath.Dir(rel))
		}
	}
	setLimit := cgroupv1.WriteMemoryLimitInBytes
	if v2 {
		setLimit = cgroupv2.WriteMemoryMax
	}
	if err := setLimit(filepath.Join(root, pods), 256<<20); err != nil {
		t.Fatal(err)
	}
	for rel, mib := range dirs {
		cgrouptest.StartHog(t, mib, made[rel])
	}
	return "/" + pods
}

func TestRealStatsV1(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	for _, driver := range []string{"cgroupfs", "systemd"} {
		t.Run(driver, func(t *testing.T) { testStats(t, cgrouptest.V1Memory, false, driver) })
	}
}

func TestRealStatsV2(t *testing.T) {
	root := cgrouptest.RequireV2Memory(t)
	for _, driver := range []string{"cgroupfs", "systemd"} {
		t.Run(driver, func(t *testing.T) { testStats(t, root, true, driver) })
	}
}

// testStats: evictd's Summary on a kubepods tree names pods and containers
// as the kubelet's does, leaves out the sandbox and the pod the informer
// does not know, carries no disk stats without the kubelet's, and takes
// them from the kubelet's Summary when it answers.
func testStats(t *testing.T, root string, v2 bool, driver string) {
	podsRel := kubepodsTree(t, root, v2, driver)
	a := runningPod("ns1", "a", uidA, map[string]string{"main": cidMain, "side": cidSide})
	c := runningPod("ns1", "c", uidC, map[string]string{"main": "4444"})
	var logs bytes.Buffer
	listed := []*v1.Pod{a, c}
	s := &Stats{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := s.NewCollector(collect.Config{NodeName: "node-a", PodsCgroup: podsRel}); err != nil {
		t.Fatal(err)
	}
	sum, err := s.SummaryOf(context.Background(), listed)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 {
		t.Fatalf("pods in the Summary: %+v; want pod a only", sum.Pods)
	}
	p := sum.Pods[0]
	if p.PodRef != (statsapi.PodReference{Namespace: "ns1", Name: "a", UID: uidA}) {
		t.Errorf("pod ref %+v", p.PodRef)
	}
	var cnames []string
	for _, ct := range p.Containers {
		cnames = append(cnames, ct.Name)
	}
	if strings.Join(cnames, ",") != "main,side" {
		t.Errorf("containers %v, want main,side (no sandbox)", cnames)
	}
	if p.ProcessStats == nil || *p.ProcessStats.ProcessCount != 2 {
		t.Errorf("process count %v, want 2 (the sandbox's hog not counted)", p.ProcessStats)
	}
	if ws := *p.Memory.WorkingSetBytes; ws < 32<<20 {
		t.Errorf("pod working set %d, want ≥ 33 MiB (the pod cgroup, sandbox included)", ws)
	}
	if sum.Node.Fs != nil || sum.Node.Runtime != nil || p.EphemeralStorage != nil {
		t.Errorf("disk stats without a disk source: node fs %v, runtime %v, pod %v", sum.Node.Fs, sum.Node.Runtime, p.EphemeralStorage)
	}

	// Pod c has started a container (its status has an ID) but has no
	// cgroup: the kubelet has stopped it and the API has not heard (a
	// stale informer while the API server is away). A pod that started no
	// container yet may lack its cgroup: not vanished; nor is pod a.
	pending := runningPod("ns1", "pending", "0d0d0d0d-1111-2222-3333-444444444444", nil)
	if got := s.Vanished([]*v1.Pod{a, c, pending}); len(got) != 1 || !got[c.UID] {
		t.Errorf("vanished %v, want pod c only", got)
	}
	if !strings.Contains(logs.String(), "has no cgroup on this node any more") || !strings.Contains(logs.String(), "pod=ns1/c") {
		t.Errorf("log %q: want one line naming pod c", logs.String())
	}

	// The engine on this Summary: the kubelet's message names the container.
	kc := &kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "250Mi"}}
	cfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		t.Fatal(err)
	}
	engine := func() *policy.Engine {
		eng, err := policy.NewEngine(cfg, policy.Filesystems{})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	d := engine().Step(time.Now(), policy.Input{Summary: sum, Pods: []*v1.Pod{a, c}})
	if len(d.Evictions) != 1 {
		t.Fatalf("no eviction: %+v", d)
	}
	// Pod c has no cgroup yet: the kubelet ranks a pod without stats first,
	// and so does the engine (parity), without an error.
	if d.Evictions[0].Pod.Name != "c" || len(d.Candidates) != 2 || d.Candidates[1].Pod.Name != "a" {
		t.Errorf("ranking %+v, want [c (no stats), a]", d.Candidates)
	}
	d = engine().Step(time.Now(), policy.Input{Summary: sum, Pods: []*v1.Pod{a}})
	if len(d.Evictions) != 1 || !strings.Contains(d.Evictions[0].Message, "Container main was using") ||
		d.Evictions[0].Annotations["offending_containers"] != "main,side" {
		t.Errorf("eviction of a: %+v; want the kubelet's container part naming main", d.Evictions)
	}

	// The kubelet's Summary gives the disk part.
	now := metav1.Now()
	u := func(v uint64) *uint64 { return &v }
	ks := statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-a", Fs: &statsapi.FsStats{Time: now, AvailableBytes: u(5 << 30), CapacityBytes: u(10 << 30)},
			Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{Time: now, AvailableBytes: u(4 << 30), CapacityBytes: u(10 << 30)}}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "a", Namespace: "ns1", UID: uidA},
			EphemeralStorage: &statsapi.FsStats{Time: now, UsedBytes: u(7 << 20)},
			Containers:       []statsapi.ContainerStats{{Name: "main", Rootfs: &statsapi.FsStats{Time: now, UsedBytes: u(3 << 20)}}}}},
	}
	var up atomic.Bool
	up.Store(true)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() || r.URL.Path != "/stats/summary" {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(ks)
	}))
	defer srv.Close()
	ksum := &KubeletSummary{URL: srv.URL + "/stats/summary", Client: srv.Client(), Every: time.Nanosecond}
	if _, err := ksum.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Disk = ksum
	sum, err = s.SummaryOf(context.Background(), listed)
	if err != nil {
		t.Fatal(err)
	}
	p = sum.Pods[0]
	if sum.Node.Fs == nil || *sum.Node.Fs.AvailableBytes != 5<<30 || sum.Node.Runtime.ImageFs == nil ||
		p.EphemeralStorage == nil || *p.EphemeralStorage.UsedBytes != 7<<20 || p.Containers[0].Rootfs == nil || *p.Containers[0].Rootfs.UsedBytes != 3<<20 {
		t.Errorf("disk part not merged: node %+v, pod %+v", sum.Node.Fs, p)
	}
	up.Store(false)
	// The fetch runs in the background: a later Summary sees the failure.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if sum, err = s.SummaryOf(context.Background(), listed); err != nil {
			t.Fatalf("kubelet down: %v; want no error", err)
		}
		if sum.Node.Fs == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kubelet's failure never showed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = s.SummaryOf(context.Background(), listed)
	out := logs.String()
	if n := strings.Count(out, "disk thresholds"); n != 3 {
		t.Errorf("%d disk-state log lines, want 3 (none, then evaluated, then not again):\n%s", n, out)
	}
}

// A static pod's cgroup carries the kubelet's UID (its file's hash); the
// informer lists its mirror pod, with another UID and the hash in the
// mirror annotation: the Summary names the cgroup after the mirror pod.
func TestRealStatsMirrorPodV1(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	const hash = "0123456789abcdef0123456789abcdef"
	pods := cgrouptest.UniqueName(t) + "/kubepods"
	cgrouptest.StartHog(t, 4, cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pods+"/burstable/pod"+hash+"/"+cidMain))
	m := runningPod("kube-system", "etcd-node-a", uidA, map[string]string{"etcd": cidMain})
	m.Annotations = map[string]string{"kubernetes.io/config.mirror": hash, "kubernetes.io/config.hash": hash, "kubernetes.io/config.source": "file"}
	listed := []*v1.Pod{m}
	s := &Stats{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := s.NewCollector(collect.Config{PodsCgroup: "/" + pods}); err != nil {
		t.Fatal(err)
	}
	sum, err := s.SummaryOf(context.Background(), listed)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].PodRef != (statsapi.PodReference{Namespace: "kube-system", Name: "etcd-node-a", UID: uidA}) ||
		len(sum.Pods[0].Containers) != 1 || sum.Pods[0].Containers[0].Name != "etcd" {
		t.Fatalf("Summary pods %+v, want the mirror pod kube-system/etcd-node-a with container etcd", sum.Pods)
	}
}
