// Package fleet is the cluster-wide view behind `evictd explain --cluster`
// (and `kubectl evictd`): for every node, or those a label selector picks,
// it reads the kubelet's Summary and running configuration and the node's
// pods through the API server with the caller's own credentials, runs the
// policy engine on them, and says which threshold is nearest, how fast the
// node approaches it, whom the kubelet would evict first and why, and
// whether an evictd agent runs there.
//
// Nodes are inspected concurrently (bounded), each under its own timeout; a
// node that cannot be read gets its error in its row and never fails the
// others.
//
// Where it reads from: the API server's node proxy
// (/api/v1/nodes/NODE/proxy/stats/summary and /configz). The API server
// refuses to proxy to a node whose kubelet address is not a global unicast
// IP — loopback or link-local, as on a single-node test cluster whose node
// is 127.0.0.1 — with "address not allowed" (kube-apiserver's node
// ResourceLocation, isProxyableHostname). For such a node, and only when the
// caller allows it (Direct), fleet asks the kubelet itself at the address
// and port the Node object publishes, with the same credentials, verifying
// the kubelet's serving certificate against the cluster's CA (or KubeletCA),
// never silently trusting it.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// Defaults of Options.
const (
	// DefaultConcurrency bounds the nodes read at once: each holds a few
	// API calls open; the API server's proxy, not evictd, is the cost.
	DefaultConcurrency = 8
	// DefaultTimeout bounds each call for one node (a Summary of a big node
	// takes well under a second; a kubelet that does not answer must not
	// hold its row longer than this).
	DefaultTimeout = 10 * time.Second
	// DefaultWindow is how long each node is sampled for its trend. The
	// kubelet refreshes the memory stats of its Summary about every 10 s
	// (cAdvisor housekeeping), so a shorter window mostly sees one value.
	DefaultWindow = 20 * time.Second
	// DefaultSamples is how many Summaries are taken across the window.
	DefaultSamples = 3
	// AgentLabel selects evictd's agent pods (deploy/kubernetes/).
	AgentLabel = "app.kubernetes.io/name=evictd"
)

// Direct says when to ask a kubelet directly instead of through the API
// server's node proxy.
type Direct string

const (
	// DirectAuto falls back to the kubelet when the proxy refuses the
	// node's address ("address not allowed": loopback or link-local).
	DirectAuto Direct = "auto"
	// DirectNever only uses the proxy.
	DirectNever Direct = "never"
	// DirectAlways skips the proxy.
	DirectAlways Direct = "always"
)

// ParseDirect reads a --kubelet-direct value.
func ParseDirect(s string) (Direct, error) {
	switch d := Direct(s); d {
	case DirectAuto, DirectNever, DirectAlways:
		return d, nil
	}
	return "", fmt.Errorf("%q: want auto, never or always", s)
}

// Options say what to inspect and how.
type Options struct {
	Client *kubeclient.Client
	// Rest is the caller's configuration: its credentials are used for the
	// direct kubelet calls.
	Rest *rest.Config
	// Selector is a label selector for the nodes ("": every node); Names,
	// when set, are the only nodes inspected.
	Selector string
	Names    []string
	// Flags are eviction flags laid over each kubelet's running
	// configuration (nil: none), as over a config file; Profile is evictd's
	// policy profile.
	Flags   *load.EvictionFlags
	Profile policy.Profile

	Concurrency int           // 0: DefaultConcurrency
	Timeout     time.Duration // per call; 0: DefaultTimeout
	Window      time.Duration // 0: DefaultWindow; negative: one sample, no trend
	Samples     int           // 0: DefaultSamples

	Direct Direct // "": DirectAuto
	// KubeletCA verifies kubelets' serving certificates on direct calls
	// ("": the cluster CA of Rest); KubeletInsecure skips the check.
	KubeletCA       string
	KubeletInsecure bool

	// Sleep waits between samples (nil: a timer honouring ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
}

// Report is the cluster's view, rows nearest to eviction first.
type Report struct {
	Time    time.Time `json:"time"`
	Profile string    `json:"profile"`
	Window  string    `json:"window"`
	Nodes   []Row     `json:"nodes"`
}

