package collect

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseNames(t *testing.T) {
	for _, tc := range []struct {
		name, uid string
		ok        bool
	}{
		{"pod6f3c1a2b-1111-4c2d-9e8f-0123456789ab", "6f3c1a2b-1111-4c2d-9e8f-0123456789ab", true},
		{"kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice", "6f3c1a2b-1111-4c2d-9e8f-0123456789ab", true},
		{"kubepods-besteffort-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice", "0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff", true},
		{"kubepods-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice", "0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff", true},
		{"kubepods-burstable.slice", "", false},
		{"burstable", "", false},
		{"podNOTHEX", "", false},
		{"system.slice", "", false},
		{"other-pod0a0b0c0d.slice", "", false},
	} {
		uid, ok := parsePodCgroupName(tc.name)
		if uid != tc.uid || ok != tc.ok {
			t.Errorf("parsePodCgroupName(%q) = %q, %v; want %q, %v", tc.name, uid, ok, tc.uid, tc.ok)
		}
	}
	for _, tc := range []struct {
		name, id, rt string
		ok           bool
	}{
		{"cri-containerd-abc123.scope", "abc123", "containerd", true},
		{"crio-abc123.scope", "abc123", "crio", true},
		{"crio-conmon-abc123.scope", "", "", false},
		{"docker-abc123.scope", "abc123", "docker", true},
		{"abc123", "abc123", "", true}, // cgroupfs driver: the ID itself
		{"init.scope", "", "", false},
		{"cri-containerd-.scope", "", "", false},
	} {
		id, rt, ok := parseContainerCgroupName(tc.name)
		if id != tc.id || rt != tc.rt || ok != tc.ok {
			t.Errorf("parseContainerCgroupName(%q) = %q, %q, %v", tc.name, id, rt, ok)
		}
	}
}

func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	uidA = "6f3c1a2b-1111-4c2d-9e8f-0123456789ab"
	uidB = "0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff"
	uidC = "12345678-9abc-def0-1234-56789abcdef0"
)

func TestDiscoverPodsBothDrivers(t *testing.T) {
	for _, tc := range []struct {
		driver string
		pods   string
		dirs   []string
		want   []Workload
	}{
		{"cgroupfs", "/kubepods", []string{
			"kubepods/burstable/pod" + uidA + "/c1",
			"kubepods/burstable/pod" + uidA + "/c2",
			"kubepods/besteffort/pod" + uidB + "/c3",
			"kubepods/pod" + uidC + "/c4",
			"kubepods/besteffort/not-a-pod",
		}, []Workload{
			{Name: "pod" + uidB, PodUID: uidB, QOS: "besteffort", Cgroup: "/kubepods/besteffort/pod" + uidB,
				Containers: []Container{{ID: "c3", Cgroup: "/kubepods/besteffort/pod" + uidB + "/c3"}}},
			{Name: "pod" + uidA, PodUID: uidA, QOS: "burstable", Cgroup: "/kubepods/burstable/pod" + uidA,
				Containers: []Container{{ID: "c1", Cgroup: "/kubepods/burstable/pod" + uidA + "/c1"}, {ID: "c2", Cgroup: "/kubepods/burstable/pod" + uidA + "/c2"}}},
			{Name: "pod" + uidC, PodUID: uidC, QOS: "guaranteed", Cgroup: "/kubepods/pod" + uidC,
				Containers: []Container{{ID: "c4", Cgroup: "/kubepods/pod" + uidC + "/c4"}}},
		}},
		{"systemd", "/kubepods.slice", []string{
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice/cri-containerd-aaa.scope",
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice/crio-conmon-bbb.scope",
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice/crio-bbb.scope",
			"kubepods.slice/kubepods-pod12345678_9abc_def0_1234_56789abcdef0.slice/docker-ccc.scope",
		}, []Workload{
			{Name: "kubepods-besteffort-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice", PodUID: uidB, QOS: "besteffort",
				Cgroup:     "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice",
				Containers: []Container{{ID: "bbb", Runtime: "crio", Cgroup: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a0b0c0d_aaaa_bbbb_cccc_ddddeeeeffff.slice/crio-bbb.scope"}}},
			{Name: "kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice", PodUID: uidA, QOS: "burstable",
				Cgroup:     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice",
				Containers: []Container{{ID: "aaa", Runtime: "containerd", Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice/cri-containerd-aaa.scope"}}},
			{Name: "kubepods-pod12345678_9abc_def0_1234_56789abcdef0.slice", PodUID: uidC, QOS: "guaranteed",
				Cgroup:     "/kubepods.slice/kubepods-pod12345678_9abc_def0_1234_56789abcdef0.slice",
				Containers: []Container{{ID: "ccc", Runtime: "docker", Cgroup: "/kubepods.slice/kubepods-pod12345678_9abc_def0_1234_56789abcdef0.slice/docker-ccc.scope"}}},
		}},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			root := t.TempDir()
			mkdirs(t, root, tc.dirs...)
			if got, err := DetectPodsCgroup(root); err != nil || got != tc.pods {
				t.Fatalf("DetectPodsCgroup = %q, %v", got, err)
			}
			got, err := DiscoverPods(root, tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDiscoverPlainAndNoPods(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "work/web", "work/db")
	if _, err := DetectPodsCgroup(root); err != ErrNoPodsCgroup {
		t.Errorf("no kubepods: %v", err)
	}
	got, err := DiscoverPlain(root, "work")
	want := []Workload{{Name: "db", Cgroup: "/work/db"}, {Name: "web", Cgroup: "/work/web"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v %v", got, err)
	}
}

func FuzzParseCgroupNames(f *testing.F) {
	for _, s := range []string{"pod" + uidA, "kubepods-burstable-pod6f3c1a2b_1111_4c2d_9e8f_0123456789ab.slice",
		"cri-containerd-abc.scope", "crio-conmon-x.scope", "docker-.scope", "kubepods-pod.slice"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		if uid, ok := parsePodCgroupName(n); ok && !validUID(uid) {
			t.Fatalf("%q: invalid uid %q accepted", n, uid)
		}
		if id, rt, ok := parseContainerCgroupName(n); ok && id == "" || !ok && (id != "" || rt != "") {
			t.Fatalf("%q: id %q runtime %q ok %v", n, id, rt, ok)
		}
	})
}
