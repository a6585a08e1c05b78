package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/evictd/evictd/internal/fleet"
	"github.com/evictd/evictd/test/node"
)

// ghostNode is a Node object with no kubelet behind it: its addresses are
// loopback ones (so nothing is ever sent off the machine), and nothing there
// speaks for it.
func ghostNode(name string, addr string, port int32) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"evictd.test/ghost": "true"}}}
	if addr != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	return n
}

// createNode creates the Node object n with its status (addresses, kubelet
// port), and deletes it when the test ends.
func createNode(t *testing.T, c *node.Cluster, n *corev1.Node) {
	t.Helper()
	if _, err := c.Client.CoreV1().Nodes().Create(node.Ctx(t), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", n.Name, err)
	}
	t.Cleanup(func() { deleteNode(t, c, n.Name) })
	// Addresses and the kubelet port live in the status, which the node
	// lifecycle controller updates too (it marks the node unknown).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Client.CoreV1().Nodes().Get(node.Ctx(t), n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Addresses, cur.Status.DaemonEndpoints = n.Status.Addresses, n.Status.DaemonEndpoints
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(node.Ctx(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s status: %v", n.Name, err)
	}
}

func deleteNode(t *testing.T, c *node.Cluster, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), node.APITimeout)
	defer cancel()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting node %s: %v", name, err)
	}
}

// explainCluster runs the tree's evictd as a user runs it, and returns the
// report of -o json, or the table.
func explainCluster(t *testing.T, c *node.Cluster, args ...string) (*fleet.Report, string) {
	t.Helper()
	evictd := filepath.Join(c.Images, "bin", "evictd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	cmd := exec.CommandContext(ctx, evictd, append([]string{"explain", "--cluster", "--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("evictd explain --cluster %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	for _, a := range args {
		if a == "json" {
			var rep fleet.Report
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("decoding the report: %v\n%s", err, out)
			}
			return &rep, string(out)
		}
	}
	return nil, string(out)
}

// kubeletNodefs is the node tier's kubelet's nodefs.available threshold as
// explain spells it (scripts/node.sh: 10-disk.conf's 4%, 20-sub's 2%, and
// --eviction-minimum-reclaim=nodefs.available=100Mi).
const kubeletNodefs = "nodefs.available<2% (min-reclaim 100Mi)"

// hasThreshold says whether explain's thresholds hold th exactly, or th
// followed by a note such as a minimum reclaim.
func hasThreshold(ths []string, th string) bool {
	return slices.ContainsFunc(ths, func(s string) bool { return s == th || strings.HasPrefix(s, th+" (") })
}

func rowOf(t *testing.T, rep *fleet.Report, name string) fleet.Row {
	t.Helper()
	for _, r := range rep.Nodes {
		if r.Node == name {
			return r
		}
	}
	t.Fatalf("no row for node %s in %+v", name, rep.Nodes)
	return fleet.Row{}
}