// Row is one node.
type Row struct {
	Node string `json:"node"`
	// Ready is the node's Ready condition status (True, False, Unknown).
	Ready string `json:"ready"`
	// Conditions are the node's pressure conditions that are True, from
	// the Node object (what the kubelet reported).
	Conditions []string `json:"conditions"`
	// Source says where the Summary and configuration were read ("api
	// server proxy", or "kubelet https://ADDR:PORT" with the reason).
	Source string `json:"source,omitempty"`
	// Config says where the thresholds came from.
	Config string `json:"config,omitempty"`
	// Nearest is the threshold with the least headroom left, relative to
	// its signal's capacity (nil when none could be resolved).
	Nearest *Nearest `json:"nearest,omitempty"`
	// Trend of the nearest threshold's signal over the window.
	Trend *Trend `json:"trend,omitempty"`
	// Thresholds are the thresholds in force (the kubelet's, from its
	// /configz, with the containerfs thresholds it derives).
	Thresholds []string `json:"thresholds,omitempty"`
	// Met lists the thresholds met now (grace periods ignored).
	Met []string `json:"met,omitempty"`
	// First is the pod that would go first, and why.
	First *Victim `json:"first,omitempty"`
	// Agent says whether an evictd agent pod runs on the node.
	Agent string `json:"agent"`
	// NodeMemory: the node's memory figures (the kubelet's count; the
	// kernel's MemAvailable is not in the Summary, so it is not known here).
	NodeMemory *policy.NodeMemory `json:"nodeMemory,omitempty"`
	// Error is why the node could not be read; the other fields hold what
	// was read before it.
	Error string `json:"error,omitempty"`
	// Notes say what else limited the answer (a sample that failed, stats
	// that did not change across the window).
	Notes []string `json:"notes,omitempty"`
}

// Nearest is one threshold and its headroom.
type Nearest struct {
	Threshold string `json:"threshold"`
	Signal    string `json:"signal"`
	Hard      bool   `json:"hard"`
	Quantity  string `json:"quantity"`
	Available string `json:"available"`
	// Margin is available − quantity (negative: met); MarginPercent the
	// same as a share of the signal's capacity.
	Margin        string  `json:"margin"`
	MarginPercent float64 `json:"marginPercent"`
	// Met: available is below the quantity now (grace period aside).
	Met    bool `json:"met"`
	margin int64
}

// Trend is the nearest signal's change over the window, from the stats'
// own timestamps.
type Trend struct {
	// PerSecond is the change of the available amount per second, in the
	// signal's unit (bytes, inodes or PIDs): negative when it runs out.
	PerSecond float64 `json:"perSecond"`
	// Over is the time between the first and last distinct stats.
	Over string `json:"over"`
	// CrossesIn is when the threshold is met at that rate ("" when the
	// signal is not falling or the threshold is already met).
	CrossesIn string `json:"crossesIn,omitempty"`
	crosses   time.Duration
}

// Victim is the pod the kubelet's ranking puts first.
type Victim struct {
	Pod    string `json:"pod"`
	Signal string `json:"signal"`
	// Now: a threshold is acted on now and this is the eviction; otherwise
	// it is the first of the ranking should the nearest threshold be met.
	Now bool   `json:"now"`
	Why string `json:"why"`
	// Message is the kubelet's eviction message when Now.
	Message string `json:"message,omitempty"`
}

// Inspect reads the nodes and returns the report.
func Inspect(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	nodes, err := o.nodes(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Time: o.Now(), Profile: o.Profile.String(), Window: o.window().String(), Nodes: make([]Row, len(nodes))}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				rep.Nodes[i] = Row{Node: nodes[i].Name, Error: ctx.Err().Error()}
				return
			}
			defer func() { <-sem }()
			rep.Nodes[i] = o.inspect(ctx, &nodes[i])
		}()
	}
	wg.Wait()
	sortRows(rep.Nodes)
	return rep, nil
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	if o.Direct == "" {
		o.Direct = DirectAuto
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return o
}

func (o Options) window() time.Duration {
	if o.Window < 0 || o.Samples < 2 {
		return 0
	}
	return o.Window
}

// nodes lists the Node objects to inspect.
func (o Options) nodes(ctx context.Context) ([]v1.Node, error) {
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if len(o.Names) > 0 {
		out := make([]v1.Node, 0, len(o.Names))
		for _, name := range o.Names {
			n, err := o.Client.GetNode(cctx, name)
			if err != nil {
				// A named node that cannot be read is its own row.
				out = append(out, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{errAnnotation: err.Error()}}})
				continue
			}
			out = append(out, *n)
		}
		return out, nil
	}
	list, err := o.Client.ListNodes(cctx, metav1.ListOptions{LabelSelector: o.Selector})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if len(list.Items) == 0 {
		if o.Selector != "" {
			return nil, fmt.Errorf("no node matches the selector %q", o.Selector)
		}
		return nil, errors.New("the cluster has no nodes")
	}
	return list.Items, nil
}

