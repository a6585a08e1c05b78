package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/kubeclient"
)

// The metrics endpoint a Prometheus outside the node scrapes
// (--secure-metrics-addr) authenticates and authorizes each request with the
// API server, as the kubelet does for its own /metrics and as kube-prometheus
// puts kube-rbac-proxy in front of node-exporter: the bearer token is checked
// with a TokenReview, then the token's user is asked a SubjectAccessReview
// for "get" on the non-resource URL /metrics. Any Prometheus whose
// ServiceAccount may get /metrics (kube-prometheus' prometheus-k8s role
// may; the chart ships evictd-metrics-reader) reads it; nobody else on the
// network does. It is built in rather than a proxy beside evictd because a
// second image in the DaemonSet is a second thing to build, pull and patch on
// every node; kubebuilder dropped kube-rbac-proxy from its scaffolding for
// controller-runtime's built-in equivalent for that reason.
//
// Decisions are cached for the kubelet's webhook defaults (authentication
// 2 min, allowed 5 min, denied 30 s), so a scrape every 30 s costs the API
// server a review every few minutes, and scrapes go on through a short API
// server outage.
const (
	authnTTL      = 2 * time.Minute
	authzAllowTTL = 5 * time.Minute
	authzDenyTTL  = 30 * time.Second
	// authCacheMax bounds each cache (distinct tokens and users).
	authCacheMax = 256
	// authTimeout bounds a review: a scrape times out after 10 s by default.
	authTimeout = 5 * time.Second
)

// MetricsAuth guards a handler with the API server's authentication and
// authorization of bearer tokens.
type MetricsAuth struct {
	Client *kubeclient.Client
	// Path is the non-resource URL authorized (the request's own path when
	// empty).
	Path string
	Log  *slog.Logger
	Now  func() time.Time // nil: time.Now

	authn ttlCache[[sha256.Size]byte, authnEntry]
	authz ttlCache[string, authzEntry]
}

type authnEntry struct {
	user authnv1.UserInfo
	ok   bool
}

type authzEntry struct {
	allowed bool
	reason  string
}

// ttlCache holds decisions until they expire, at most authCacheMax of them.
type ttlCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func (c *ttlCache[K, V]) get(k K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put keeps v until expires; a full cache is emptied first, which costs
// only new reviews.
func (c *ttlCache[K, V]) put(k K, v V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= authCacheMax {
		c.m = map[K]ttlEntry[V]{}
	}
	c.m[k] = ttlEntry[V]{v, expires}
}

func (m *MetricsAuth) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Wrap returns h behind authentication and authorization: 401 without a
// valid bearer token, 403 when its user may not get the path, 503 when the
// API server cannot be asked.
func (m *MetricsAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
		defer cancel()
		user, ok, err := m.authenticate(ctx, token)
		if err != nil {
			m.log().Warn("metrics: cannot review a token with the API server", "err", err)
			http.Error(w, "cannot authenticate now: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		path := m.Path
		if path == "" {
			path = r.URL.Path
		}
		allowed, reason, err := m.authorize(ctx, user, path)
		if err != nil {
			m.log().Warn("metrics: cannot authorize with the API server", "err", err)
			http.Error(w, "cannot authorize now: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Forbidden: user %q may not get %s", user.Username, path)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (m *MetricsAuth) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.Default()
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// authenticate reviews token (TokenReview), through the cache.
func (m *MetricsAuth) authenticate(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := m.now()
	if e, ok := m.authn.get(key, now); ok {
		return e.user, e.ok, nil
	}
	r, err := m.Client.CreateTokenReview(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}})
	if err != nil {
		return authnv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	e := authnEntry{user: r.Status.User, ok: r.Status.Authenticated && r.Status.Error == ""}
	m.authn.put(key, e, now.Add(authnTTL))
	return e.user, e.ok, nil
}

// authorize asks whether user may get path (SubjectAccessReview), through
// the cache.
func (m *MetricsAuth) authorize(ctx context.Context, user authnv1.UserInfo, path string) (bool, string, error) {
	key := strings.Join([]string{user.Username, user.UID, strings.Join(user.Groups, ","), fmt.Sprint(user.Extra), path}, "\x00")
	now := m.now()
	if e, ok := m.authz.get(key, now); ok {
		return e.allowed, e.reason, nil
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	r, err := m.Client.CreateSubjectAccessReview(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
	}})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	e := authzEntry{allowed: r.Status.Allowed && !r.Status.Denied, reason: r.Status.Reason}
	ttl := authzDenyTTL
	if e.allowed {
		ttl = authzAllowTTL
	}
	m.authz.put(key, e, now.Add(ttl))
	return e.allowed, e.reason, nil
}

// ServeSecure serves h with TLS on addr: the certificate and key from the
// files when given (certFile and keyFile both, or neither), otherwise a
// self-signed certificate made at start for the address's host, as the
// kubelet and kube-rbac-proxy do without one (Prometheus then scrapes with
// insecure_skip_verify; the token, not the certificate, is what keeps others
// out).
// The server has the limits of the loopback one (agent.ServeTLS).
func ServeSecure(addr string, h http.Handler, certFile, keyFile string) (*agent.Server, error) {
	var cert tls.Certificate
	var err error
	switch {
	case certFile != "" && keyFile != "":
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file %s, --tls-private-key-file %s: %w", certFile, keyFile, err)
		}
	case certFile != "" || keyFile != "":
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	default:
		host, _, _ := net.SplitHostPort(addr)
		if cert, err = selfSigned(host); err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return agent.ServeTLS(ln, h, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}), nil
}

// selfSignedValidity is a self-signed certificate's lifetime; it is made
// anew at every start.
const selfSignedValidity = 365 * 24 * time.Hour

func selfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	name, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "evictd@" + name},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(selfSignedValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
	}
	if name != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, name)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
