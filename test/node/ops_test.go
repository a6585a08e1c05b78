package node_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/version"
	"github.com/evictd/evictd/test/node"
)

// The PodSecurity level evictd's pod needs (docs/install.md), and what the
// level below it refuses: the real apiserver's PodSecurity admission is the
// judge.
const (
	podSecurityLevel = "privileged"
	// What "baseline" refuses in evictd's pod, as the apiserver words it:
	// all of it, so nothing else (capabilities, privilege) is above it.
	baselineRefuses = `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), ` +
		`hostPath volumes (volumes "cgroup", "kubelet-config", "state"), hostPort (container "evictd" uses hostPort 9848), ` +
		`probe or lifecycle host (container "evictd" uses probe or lifecycle host "127.0.0.1")`
)

// toolBin is a binary of scripts/tool-bins.sh: $env (the tier sets it) or
// its place in the cache. The node tier builds it; missing, the test fails.
func toolBin(t *testing.T, env, mod, name string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		p = filepath.Join(root, ".cache", "tools", mod, name)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (scripts/tool-bins.sh %s builds it; the node tier does)", name, err, name)
	}
	return p
}

// helmCmd runs the chart's helm against the node as admin, with its cache
// and configuration in dir.
func helmCmd(t *testing.T, c *node.Cluster, helm, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir+"/cache", "HELM_CONFIG_HOME="+dir+"/config", "HELM_DATA_HOME="+dir+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestHelmInstallAndPrometheus: evictd installed as a user installs it with
// Helm — the chart of deploy/helm/evictd, the image make image built —
// into a namespace whose PodSecurity admission enforces "privileged", the
// level the docs state, while "baseline" refuses the same pod; the pod
// passes its startup and readiness probes (/readyz), runs the image's
// version, and a real Prometheus (built from the module proxy, on
// loopback) discovers it through the API server as the chart's monitor
// does, scrapes its authenticated endpoint with a ServiceAccount token,
// loads the shipped alert rules (none firing on a healthy node), and gets
// data for every query of every dashboard panel. helm uninstall removes
// everything it installed.
func TestHelmInstallAndPrometheus(t *testing.T) {
	c := node.Get(t)
	helm := toolBin(t, "EVICTD_HELM", "helm", "helm")
	promBin := toolBin(t, "EVICTD_PROMETHEUS", "prometheus", "prometheus")
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	chart := filepath.Join(repo, "deploy", "helm", "evictd")
	hdir := t.TempDir()

	const ns = "evictd-helm"
	mkNamespace(t, c, ns, podSecurityLevel)
	host := strings.TrimPrefix(c.Config.Host, "https://")
	addr, port, _ := strings.Cut(host, ":")
	helmCmd(t, c, helm, hdir, "install", "evictd", chart, "--namespace", ns, "--wait", "--timeout", "3m",
		"--set", "image.repository=evictd.local/evictd", "--set", "image.tag=node",
		"--set", "kubelet.config="+filepath.Join(c.Dir, "kubelet.yaml"),
		"--set", "extraEnv[0].name=KUBERNETES_SERVICE_HOST", "--set", "extraEnv[0].value="+addr,
		"--set", "extraEnv[1].name=KUBERNETES_SERVICE_PORT", "--set-string", "extraEnv[1].value="+port)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_ = exec.Command(helm, "--kubeconfig", c.Kubeconfig, "uninstall", "evictd", "--namespace", ns, "--wait").Run()
		}
	})

	// Ready: the startup and readiness probes (/readyz) passed.
	var pod corev1.Pod
	c.WaitFor(t, 120*time.Second, "evictd's pod Ready", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd,app.kubernetes.io/instance=evictd"})
		if err != nil || len(l.Items) != 1 {
			return false, err
		}
		pod = l.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if pod.Labels["app.kubernetes.io/managed-by"] != "Helm" || pod.Labels["app.kubernetes.io/version"] != "node" {
		t.Errorf("pod labels %v", pod.Labels)
	}
	// The image make image built: the pod runs its amd64 image (the
	// runtime reports the image ID, the platform config's digest).
	if id, want := pod.Status.ContainerStatuses[0].ImageID, imageID(t, c); id != want {
		t.Errorf("the pod runs image %s, make image built %s", id, want)
	}

	// PodSecurity: the same pod in a namespace enforcing baseline is refused,
	// for exactly the host access it needs.
	const nsBaseline = "evictd-baseline"
	mkNamespace(t, c, nsBaseline, "baseline")
	if _, err := c.Client.CoreV1().ServiceAccounts(nsBaseline).Create(node.Ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.ServiceAccountName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evictd-podsecurity", Namespace: nsBaseline}, Spec: pod.Spec}
	probe.Spec.NodeName = ""
	_, err := c.Client.CoreV1().Pods(nsBaseline).Create(node.Ctx(t), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), baselineRefuses) {
		t.Errorf("evictd's pod under baseline: %v; want it refused for %s", err, baselineRefuses)
	} else {
		t.Logf("baseline refuses evictd's pod: %v", err)
	}

	// The secure endpoint refuses a scrape without a token.
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := insecure.Get("https://127.0.0.1:9848/metrics"); err != nil {
		t.Errorf("secure metrics endpoint: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a scrape without a token: %d, want 401", resp.StatusCode)
		}
	}

	prom := startPrometheus(t, c, promBin, ns, prometheusToken(t, c))
	c.WaitFor(t, 90*time.Second, "Prometheus scraping evictd", func(ctx context.Context) (bool, error) {
		r, err := prom.query(ctx, `up{job="evictd"} == 1`)
		return err == nil && len(r) == 1, nil
	})
	// Rate windows of the dashboard ($__rate_interval, 30 s here) need
	// samples across a few synchronizes (every 10 s).
	time.Sleep(35 * time.Second)

	v := strings.Fields(strings.TrimSpace(run(t, filepath.Join(c.Images, "bin", "evictd"), "--version")))[1]
	if r, err := prom.query(node.Ctx(t), fmt.Sprintf(`evictd_build_info{job="evictd", version=%q, kubelet_version=%q, node=%q}`, v, version.Kubelet, c.Node)); err != nil || len(r) != 1 {
		t.Errorf("evictd_build_info of version %s, kubelet %s, node %s: %v %v", v, version.Kubelet, c.Node, r, err)
	}
	exprs := dashboardQueries(t, repo)
	empty := 0
	for _, q := range exprs {
		e := strings.NewReplacer("$__rate_interval", "30s", "$job", "evictd", "$instance", ".+").Replace(q)
		r, err := prom.query(node.Ctx(t), e)
		if err != nil || len(r) == 0 {
			empty++
			t.Errorf("dashboard query %s: %d series, %v", e, len(r), err)
		}
	}
	if empty == 0 {
		t.Logf("%d dashboard queries, each returned data", len(exprs))
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, State, LastError string
				}
			}
		}
	}
	if err := prom.get(node.Ctx(t), "/api/v1/rules", nil, &rules); err != nil {
		t.Fatal(err)
	}
	// This machine's kernel is shared: another test's memory hog may be
	// OOM-killed in its own cgroup meanwhile, which /proc/vmstat counts
	// node-wide and evictd reports (Kubernetes mode counts kills outside
	// the pods too). Then EvictdKernelOOMKills rightly fires; it must not
	// fire without such a kill.
	oom, err := prom.query(node.Ctx(t), `increase(evictd_kernel_oom_kills_total{job="evictd"}[10m]) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			n++
			switch {
			case r.Health != "ok":
				t.Errorf("alert %s: health %s (%s)", r.Name, r.Health, r.LastError)
			case r.Name == "EvictdKernelOOMKills" && r.State != "inactive":
				if len(oom) == 0 {
					t.Errorf("alert %s %s without a kernel OOM kill", r.Name, r.State)
				} else {
					t.Logf("alert %s %s: the kernel OOM-killed a process on this machine meanwhile: %s", r.Name, r.State, oom)
				}
			case r.State != "inactive":
				t.Errorf("alert %s on a healthy node: %s", r.Name, r.State)
			}
		}
	}
	if n != 7 {
		t.Errorf("Prometheus loaded %d alert rules, want the 7 shipped", n)
	}

	// Uninstall (docs/install.md): nothing of the release is left.
	helmCmd(t, c, helm, hdir, "uninstall", "evictd", "--namespace", ns, "--wait", "--timeout", "2m")
	uninstalled = true
	ctx := node.Ctx(t)
	for what, get := range map[string]func() error{
		"DaemonSet": func() error {
			_, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, "evictd", metav1.GetOptions{})
			return err
		},
		"ClusterRole": func() error {
			_, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "evictd", metav1.GetOptions{})
			return err
		},
		"ClusterRoleBinding": func() error {
			_, err := c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "evictd", metav1.GetOptions{})
			return err
		},
		"metrics reader": func() error {
			_, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "evictd-metrics-reader", metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func() error {
			_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "evictd", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, the %s: %v", what, err)
		}
	}
	c.WaitFor(t, 60*time.Second, "evictd's pod gone", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd"})
		return err == nil && len(l.Items) == 0, err
	})
}

// mkNamespace creates a namespace whose PodSecurity admission enforces
// level, and deletes it when the test ends.
func mkNamespace(t *testing.T, c *node.Cluster, name, level string) {
	t.Helper()
	_, err := c.Client.CoreV1().Namespaces().Create(node.Ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         level,
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		c.WaitFor(t, 90*time.Second, "namespace "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// imageID is the ID of the amd64 image of the evictd image the node tier
// imported (make image's, built by scripts/image.sh), as the container
// runtime reports it for a running container.
func imageID(t *testing.T, c *node.Cluster) string {
	t.Helper()
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	return strings.TrimSpace(run(t, filepath.Join(repo, ".cache", "image", "image-tool"), "digest", "-config", "linux/amd64", filepath.Join(c.Images, "evictd.tar")))
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// prometheusToken is a token of a ServiceAccount bound to the chart's
// evictd-metrics-reader role, as an operator binds their Prometheus.
func prometheusToken(t *testing.T, c *node.Cluster) string {
	t.Helper()
	ctx := node.Ctx(t)
	const ns, sa = "evictd-prometheus", "prometheus"
	mkNamespace(t, c, ns, "restricted")
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "evictd-prometheus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "evictd-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{})
	})
	secs := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// prometheus is a Prometheus server the test started.
type prometheus struct {
	url    string
	client *http.Client
}

// startPrometheus starts Prometheus on loopback, in the run's cgroup (the
// no-traffic guard counts its packets), scraping every 2 s the pods of
// namespace ns that the chart's ServiceMonitor selects, found through the
// API server (Kubernetes pod discovery, as a PodMonitor does), over HTTPS
// with token, with the shipped alert rules; it is stopped when the test
// ends.
func startPrometheus(t *testing.T, c *node.Cluster, bin, ns, token string) *prometheus {
	t.Helper()
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [%q]
scrape_configs:
  - job_name: evictd
    scheme: https
    authorization: {credentials_file: %q}
    tls_config: {insecure_skip_verify: true}
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %q
        namespaces: {names: [%s]}
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_name], regex: evictd, action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
      - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node}
`, filepath.Join(repo, "deploy", "helm", "evictd", "files", "alerts.yaml"), tokenFile, c.Kubeconfig, ns)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cg, err := os.Open(c.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		kubetest.Terminate(cmd.Process, done, 10*time.Second)
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("Prometheus's log:\n%s", b)
		}
	})
	p := &prometheus{url: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}}
	c.WaitFor(t, 60*time.Second, "Prometheus ready", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/-/ready", nil)
		resp, err := p.client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

func (p *prometheus) get(ctx context.Context, path string, q url.Values, into any) error {
	u := p.url + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, into)
}

// query runs an instant query and returns its series (or scalar) results.
func (p *prometheus) query(ctx context.Context, expr string) ([]json.RawMessage, error) {
	var r struct {
		Status string
		Data   struct {
			ResultType string
			Result     json.RawMessage
		}
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return nil, err
	}
	if r.Data.ResultType == "scalar" {
		return []json.RawMessage{r.Data.Result}, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return nil, err
	}
	return series, nil
}

// dashboardQueries is every panel query of the shipped dashboard.
func dashboardQueries(t *testing.T, repo string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "helm", "evictd", "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}