// errAnnotation carries a named node's lookup error into its row.
const errAnnotation = "evictd.io/fleet-error"

// inspect reads one node. Every call is bounded by o.Timeout; the samples
// are o.Window apart in total.
func (o Options) inspect(ctx context.Context, n *v1.Node) Row {
	row := Row{Node: n.Name, Ready: "Unknown", Conditions: []string{}, Agent: "unknown"}
	if e := n.Annotations[errAnnotation]; e != "" {
		row.Error = e
		return row
	}
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case v1.NodeReady:
			row.Ready = string(c.Status)
		case v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure:
			if c.Status == v1.ConditionTrue {
				row.Conditions = append(row.Conditions, string(c.Type))
			}
		}
	}
	sort.Strings(row.Conditions)

	pods, agent, err := o.pods(ctx, n.Name)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	row.Agent = agent

	k := &kubeletReader{o: o, node: n}
	kc, err := k.configz(ctx)
	if err != nil {
		row.Source = k.source()
		row.Error = "reading the kubelet's configuration (/configz): " + err.Error()
		return row
	}
	row.Source = k.source()
	if err := kc.ApplyFlags(o.Flags, ""); err != nil {
		row.Error = err.Error()
		return row
	}
	row.Config = kc.Describe()
	for _, w := range kc.Warnings {
		row.Notes = append(row.Notes, "the kubelet's configuration: "+w.Error()+" (accepted, as the kubelet accepts it)")
	}
	cfg, err := kc.Policy()
	if err != nil {
		row.Error = err.Error()
		return row
	}
	cfg.Profile = o.Profile
	var fs policy.Filesystems
	var samples []sample
	for i := 0; i < max(o.Samples, 1); i++ {
		if i > 0 {
			if o.window() == 0 {
				break
			}
			if err := o.Sleep(ctx, o.window()/time.Duration(o.Samples-1)); err != nil {
				row.Notes = append(row.Notes, "sampling stopped: "+err.Error())
				break
			}
		}
		s, err := k.summary(ctx)
		if err != nil {
			if i == 0 {
				row.Error = "reading the kubelet's Summary (/stats/summary): " + err.Error()
				return row
			}
			row.Notes = append(row.Notes, fmt.Sprintf("sample %d of %d failed: %v", i+1, o.Samples, err))
			continue
		}
		if i == 0 {
			fs = filesystemsOf(s)
		}
		samples = append(samples, sample{at: o.Now(), s: s})
	}
	eng, err := policy.NewEngine(cfg, fs)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	var d policy.Decision
	for _, sm := range samples {
		d = eng.Step(sm.at, policy.Input{Summary: sm.s, Pods: pods})
		if d.ReclaimPending {
			// Container and image GC (or memory.reclaim) are assumed to free
			// nothing, as explain assumes.
			d = eng.Reclaimed(sm.at, sm.s)
		}
	}
	last := samples[len(samples)-1].s
	row.NodeMemory = d.NodeMemory
	for _, th := range eng.Thresholds() {
		if th.Operator != "" {
			row.Thresholds = append(row.Thresholds, th.String())
		}
	}
	for _, m := range d.Met {
		row.Met = append(row.Met, m.Threshold.String())
	}
	if d.Error != "" {
		row.Notes = append(row.Notes, d.Error)
	}
	row.Nearest = nearest(eng.Resolve(last))
	if row.Nearest != nil {
		row.Trend = trend(eng, samples, row.Nearest)
		if row.Trend == nil && len(samples) > 1 {
			row.Notes = append(row.Notes, "the stats did not change across the window (the kubelet refreshes them about every 10 s): no trend")
		}
	}
	row.First = first(eng, d, last, pods, row.Nearest)
	return row
}

type sample struct {
	at time.Time
	s  *statsapi.Summary
}

