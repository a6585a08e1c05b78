package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/resource"

	"github.com/evictd/evictd/internal/policy"
)

func TestParseExample(t *testing.T) {
	f, err := ReadFile("testdata/workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Workloads) != 4 {
		t.Fatalf("%d workloads", len(f.Workloads))
	}
	db := f.Workloads[0]
	if db.Name != "db" || db.Priority != 1000 || *db.TerminationGracePeriodSeconds != 30 || db.Limits.Memory().String() != "512Mi" {
		t.Fatalf("db: %+v", db)
	}
	if !f.Workloads[3].Critical {
		t.Fatal("agent not critical")
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "w.yaml: file is empty"},
		{"workloads: 3", `w.yaml: workloads: "3": want a list`},
		{"other: 1", "w.yaml: other: unknown field"},
		{"workloads: [{name: a, cgroup: a, request: {}}]", "w.yaml: workloads[0].request: unknown field"},
		{"workloads: [{cgroup: a}]", "w.yaml: workloads[0].name: required"},
		{"workloads: [{name: A_b, cgroup: a}]", `w.yaml: workloads[0].name: "A_b": a lowercase RFC 1123 label`},
		{"workloads: [{name: a, cgroup: ../x}]", `w.yaml: workloads[0].cgroup: "../x": must name a cgroup below`},
		{"workloads: [{name: a, cgroup: a/b}]", `w.yaml: workloads[0].cgroup: "a/b": must name a cgroup directly under`},
		{"workloads: [{name: a, cgroup: 'x['}]", `w.yaml: workloads[0].cgroup: "x[": bad glob`},
		{"workloads: [{name: a, cgroup: a, requests: {memory: 12x}}]", `w.yaml: workloads[0].requests.memory: "12x": quantities must match`},
		{"workloads: [{name: a, cgroup: a, requests: {gpu: 1}}]", `w.yaml: workloads[0].requests.gpu: unknown resource`},
		{"workloads: [{name: a, cgroup: a, requests: {memory: -1}}]", `w.yaml: workloads[0].requests.memory: "-1": must not be negative`},
		{"workloads: [{name: a, cgroup: a, requests: {memory: 2Gi}, limits: {memory: 1Gi}}]", `w.yaml: workloads[0].requests.memory: "2Gi": request above the limit 1Gi`},
		{"workloads: [{name: a, cgroup: a, priority: 1.5}]", `w.yaml: workloads[0].priority: "1.5": want a whole number that fits int32`},
		{"workloads: [{name: a, cgroup: a, priority: 3000000000}]", `w.yaml: workloads[0].priority: "3000000000": want a whole number that fits int32`},
		{"workloads: [{name: a, cgroup: a, terminationGracePeriodSeconds: -1}]", `workloads[0].terminationGracePeriodSeconds: "-1"`},
		{"workloads: [{name: a, cgroup: a, critical: yes please}]", `w.yaml: workloads[0].critical: "yes please": want true or false`},
		{"workloads: [{name: a, cgroup: a}, {name: a, cgroup: b}]", `workloads[1].name: "a": duplicate name (also workloads[0])`},
		{"workloads: [{name: a, cgroup: a, cgroup: b}]", `w.yaml: workloads[0].cgroup: "cgroup": duplicate key (lines 1 and 1)`},
		{"workloads:\n- name: a\n  name: b\n  cgroup: a\n", `w.yaml: workloads[0].name: "name": duplicate key (lines 2 and 3)`},
		{`{"workloads":[{"name":"a","cgroup":"a","critical":false,"critical":true}]}`, `w.yaml: workloads[0].critical: duplicate key`},
		{"workloads: [{name: a, cgroup: a, requests: {memory: 1Gi}, Requests: {}}]", `w.yaml: workloads[0].Requests: unknown field`},
		{"{}", `w.yaml: workloads: required`},
		{"workloads: [{name: a, cgroup: web}, {name: b, cgroup: /web/, critical: true}]", `w.yaml: workloads[1].cgroup: "/web/": duplicate cgroup (also workloads[0]`},
		{"workloads: []\n---\nworkloads: [{name: a, cgroup: a}]\n", `w.yaml: more than one YAML document`},
		{"user: admin\npassword: hunter2\n", `w.yaml: none of its keys is a field`},
	} {
		_, err := Parse([]byte(c.in), "w.yaml")
		if err == nil {
			t.Errorf("%q: no error", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q:\n got %q\nwant %q (one line)", c.in, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/workloads.yaml")
	f.Add(string(b))
	f.Add(`{"workloads":[{"name":"a","cgroup":"a","requests":{"memory":"1Gi"}}]}`)
	f.Add("workloads: [{name: a, cgroup: '*', priority: 2000000000}]")
	f.Fuzz(func(t *testing.T, s string) {
		file, err := Parse([]byte(s), "fuzz.yaml")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, w := range file.Workloads {
			if w.Name == "" || w.Cgroup == "" {
				t.Fatalf("accepted an entry without name or cgroup: %+v", w)
			}
		}
	})
}

func TestDiscover(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"db", "web", "batch-1", "batch-2", "agent", "stray", "evictd"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "memory.stat"), nil, 0o644) // a file, not a workload
	f, err := ReadFile("testdata/workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Discover(f, root, filepath.Join(root, "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Workload{}
	var names []string
	for _, w := range ws {
		got[w.Pod.Name] = w
		names = append(names, w.Pod.Name)
	}
	if strings.Join(names, " ") != "db web batch.batch-1 batch.batch-2 agent evictd stray" {
		t.Fatalf("pods %v", names)
	}
	qos := func(n string) v1.PodQOSClass { return qosOf(got[n].Pod) }
	if qos("db") != v1.PodQOSGuaranteed || qos("web") != v1.PodQOSBurstable || qos("stray") != v1.PodQOSBestEffort {
		t.Fatalf("QoS db=%s web=%s stray=%s", qos("db"), qos("web"), qos("stray"))
	}
	if p := got["stray"].Pod; *p.Spec.Priority != 0 || got["stray"].Spec != nil {
		t.Fatal("unknown cgroup is not priority 0 / unknown")
	}
	if got["agent"].Pod.Annotations[configSourceAnnotation] == "" {
		t.Fatal("critical workload not marked static")
	}
	if !got["evictd"].Self || got["evictd"].Pod.Annotations[configSourceAnnotation] == "" {
		t.Fatal("evictd's own cgroup is not protected")
	}
	if got["db"].Pod.UID != "host:db" || got["db"].Cgroup != filepath.Join(root, "db") {
		t.Fatalf("db uid %q cgroup %q", got["db"].Pod.UID, got["db"].Cgroup)
	}
	if r := corev1helpers.PodRequests(got["web"].Pod, corev1helpers.PodResourcesOptions{}); r.Memory().String() != "128Mi" {
		t.Fatalf("web request %s", r.Memory())
	}
}

// qosOf is the engine's QoS classification (a test-only import of the core).
func qosOf(p *v1.Pod) v1.PodQOSClass { return policy.PodQOS(p, policy.DefaultFeatureGates()) }

func TestSelfCgroup(t *testing.T) {
	dir, err := SelfCgroup("/sys/fs/cgroup/memory", false)
	if err != nil {
		t.Skip("no v1 memory line in /proc/self/cgroup:", err)
	}
	if !strings.HasPrefix(dir, "/sys/fs/cgroup/memory") {
		t.Fatalf("%q", dir)
	}
}
