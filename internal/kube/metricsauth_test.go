package kube

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/kubeclient"
)

// TestRealSecureMetrics: the metrics endpoint a Prometheus outside the node
// scrapes answers only a token the API server authenticates whose user may
// get /metrics, with the shipped RBAC's identity doing the reviews (its
// ClusterRole must allow TokenReviews and SubjectAccessReviews), over TLS
// with a self-signed certificate.
func TestRealSecureMetrics(t *testing.T) {
	prom := kubetest.User{Token: "prometheus-token", Name: "prometheus", Groups: []string{"system:authenticated"}}
	nobody := kubetest.User{Token: "nobody-token", Name: "nobody", Groups: []string{"system:authenticated"}}
	srv := kubetest.Start(t, kubetest.ServiceAccountUser(saToken, deployNamespace, deploySA), prom, nobody)
	installDeploy(t, srv)
	ctx := context.Background()
	// What an operator does for a Prometheus that is not kube-prometheus'
	// (whose role already allows get /metrics): bind it to the shipped role.
	if _, err := srv.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-evictd"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "evictd-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: prom.Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := kubeclient.New(srv.ConfigFor(saToken))
	if err != nil {
		t.Fatal(err)
	}
	auth := &MetricsAuth{Client: sa, Path: "/metrics"}
	mux := http.NewServeMux()
	mux.Handle("/metrics", auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "evictd_build_info 1\n") })))
	s, err := ServeSecure("127.0.0.1:0", mux, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+s.Addr()+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		who, token string
		code       int
		body       string
	}{
		{"no token", "", http.StatusUnauthorized, "bearer token is required"},
		{"an unknown token", "not-a-token", http.StatusUnauthorized, "Unauthorized"},
		{"a user without the role", nobody.Token, http.StatusForbidden, `user "nobody" may not get /metrics`},
		{"Prometheus", prom.Token, http.StatusOK, "evictd_build_info 1"},
		{"Prometheus again (cached)", prom.Token, http.StatusOK, "evictd_build_info 1"},
	} {
		code, body := get(c.token)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.who, code, body, c.code, c.body)
		}
	}
	// Plain HTTP is refused: the endpoint is TLS only.
	if resp, err := http.Get("http://" + s.Addr() + "/metrics"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200")
		}
		resp.Body.Close()
	}
	// A decision is cached: with the API server stopped, Prometheus is still
	// served (within the TTL), and a new token is refused with 503, not let
	// through.
	srv.StopAPIServer()
	if code, _ := get(prom.Token); code != http.StatusOK {
		t.Errorf("Prometheus during an API server outage (cached): %d", code)
	}
	if code, _ := get("another-token"); code != http.StatusServiceUnavailable {
		t.Errorf("a new token during an API server outage: %d, want 503", code)
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "Bearer ": "", "": ""} {
		got, ok := bearer(h)
		if got != want && ok || ok != (want != "") {
			t.Errorf("bearer(%q) = %q, %v; want %q", h, got, ok, want)
		}
	}
}