// TestExplainCluster: `evictd explain --cluster` (and `kubectl evictd`) on
// the real node, beside three Node objects whose kubelets do not answer:
// one whose address refuses connections, one where something accepts and
// never replies, one that publishes no address.
//
// The real node is 127.0.0.1: the API server's node proxy refuses it
// ("address not allowed": the proxy only dials global unicast addresses),
// so the Summary and /configz are read from the kubelet directly, with the
// admin's client certificate, the kubelet's certificate verified against
// the cluster CA of the kubeconfig. Its row has the kubelet's own threshold
// (from /configz, 300Mi), the hog ranked first, and the evictd agent once
// it is installed. The others each get their error in their row, the
// real node's row is unaffected, and the run ends within its bounds.
func TestExplainCluster(t *testing.T) {
	c := node.Get(t)
	ns := c.Namespace(t, "explain-cluster")
	c.RunPod(t, ns, node.HogPod("hog", "alloc 96Mi; hold", "", ""))
	c.RunPod(t, ns, node.HogPod("steady", "alloc 16Mi; hold", "64Mi", "64Mi"))

	// Something that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	silentPort := ln.Addr().(*net.TCPAddr).Port
	ghosts := []*corev1.Node{
		ghostNode("ghost-refused", "127.0.0.2", 10250),
		ghostNode("ghost-silent", "127.0.0.3", int32(silentPort)),
		ghostNode("ghost-noaddr", "", 10250),
	}
	for _, g := range ghosts {
		createNode(t, c, g)
	}
	removeGhosts := func() {
		for _, g := range ghosts {
			deleteNode(t, c, g.Name)
		}
	}

	// Pod-level memory reads 0 for the first 10-20 s of a pod: wait until
	// the kubelet's Summary has the hog's working set.
	c.WaitFor(t, 60*time.Second, "the hog's memory in the kubelet's Summary", func(ctx context.Context) (bool, error) {
		b, err := c.KubeletGet(ctx, "/stats/summary")
		if err != nil {
			return false, err
		}
		return hogMemory(b, ns) > 64<<20, nil
	})

	start := time.Now()
	rep, _ := explainCluster(t, c, "-o", "json", "--timeout", "5s", "--window", "12s", "--samples", "3")
	took := time.Since(start)
	real := rowOf(t, rep, c.Node)
	if real.Error != "" {
		t.Fatalf("the real node's row has an error: %s", real.Error)
	}
	if real.Ready != "True" || !strings.Contains(real.Source, "kubelet https://127.0.0.1:") || !strings.Contains(real.Source, "address not allowed") {
		t.Errorf("real node: ready %q, source %q (want the direct path, the proxy refusing 127.0.0.1)", real.Ready, real.Source)
	}
	// The node tier's kubelet runs with memory.available<300Mi and
	// nodefs.available<2% with a minimum reclaim of 100Mi (not the defaults
	// of 100Mi, 10%, 15%; scripts/node.sh's drop-ins and flag): they come
	// from its /configz.
	if real.Nearest == nil || !hasThreshold(real.Thresholds, "memory.available<"+c.Threshold) ||
		!hasThreshold(real.Thresholds, kubeletNodefs) || !slices.Contains(real.Thresholds, real.Nearest.Threshold) {
		t.Errorf("thresholds %q, nearest %+v: want the kubelet's own (memory.available<%s, %s)", real.Thresholds, real.Nearest, c.Threshold, kubeletNodefs)
	}
	if real.First == nil || real.First.Pod != ns+"/hog" || real.First.Now || !strings.Contains(real.First.Why, "over its request 0") {
		t.Errorf("first to go %+v, want %s/hog (BestEffort, the most over its request)", real.First, ns)
	}
	if real.Agent != "none" {
		t.Errorf("agent %q before evictd is installed", real.Agent)
	}
	if real.NodeMemory == nil || real.NodeMemory.WorkingSetAvailable == nil {
		t.Errorf("node memory %+v", real.NodeMemory)
	}
	t.Logf("real node: nearest %+v trend %+v notes %q", real.Nearest, real.Trend, real.Notes)

	// Each ghost: where it was asked (the proxy refuses the two loopback
	// addresses, so their kubelets are asked directly) and what went wrong.
	for name, want := range map[string][2]string{
		"ghost-refused": {"address not allowed", "127.0.0.2:10250: connect: connection refused"},
		"ghost-silent":  {"address not allowed", "127.0.0.3"},
		"ghost-noaddr":  {"API server node proxy", "through the API server's node proxy: no preferred addresses found"},
	} {
		r := rowOf(t, rep, name)
		if !strings.Contains(r.Source, want[0]) || !strings.Contains(r.Error, want[1]) || r.Nearest != nil {
			t.Errorf("%s: source %q, error %q; want %q and %q", name, r.Source, r.Error, want[0], want[1])
		}
		t.Logf("%s: %s (%s)", name, r.Error, r.Source)
	}
	if r := rowOf(t, rep, "ghost-silent"); !strings.Contains(r.Error, "deadline") && !strings.Contains(r.Error, "timeout") {
		t.Errorf("ghost-silent: %q is not the --timeout", r.Error)
	}
	if rep.Nodes[0].Node != c.Node {
		t.Errorf("the real node (the only one read) is not first: %s", rep.Nodes[0].Node)
	}
	// The hang guard for the whole run; the bound the flags give is one
	// sampling window plus a few timeouts of the slowest node.
	t.Logf("explain --cluster of 4 nodes took %v", took.Round(time.Millisecond))

	// Only the proxy: the real node's row says why it cannot be read.
	rep, _ = explainCluster(t, c, "-o", "json", "--window", "0", "--kubelet-direct", "never", c.Node)
	if r := rowOf(t, rep, c.Node); !strings.Contains(r.Error, "address not allowed") || len(rep.Nodes) != 1 {
		t.Errorf("--kubelet-direct never: %+v", rep.Nodes)
	}

	// A label selector picks the ghosts only.
	rep, _ = explainCluster(t, c, "-o", "json", "--window", "0", "--timeout", "2s", "-l", "evictd.test/ghost=true")
	if len(rep.Nodes) != 3 {
		t.Errorf("-l evictd.test/ghost=true: %d rows", len(rep.Nodes))
	}

	// The table, for people.
	_, table := explainCluster(t, c, "--window", "0", "--timeout", "2s")
	for _, want := range []string{"NODE", "NEAREST THRESHOLD", c.Node, "ghost-refused", ns + "/hog", "error:"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("table:\n%s", table)

	// With the agent installed, and as a kubectl plugin. The ghosts go
	// first: evictd's DaemonSet would put a pod on each, which could never
	// run.
	removeGhosts()
	installEvictd(t, c)
	plugins := t.TempDir()
	if err := os.Symlink(filepath.Join(c.Images, "bin", "evictd"), filepath.Join(plugins, "kubectl-evictd")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "evictd", "--window", "0", "-o", "json", c.Node)
	cmd.Env = append(os.Environ(), "PATH="+plugins+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl evictd: %v\n%s", err, out)
	}
	var prep fleet.Report
	if err := json.Unmarshal(out, &prep); err != nil {
		t.Fatalf("kubectl evictd -o json: %v\n%s", err, out)
	}
	if r := rowOf(t, &prep, c.Node); !strings.HasPrefix(r.Agent, "evictd kube-system/evictd-") || r.Error != "" {
		t.Errorf("kubectl evictd: agent %q, error %q", r.Agent, r.Error)
	}
}

// hogMemory is the hog pod's working set in a Summary (0 when absent).
func hogMemory(summary []byte, ns string) int64 {
	var s struct {
		Pods []struct {
			PodRef struct{ Name, Namespace string }
			Memory *struct {
				WorkingSetBytes int64
			}
		}
	}
	if json.Unmarshal(summary, &s) != nil {
		return 0
	}
	for _, p := range s.Pods {
		if p.PodRef.Name == "hog" && p.PodRef.Namespace == ns && p.Memory != nil {
			return p.Memory.WorkingSetBytes
		}
	}
	return 0
}

// relayAddr is the address the proxy test gives its Node object: in the
// pod range, so the no-traffic guard lets the API server's connection
// through (the range never leaves the machine), and a global unicast
// address, which the API server's node proxy accepts. The pods get theirs
// from the bottom of the range; the node tier never runs 250 of them.
const relayAddr = "10.88.0.254"

// TestExplainClusterThroughProxy: the path for every node whose kubelet has
// a routable address — the API server's node proxy — on this machine, where
// the one real kubelet listens on 127.0.0.1 only. A Node object "relayed"
// is given the address 10.88.0.254 (added to the host's lo for the test);
// there a relay with a serving certificate for that address (signed by the
// cluster CA, as the kubelet's is) passes each request on to the real
// kubelet with the API server's kubelet client certificate. The API server
// proxies to it — its certificate checked against the cluster CA — and
// evictd's row for it is read through the proxy: the real kubelet's
// /configz and Summary, no error.
func TestExplainClusterThroughProxy(t *testing.T) {
	c := node.Get(t)
	// The address goes on lo (this machine loads no dummy interface):
	// packets to it are delivered locally, as to 127.0.0.1.
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("addr", "add", relayAddr+"/32", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run("addr", "del", relayAddr+"/32", "dev", "lo"); err != nil {
			t.Error(err)
		}
	})

	relay := startKubeletRelay(t, c, relayAddr)
	createNode(t, c, ghostNode("relayed", relayAddr, int32(relay)))

	rep, _ := explainCluster(t, c, "-o", "json", "--window", "0", "--kubelet-direct", "never", "relayed")
	r := rowOf(t, rep, "relayed")
	if r.Error != "" || r.Source != "API server node proxy" {
		t.Fatalf("relayed: source %q, error %q", r.Source, r.Error)
	}
	if r.Nearest == nil || !hasThreshold(r.Thresholds, "memory.available<"+c.Threshold) || !hasThreshold(r.Thresholds, kubeletNodefs) {
		t.Errorf("relayed: thresholds %q, nearest %+v (want the real kubelet's /configz through the proxy)", r.Thresholds, r.Nearest)
	}
	t.Logf("relayed: %+v", r)
}
