package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// holdingProxy is a loopback proxy in front of the real API server that
// holds the writes which follow an eviction (Event creations, pod status
// patches: the DisruptionTarget condition) until the test releases them,
// and notes what the API server answered to each eviction and how many
// held writes were waiting then, their clients still waiting for them.
type holdingProxy struct {
	*httptest.Server
	rp      *httputil.ReverseProxy
	release chan struct{}
	once    sync.Once

	mu        sync.Mutex
	held      int      // writes at the gate now
	givenUp   []string // held writes whose client went away before the release
	evictions []string // "<pod> <status> held=<n>", in order
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{rp: httputil.NewSingleHostReverseProxy(u), release: make(chan struct{})}
	// The test server's certificate is self-signed; the watches stream.
	p.rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	p.rp.FlushInterval = -1
	p.Server = httptest.NewUnstartedServer(p)
	p.StartTLS()
	t.Cleanup(func() { p.Release(); p.Close() })
	return p
}

// Release lets the held writes through, and every later one.
func (p *holdingProxy) Release() { p.once.Do(func() { close(p.release) }) }

func (p *holdingProxy) Held() int { p.mu.Lock(); defer p.mu.Unlock(); return p.held }

func (p *holdingProxy) record() (evictions, givenUp []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.evictions...), append([]string(nil), p.givenUp...)
}

// heldWrite: an Event's creation or a pod's status patch.
func heldWrite(r *http.Request) bool {
	return (r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events")) ||
		(r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status"))
}

func (p *holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if heldWrite(r) {
		// Read the body first: only then does the server watch the
		// connection, and cancel r's context when the client goes away.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.held++
		p.mu.Unlock()
		select {
		case <-p.release:
		case <-r.Context().Done():
		}
		p.mu.Lock()
		p.held--
		if r.Context().Err() != nil {
			p.givenUp = append(p.givenUp, r.Method+" "+r.URL.Path)
		}
		p.mu.Unlock()
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/eviction") {
		p.rp.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	p.rp.ServeHTTP(sw, r)
	pod := strings.TrimSuffix(r.URL.Path[strings.LastIndex(strings.TrimSuffix(r.URL.Path, "/eviction"), "/")+1:], "/eviction")
	p.mu.Lock()
	p.evictions = append(p.evictions, fmt.Sprintf("%s %d held=%d", pod, sw.code, p.held))
	p.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// TestRealSlowAPIServerDelaysNoEviction: with an API server that takes the
// writes following an eviction (its Events, its DisruptionTarget
// condition) only when the test lets it, evictd wired as `evictd run
// --kubernetes` evicts one pod and then, when pressure comes back, the
// next one: the API server accepts the second eviction while the first
// one's writes are still held and their client still waits for them (a
// write made inside the synchronize would hold the loop until it gave up).
// Released, every Event arrives with the kubelet's content. Order, not
// time, is asserted: the held writes wait for the release however slow the
// machine is.
func TestRealSlowAPIServerDelaysNoEviction(t *testing.T) {
	s := setupNode(t)
	srv, ns := s.srv, s.ns
	proxy := newHoldingProxy(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := s.options()
	o.Rest.Host = proxy.URL
	// The held writes wait for the release, not for a timeout: a write
	// given up early would prove nothing about the order.
	o.RecordTimeout = 10 * time.Minute
	n, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	deleting := func(name string) bool {
		p, err := srv.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil
	}
	waitUntil(t, "evictd to evict hog", func() bool { return deleting("hog") })
	waitUntil(t, "hog's condition and Events to be held", func() bool { return proxy.Held() >= 1 })
	// The kubelet's part: hog's processes stop and its object goes.
	_ = s.hogProc.Cmd.Process.Kill()
	_ = s.pause.Cmd.Process.Kill()
	zero := int64(0)
	if err := srv.Client.CoreV1().Pods(ns).Delete(ctx, "hog", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Pressure again: small grows by 40 MiB, available ≈ 256 − 144 MiB < 120 MiB.
	cgrouptest.StartHog(t, 40, s.smallDir)
	waitUntil(t, "evictd to evict small", func() bool { return deleting("small") })

	evictions, givenUp := proxy.record()
	t.Logf("evictions as the API server answered them: %q; held writes given up: %q", evictions, givenUp)
	if len(evictions) != 2 || !strings.HasPrefix(evictions[0], "hog 201 ") || !strings.HasPrefix(evictions[1], "small 201 ") {
		t.Fatalf("evictions %q, want hog's then small's, both accepted (201)", evictions)
	}
	if strings.HasSuffix(evictions[1], " held=0") {
		t.Errorf("small's eviction was accepted with none of hog's writes waiting (%q): the loop waited for them", evictions[1])
	}
	if len(givenUp) > 0 {
		t.Errorf("held writes given up by their client before small's eviction: %q (a write made on the loop holds it until its timeout ends the write)", givenUp)
	}

	proxy.Release()
	evs := func(namespace, field, value string) []v1.Event {
		l, err := srv.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(field, value).String()})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	waitUntil(t, "the held Events, once released", func() bool {
		return len(evs(ns, "involvedObject.name", "hog")) > 0 && len(evs(ns, "involvedObject.name", "small")) > 0 &&
			len(evs("default", "involvedObject.name", "node-a")) > 0
	})
	for _, name := range []string{"hog", "small"} {
		e := evs(ns, "involvedObject.name", name)[0]
		if e.Reason != "Evicted" || e.Type != v1.EventTypeWarning || e.Source.Component != Component || e.Source.Host != "node-a" ||
			!strings.HasPrefix(e.Message, "The node was low on resource: memory. Threshold quantity: 120Mi, available: ") ||
			e.Annotations["starved_resource"] != "memory" {
			t.Errorf("%s's event: %s %s %q %+v %v", name, e.Type, e.Reason, e.Message, e.Source, e.Annotations)
		}
	}
	ne := evs("default", "involvedObject.name", "node-a")[0]
	if ne.Reason != "EvictionThresholdMet" || ne.Message != "Attempting to reclaim memory" || ne.InvolvedObject.Kind != "Node" ||
		ne.Source.Component != Component {
		t.Errorf("node event %s %q %+v %+v", ne.Reason, ne.Message, ne.InvolvedObject, ne.Source)
	}
	// small is still there (its processes still run): its condition, held
	// until now, is the kubelet's.
	waitUntil(t, "small's DisruptionTarget condition", func() bool {
		p, err := srv.Client.CoreV1().Pods(ns).Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.DisruptionTarget {
				return c.Reason == v1.PodReasonTerminationByKubelet
			}
		}
		return false
	})
}
