// Package deploy_test checks what deploy/ ships against the agent it
// installs and watches: the DaemonSet's hygiene (rendered from the Helm chart
// into deploy/kubernetes/evictd.yaml; the ops tier checks that rendering is
// current), and that every metric the alert rules and the dashboard query is
// one evictd exports. The node tier runs all of it for real.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/agent"
)

const (
	agentManifest = "kubernetes/evictd.yaml"
	alertRules    = "helm/evictd/files/alerts.yaml"
	dashboardJSON = "helm/evictd/files/dashboard.json"
)

// daemonSet is the DaemonSet of deploy/kubernetes/evictd.yaml.
func daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	b, err := os.ReadFile(agentManifest)
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw map[string]any
		if err := d.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if raw["kind"] != "DaemonSet" {
			continue
		}
		j, _ := json.Marshal(raw)
		var ds appsv1.DaemonSet
		if err := sigsyaml.UnmarshalStrict(j, &ds); err != nil {
			t.Fatalf("%s: the DaemonSet: %v", agentManifest, err)
		}
		return &ds
	}
	t.Fatalf("%s has no DaemonSet", agentManifest)
	return nil
}

// The DaemonSet as operators expect a node agent's: the runtime's default
// seccomp filter, Linux nodes only, startup and readiness on /readyz and
// liveness on /healthz, the recommended labels, a memory request that fits
// the RSS measured on the real node (docs/benchmarks-node.md: 51.5 MiB with
// 110 pods) and a limit above it, and the metrics port declared.
func TestDaemonSetHygiene(t *testing.T) {
	ds := daemonSet(t)
	pod := ds.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile %+v, want RuntimeDefault", pod.SecurityContext)
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want kubernetes.io/os: linux", pod.NodeSelector)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	for name, p := range map[string]struct {
		probe *v1.Probe
		path  string
	}{"startup": {c.StartupProbe, "/readyz"}, "readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("%s probe %+v, want GET %s on the node's loopback", name, p.probe, p.path)
		}
	}
	measured := resource.MustParse("51.5Mi")
	req, lim := c.Resources.Requests[v1.ResourceMemory], c.Resources.Limits[v1.ResourceMemory]
	if req.Cmp(measured) < 0 || lim.Cmp(req) <= 0 {
		t.Errorf("memory request %s, limit %s: want a request of at least the measured %s and a limit above it", req.String(), lim.String(), measured.String())
	}
	for _, obj := range []map[string]string{ds.Labels, ds.Spec.Template.Labels} {
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by"} {
			if obj[k] == "" {
				t.Errorf("label %s missing from %v", k, obj)
			}
		}
	}
	for k := range ds.Spec.Selector.MatchLabels {
		if k == "app.kubernetes.io/version" {
			t.Errorf("the selector has the version label: a DaemonSet's selector cannot change in an upgrade")
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9848 {
		t.Errorf("ports %+v, want metrics 9848", c.Ports)
	}
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--secure-metrics-addr=[$(HOST_IP)]:9848") || !strings.Contains(args, "--metrics-addr=127.0.0.1:9847") {
		t.Errorf("args %q: want the plain endpoint on loopback and the secure one on the node's IP", args)
	}
}

// metricRef matches the metric names in a PromQL expression: an identifier
// followed by a selector or a range.
var metricRef = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]`)

// queried returns the metric names in exprs (without the histogram's
// _bucket suffix).
func queried(exprs []string) []string {
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricRef.FindAllStringSubmatch(e, -1) {
			seen[strings.TrimSuffix(m[1], "_bucket")] = true
		}
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// exported is every metric family name evictd registers (Kubernetes mode's
// too; labelled families before their first series, from their
// descriptions), and up, which Prometheus adds to each target.
func exported(t *testing.T) map[string]bool {
	m := agent.NewMetrics()
	m.KubeletEvictionsObserved()
	ch := make(chan *prometheus.Desc, 1000)
	m.Registry.Describe(ch)
	close(ch)
	names := map[string]bool{"up": true}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			names[s[1]] = true
		}
	}
	if !names["evictd_build_info"] {
		t.Fatalf("no evictd_build_info among %d metrics", len(names))
	}
	return names
}

// Every metric an alert rule or a dashboard panel queries is one evictd
// exports: a rename breaks this test, not an operator's alert.
func TestQueriesUseExportedMetrics(t *testing.T) {
	names := exported(t)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var ruleExprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			ruleExprs = append(ruleExprs, r.Expr)
		}
	}
	exprs := DashboardExprs(t)
	for what, es := range map[string][]string{alertRules: ruleExprs, dashboardJSON: exprs} {
		if len(es) == 0 {
			t.Fatalf("%s: no queries", what)
		}
		for _, m := range queried(es) {
			if !names[m] {
				t.Errorf("%s queries %s, which evictd does not export", what, m)
			}
		}
	}
}

// DashboardExprs returns every panel's queries in the dashboard.
func DashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardJSON)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}
