package load

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: prod}
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests: {memory: 100Mi}
      limits: {memory: 200Mi}
`

func TestParsePodsShapes(t *testing.T) {
	podJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"prod"},"spec":{"containers":[{"name":"app","image":"nginx","resources":{"requests":{"memory":"100Mi"},"limits":{"memory":"200Mi"}}}]}}`
	other := `{"kind":"Pod","metadata":{"name":"db","namespace":"prod"},"spec":{"containers":[{"name":"pg"}]}}`
	for _, tc := range []struct {
		name  string
		doc   string
		names []string
	}{
		{"single pod yaml", podYAML, []string{"web"}},
		{"single pod json", podJSON, []string{"web"}},
		{"pod without kind", `{"metadata":{"name":"web"}}`, []string{"web"}},
		{"kubectl List", `{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[` + podJSON + `,` + other + `]}`, []string{"web", "db"}},
		{"PodList", `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"12"},"items":[` + other + `]}`, []string{"db"}},
		{"items without kind", `{"items":[` + other + `]}`, []string{"db"}},
		{"json array", `[` + podJSON + `, ` + other + `]`, []string{"web", "db"}},
		{"yaml array", "- metadata: {name: a}\n- metadata: {name: b}\n", []string{"a", "b"}},
		{"yaml List", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(podYAML, "\n", "\n  "), []string{"web"}},
		{"empty list", `{"kind":"PodList","apiVersion":"v1","items":[]}`, []string{}},
		{"empty array", `[]`, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := ParsePods([]byte(tc.doc), "pods.json")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.names, ",") {
				t.Errorf("names %v, want %v", got, tc.names)
			}
		})
	}
	pods, _ := ParsePods([]byte(podYAML), "p")
	if q := pods[0].Spec.Containers[0].Resources.Limits["memory"]; q.Cmp(resource.MustParse("200Mi")) != 0 {
		t.Errorf("limit = %v", q.String())
	}
}

func TestParsePodsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		is              error
	}{
		{"empty", "", "pods.yaml: file is empty", ErrEmpty},
		{"bad quantity", "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources: {limits: {memory: 12x}}\n",
			`pods.yaml: spec.containers[0].resources.limits.memory: "12x": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`, nil},
		{"bad quantity in list item", `{"kind":"List","items":[{"kind":"Pod"},{"kind":"Pod","spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"lots"}}}]}}]}`,
			`pods.yaml: items[1].spec.containers[0].resources.requests.cpu: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`, nil},
		{"unknown field in item", `[{"kind":"Pod","spec":{"containers":[{"name":"a","imagee":"x"}]}}]`, "pods.yaml: [0].spec.containers[0].imagee: unknown field", ErrUnknownField},
		{"non-pod item", `{"kind":"List","items":[{"kind":"Service","apiVersion":"v1"}]}`, `pods.yaml: items[0].kind: "Service": want Pod`, nil},
		{"wrong list apiVersion", `{"kind":"PodList","apiVersion":"v2","items":[]}`, `pods.yaml: apiVersion: "v2": want v1`, nil},
		{"wrong kind", `{"kind":"Deployment","apiVersion":"apps/v1"}`, `pods.yaml: kind: "Deployment": want Pod`, nil},
		{"scalar item", `[1]`, `pods.yaml: [0]: "1": want a Pod object`, nil},
		{"null item", `{"items":[null]}`, `pods.yaml: items[0]: "null": want a Pod object`, nil},
		{"scalar top", "42", "pods.yaml: top level is a scalar, want a Pod, a PodList or a list of Pods", nil},
		{"duplicate yaml key", "kind: Pod\nmetadata:\n  name: a\n  name: b\n", `pods.yaml: metadata.name: "name": duplicate key (lines 3 and 4); the kubelet would silently keep the last one`, ErrDuplicateKey},
		{"wrong type", `{"kind":"Pod","spec":{"terminationGracePeriodSeconds":"30"}}`, `pods.yaml: spec.terminationGracePeriodSeconds: "30": want a whole number`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePods([]byte(tc.doc), "pods.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
		})
	}
}

func TestParseSummary(t *testing.T) {
	s, err := SummaryFile("testdata/summary.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.NodeName == "" || s.Node.Memory == nil || s.Node.Memory.AvailableBytes == nil || len(s.Pods) == 0 {
		t.Fatalf("summary decoded incompletely: %+v", s.Node)
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"node":{"memory":{"availableBytes":-5}}}`, `summary.json: node.memory.availableBytes: "-5": want a non-negative whole number that fits uint64`},
		{`{"node":{"memroy":{}}}`, `summary.json: node.memroy: unknown field`},
		{`{"node":{"memory":{"time":"yesterday"}}}`, `summary.json: node.memory.time: "yesterday": parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{`[]`, `summary.json: top level is a list, want a Summary object ({"node": …, "pods": […]})`},
		{`{"node":`, ``},
	} {
		_, err := ParseSummary([]byte(tc.doc), "summary.json")
		if err == nil {
			t.Errorf("%s: no error", tc.doc)
			continue
		}
		if tc.want != "" && err.Error() != tc.want {
			t.Errorf("error\n got %s\nwant %s", err, tc.want)
		}
	}
}