// pods lists the node's active pods (admitted and not terminal) and tells
// whether an evictd agent pod runs among them.
func (o Options) pods(ctx context.Context, node string) ([]*v1.Pod, string, error) {
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", node),
		fields.OneTermNotEqualSelector("status.phase", string(v1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(v1.PodFailed)))
	list, err := o.Client.ListPods(cctx, metav1.NamespaceAll, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, "unknown", fmt.Errorf("listing the node's pods: %w", err)
	}
	pods := make([]*v1.Pod, 0, len(list.Items))
	agent := "none"
	for i := range list.Items {
		p := &list.Items[i]
		pods = append(pods, p)
		if p.Labels["app.kubernetes.io/name"] == "evictd" {
			state := string(p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
					state = "Ready"
				}
			}
			agent = "evictd " + p.Namespace + "/" + p.Name + " (" + state + ")"
		}
	}
	return pods, agent, nil
}

// nearest is the resolved threshold with the least headroom relative to its
// signal's capacity.
func nearest(resolved []policy.ResolvedThreshold) *Nearest {
	var best *Nearest
	bestRel := 0.0
	for _, r := range resolved {
		if r.Threshold.Operator == "" {
			continue // a derived threshold without a source never fires
		}
		avail := r.Observation.Available.Value()
		margin := avail - r.Quantity.Value()
		capacity := r.Observation.Capacity.Value()
		rel := float64(margin)
		if capacity > 0 {
			rel = float64(margin) / float64(capacity)
		}
		if best != nil && rel >= bestRel {
			continue
		}
		bestRel = rel
		best = &Nearest{Threshold: r.Threshold.String(), Signal: string(r.Threshold.Signal), Hard: r.Threshold.Hard(),
			Quantity: r.Quantity.String(), Available: r.Observation.Available.String(),
			Margin: quantityLike(margin, r.Threshold.Signal), MarginPercent: round1(100 * rel), Met: margin < 0, margin: margin}
	}
	return best
}

// trend is the nearest signal's rate of change between the first and last
// samples whose stats times differ.
func trend(eng *policy.Engine, samples []sample, n *Nearest) *Trend {
	type point struct {
		at    time.Time
		avail int64
	}
	var pts []point
	for _, sm := range samples {
		for _, r := range eng.Resolve(sm.s) {
			if string(r.Threshold.Signal) == n.Signal && r.Threshold.String() == n.Threshold {
				at := r.Observation.Time.Time
				if at.IsZero() {
					at = sm.at
				}
				pts = append(pts, point{at, r.Observation.Available.Value()})
				break
			}
		}
	}
	if len(pts) < 2 {
		return nil
	}
	a, b := pts[0], pts[len(pts)-1]
	dt := b.at.Sub(a.at)
	if dt <= 0 {
		return nil
	}
	t := &Trend{PerSecond: round1(float64(b.avail-a.avail) / dt.Seconds()), Over: dt.Round(time.Second).String()}
	if t.PerSecond < 0 && n.margin > 0 {
		t.crosses = time.Duration(float64(n.margin) / -t.PerSecond * float64(time.Second))
		t.CrossesIn = t.crosses.Round(time.Second).String()
	}
	return t
}

// first is the pod that goes first: the eviction of this synchronize when a
// threshold is acted on, otherwise the head of the ranking for the nearest
// threshold's signal.
func first(eng *policy.Engine, d policy.Decision, s *statsapi.Summary, pods []*v1.Pod, n *Nearest) *Victim {
	if len(d.Evictions) > 0 {
		ev := d.Evictions[0]
		v := &Victim{Pod: ev.Pod.Namespace + "/" + ev.Pod.Name, Signal: ev.Signal, Now: true, Message: strings.TrimSpace(ev.Message)}
		for _, c := range d.Candidates {
			if c.Pod == ev.Pod {
				v.Why = why(c, policy.Signal(ev.Signal))
			}
		}
		if v.Why == "" {
			v.Why = "evicted now (" + ev.Signal + ")"
		}
		return v
	}
	if n == nil {
		return nil
	}
	sig := policy.Signal(n.Signal)
	for _, c := range eng.Rank(sig, policy.Input{Summary: s, Pods: pods}) {
		if c.Critical {
			continue // the kubelet skips it
		}
		return &Victim{Pod: c.Pod.Namespace + "/" + c.Pod.Name, Signal: n.Signal, Why: why(c, sig)}
	}
	return nil
}

