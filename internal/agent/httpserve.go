package agent

import (
	"crypto/tls"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics and health server is reachable by any local process (and by
// more with --metrics-addr on a routable address); it must never take from
// the agent what the agent needs to evict: descriptors above all (with a
// descriptor limit of 256, 300 idle keep-alive connections once made
// reading /proc/meminfo fail with EMFILE and /healthz unreachable), and
// goroutines and memory. So every connection has a deadline, headers are
// small, and the server holds at most maxConns connections.
const (
	// Headers must come within this (slowloris); a scrape or probe sends
	// them at once.
	httpReadHeaderTimeout = 5 * time.Second
	// A whole request, and a whole response (a /metrics scrape of a
	// 110-pod node is ~100 KB, written in milliseconds).
	httpReadTimeout  = 10 * time.Second
	httpWriteTimeout = 10 * time.Second
	// A keep-alive connection idle longer is closed; Prometheus reconnects
	// at its next scrape.
	httpIdleTimeout = 30 * time.Second
	// Request headers beyond this are refused (431); a probe's are ~200 bytes.
	httpMaxHeaderBytes = 8 << 10
	// maxConns bounds the connections held at once: a Prometheus or two, a
	// liveness probe, a curl. At the cap a new connection closes the
	// longest-idle one, or else the oldest that has not sent a whole
	// request within newConnGrace, so idle or slow connections held open
	// cannot lock a probe out. When none can go (every connection is in a
	// request or just came), the new one waits: the kernel's listen queue
	// holds the others, without a descriptor of evictd's.
	maxConns = 32
	// newConnGrace is how long a new connection is safe from being closed
	// for a newer one: time for its request to be read even when a flood
	// keeps the accept loop busy and the machine loaded (a probe sends it
	// at once), far shorter than the header timeout.
	newConnGrace = 250 * time.Millisecond
	// connWait is how often a new connection at the cap looks for a slot.
	connWait = 10 * time.Millisecond
)

func newHTTPServer(h http.Handler, lim *connLimiter) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ConnState:         lim.setState,
	}
}

// connLimiter is a listener that holds at most max connections.
type connLimiter struct {
	net.Listener
	max   int
	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

type limitedConn struct {
	net.Conn
	l     *connLimiter
	once  sync.Once
	state http.ConnState // guarded by l.mu
	since time.Time      // when it entered state
}

// ServeTLS serves h over TLS on ln with the limits of Serve's server (the
// connection cap, deadlines, header size): Kubernetes mode's authenticated
// metrics endpoint, which listens on the node's IP.
func ServeTLS(ln net.Listener, h http.Handler, cfg *tls.Config) *Server {
	lim := capConns(ln, maxConns)
	s := &Server{srv: newHTTPServer(h, lim), ln: lim}
	go s.srv.Serve(tls.NewListener(lim, cfg))
	return s
}

func capConns(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}}
}

// Accept implements net.Listener.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		// Let the connection accepted last read its request first: under
		// a flood accept4 never blocks, and the accept loop would run on.
		runtime.Gosched()
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
		for {
			victim, ok := l.admit(lc)
			if ok {
				if victim != nil {
					victim.Conn.Close() // the server sees the read fail and lets it go
				}
				return lc, nil
			}
			time.Sleep(connWait)
		}
	}
}

// admit adds c, choosing a connection to close when at the cap; ok=false
// when none can go.
func (l *connLimiter) admit(c *limitedConn) (victim *limitedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		now := time.Now()
		for o := range l.conns {
			if o.state == http.StateActive || o.state == http.StateNew && now.Sub(o.since) < newConnGrace {
				continue
			}
			if closeFirst(o, victim) {
				victim = o
			}
		}
		if victim == nil {
			return nil, false
		}
		delete(l.conns, victim)
	}
	l.conns[c] = struct{}{}
	return victim, true
}

// closeFirst reports whether o goes before v at the cap: idle ones before
// those still to send a request; within each, the oldest.
func closeFirst(o, v *limitedConn) bool {
	if v == nil {
		return true
	}
	if oi, vi := o.state == http.StateIdle, v.state == http.StateIdle; oi != vi {
		return oi
	}
	return o.since.Before(v.since)
}

func (l *connLimiter) setState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok { // ServeTLS: the limited connection under it
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, lc)
	default:
		lc.state, lc.since = st, time.Now()
	}
}

// open is how many connections the server holds (tests).
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close implements net.Conn.
func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// Outputs whose queues count drops (evictd_output_dropped_total{output}).
const (
	OutputDecisionLog = "decision-log" // records
	OutputLog         = "log"          // log lines
	OutputEvents      = "events"       // Kubernetes Events
	OutputConditions  = "conditions"   // the DisruptionTarget conditions of Kubernetes mode
)

func newOutputDropped() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "output_dropped_total",
		Help: "Records, log lines, Events and pod conditions dropped because their output (a disk, a pipe, the API server) did not take them in time, by output."}, []string{"output"})
	for _, o := range []string{OutputDecisionLog, OutputLog, OutputEvents, OutputConditions} {
		c.WithLabelValues(o)
	}
	return c
}