// why says in words what ranked a candidate first.
func why(c policy.Candidate, s policy.Signal) string {
	if !c.HasStats {
		return "no stats (ranked first, as the kubelet does)"
	}
	if s == policy.SignalPIDAvailable {
		return fmt.Sprintf("priority %d, %d processes", c.Priority, c.ProcessCount)
	}
	parts := []string{}
	usage := qs(c.Usage)
	if c.Swap != nil && !c.Swap.IsZero() {
		usage += " (with " + c.Swap.String() + " swap)"
	}
	if c.ExceedsRequest {
		parts = append(parts, fmt.Sprintf("uses %s, over its request %s by %s", usage, qs(c.Request), qs(c.UsageMinusRequest)))
	} else {
		parts = append(parts, fmt.Sprintf("uses %s, within its request %s", usage, qs(c.Request)))
	}
	parts = append(parts, fmt.Sprintf("priority %d", c.Priority))
	if c.Looping {
		parts = append(parts, "in an eviction loop")
	}
	return strings.Join(parts, ", ")
}

func qs(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}

// quantityLike formats v for people: a byte count with a binary suffix and
// one decimal (46.6Gi, 300Mi), inodes and PIDs as plain numbers. like is the
// threshold's quantity: its signal's unit decides.
func quantityLike(v int64, signal policy.Signal) string {
	if r, _ := policy.ResourceFor(signal); r == policy.ResourceInodes || r == policy.ResourcePIDs {
		return strconv.FormatInt(v, 10)
	}
	a := v
	if a < 0 {
		a = -a
	}
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if a >= 1<<u.shift {
			f := float64(v) / float64(int64(1)<<u.shift)
			if f == float64(int64(f)) {
				return strconv.FormatInt(int64(f), 10) + u.suffix
			}
			return strconv.FormatFloat(f, 'f', 1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}

func round1(f float64) float64 { return float64(int64(f*10+sign(f)*0.5)) / 10 }

func sign(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}

// sortRows puts the nodes nearest to eviction first: met thresholds, then
// the least relative headroom; nodes that could not be read last, by name.
func sortRows(rows []Row) {
	key := func(r Row) (int, float64) {
		switch {
		case r.Error != "" || r.Nearest == nil:
			return 2, 0
		default:
			return 0, r.Nearest.MarginPercent
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ci, mi := key(rows[i])
		cj, mj := key(rows[j])
		if ci != cj {
			return ci < cj
		}
		if mi != mj {
			return mi < mj
		}
		return rows[i].Node < rows[j].Node
	})
}

// filesystemsOf tells the kubelet's filesystem layout from its Summary, as
// Kubernetes mode does: a dedicated imagefs when its capacity differs from
// nodefs', a split containerfs when that differs from imagefs'.
func filesystemsOf(s *statsapi.Summary) policy.Filesystems {
	var fs policy.Filesystems
	if s.Node.Runtime == nil || s.Node.Fs == nil {
		return fs
	}
	differ := func(a, b *statsapi.FsStats) bool {
		return a != nil && b != nil && a.CapacityBytes != nil && b.CapacityBytes != nil &&
			(*a.CapacityBytes != *b.CapacityBytes || (a.Inodes != nil && b.Inodes != nil && *a.Inodes != *b.Inodes))
	}
	fs.DedicatedImageFs = differ(s.Node.Fs, s.Node.Runtime.ImageFs)
	fs.SplitContainerFs = fs.DedicatedImageFs && differ(s.Node.Runtime.ImageFs, s.Node.Runtime.ContainerFs)
	return fs
}

// kubeletReader fetches one node's kubelet endpoints: through the API
// server's node proxy, or directly when allowed and the proxy refuses the
// node's address.
type kubeletReader struct {
	o      Options
	node   *v1.Node
	direct *directKubelet // set once the direct path is taken
	why    string         // why the direct path
}

func (k *kubeletReader) source() string {
	if k.direct != nil {
		return "kubelet " + k.direct.base + " (" + k.why + ")"
	}
	return "API server node proxy"
}

func (k *kubeletReader) get(ctx context.Context, path string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, k.o.Timeout)
	defer cancel()
	if k.direct != nil {
		return k.direct.get(cctx, path)
	}
	if k.o.Direct == DirectAlways {
		return k.goDirect(cctx, path, "--kubelet-direct always")
	}
	// The kubelet's endpoints answer JSON; the client's Accept asks for
	// protobuf first (the API's objects), which the kubelet refuses.
	b, err := k.o.Client.Core().Get().AbsPath("/api/v1/nodes", k.node.Name, "proxy", path).
		SetHeader("Accept", "application/json").MaxRetries(0).Do(cctx).Raw()
	if err == nil {
		return b, nil
	}
	err = proxyError(err, b)
	if refused(err) {
		if k.o.Direct == DirectAuto {
			return k.goDirect(cctx, path, "the API server's node proxy refuses its address: "+errText(err))
		}
		return nil, fmt.Errorf("the API server's node proxy refuses this node's address (%s): a loopback or link-local kubelet address is never proxied; --kubelet-direct auto asks the kubelet itself", errText(err))
	}
	return nil, fmt.Errorf("through the API server's node proxy: %s", errText(err))
}

func (k *kubeletReader) goDirect(ctx context.Context, path, why string) ([]byte, error) {
	d, err := newDirectKubelet(k.o, k.node)
	if err != nil {
		return nil, fmt.Errorf("%s; and directly: %w", why, err)
	}
	k.direct, k.why = d, why
	return d.get(ctx, path)
}

// proxyError is the API server's own error for a failed proxy call. The
// server answers with a JSON Status, which client-go (negotiating protobuf)
// does not decode: it says "the server rejected our request for an unknown
// reason" and leaves the Status in the body.
func proxyError(err error, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		return &apierrors.StatusError{ErrStatus: st}
	}
	return err
}

// refused reports the API server's "address not allowed": the node proxy
// never dials a kubelet address that is not a global unicast IP (a 400).
func refused(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(errText(err), "address not allowed")
}

// errText is an API error's message, with the server's own text when
// client-go could only say "the server rejected our request for an unknown
// reason" (a body that is not a Status, as the node proxy's errors are).
func errText(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return err.Error()
	}
	st := se.Status()
	msg := st.Message
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if m := strings.TrimSpace(c.Message); m != "" && m != "unknown" {
				msg = m
				break
			}
		}
	}
	if msg == "" {
		return err.Error()
	}
	return msg
}

func (k *kubeletReader) configz(ctx context.Context) (*kubeletconfig.Config, error) {
	b, err := k.get(ctx, "configz")
	if err != nil {
		return nil, err
	}
	return kubeletconfig.ParseConfigz(b, "node "+k.node.Name+" /configz")
}

func (k *kubeletReader) summary(ctx context.Context) (*statsapi.Summary, error) {
	b, err := k.get(ctx, "stats/summary")
	if err != nil {
		return nil, err
	}
	var s statsapi.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding the Summary: %w", err)
	}
	return &s, nil
}

// directKubelet calls one kubelet's HTTPS port with the caller's
// credentials.
type directKubelet struct {
	base   string
	client *http.Client
}

func newDirectKubelet(o Options, n *v1.Node) (*directKubelet, error) {
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return nil, errors.New("status.daemonEndpoints.kubeletEndpoint.port is not set")
	}
	addr := ""
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && net.ParseIP(a.Address) != nil {
			addr = a.Address
			break
		}
	}
	if addr == "" {
		// Only IP addresses: a hostname would need a DNS query.
		for _, a := range n.Status.Addresses {
			if net.ParseIP(a.Address) != nil {
				addr = a.Address
				break
			}
		}
	}
	if addr == "" {
		return nil, errors.New("the Node object publishes no IP address")
	}
	if o.Rest == nil {
		return nil, errors.New("no client configuration for a direct call")
	}
	c := rest.CopyConfig(o.Rest)
	c.TLSClientConfig.ServerName = ""
	switch {
	case o.KubeletInsecure:
		c.TLSClientConfig.Insecure, c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = true, "", nil
	case o.KubeletCA != "":
		c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = o.KubeletCA, nil
	}
	c.Timeout = 0 // each call has its context's deadline
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	return &directKubelet{base: "https://" + net.JoinHostPort(addr, strconv.Itoa(int(port))), client: hc}, nil
}

// maxKubeletResponse bounds what is read from a kubelet (a Summary of a
// node with hundreds of pods is a few MB).
const maxKubeletResponse = 64 << 20

func (d *directKubelet) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("directly from the kubelet: %w", err)
	}
	defer resp.Body.Close()
	body, err := readLimited(resp, maxKubeletResponse)
	if err != nil {
		return nil, fmt.Errorf("directly from the kubelet %s/%s: %w", d.base, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("directly from the kubelet %s/%s: HTTP %s: %s", d.base, path, resp.Status, firstLine(body))
	}
	return body, nil
}

func readLimited(resp *http.Response, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("response larger than %d bytes", limit)
	}
	return b, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
