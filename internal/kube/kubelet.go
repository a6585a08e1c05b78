package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/kubeclient"
)

// DefaultSummaryEvery is how often the kubelet's Summary is fetched for the
// disk signals: the kubelet's own evictionMonitoringPeriod. The kubelet
// refreshes filesystem stats no faster (cAdvisor housekeeping, and its
// volume stats every minute), so fetching more often would return the same
// numbers; between fetches the last one is reused, and the engine drops a
// disk threshold whose stats are not newer than the previous synchronize's,
// as the kubelet does.
const DefaultSummaryEvery = 10 * time.Second

// KubeletSummary fetches the kubelet's /stats/summary from its own port on
// this node, authenticated with evictd's credentials (the ServiceAccount
// token; the kubelet authorizes it as nodes/stats through the API server).
//
// Why the kubelet's port and not the API server's node proxy: the proxy
// needs nodes/proxy, which also allows exec and attach into every pod of
// the node through the kubelet's API; nodes/stats allows reading stats only.
// The kubelet's serving certificate is usually self-signed, so it is not
// verified unless a CA is given (KubeletCA); the token then goes to
// whatever answers on the node's own address and port.
type KubeletSummary struct {
	// URL is https://<node address>:<kubelet port>/stats/summary.
	URL    string
	Client rest.HTTPClient
	Every  time.Duration // 0: DefaultSummaryEvery
	// Timeout bounds each fetch (0: DefaultCallTimeout).
	Timeout time.Duration

	mu       sync.Mutex
	last     *statsapi.Summary // nil when the last fetch failed
	err      error
	at       time.Time // of the last fetch
	fetching bool
}

// NewKubeletSummary builds the fetcher from the API client's configuration
// (its credentials: bearer token, token file or client certificate).
// kubeletCA, when set, is the CA file that signed the kubelet's serving
// certificate.
func NewKubeletSummary(cfg *rest.Config, url, kubeletCA string) (*KubeletSummary, error) {
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = kubeletCA, nil
	c.TLSClientConfig.Insecure = kubeletCA == ""
	c.TLSClientConfig.ServerName = ""
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet stats client: %w", err)
	}
	return &KubeletSummary{URL: url, Client: hc}, nil
}

// KubeletSummaryURL finds the kubelet's address and port in the Node object:
// the first InternalIP (else the first address) and
// status.daemonEndpoints.kubeletEndpoint.Port.
func KubeletSummaryURL(ctx context.Context, client *kubeclient.Client, node string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	n, err := client.GetNode(ctx, node)
	if err != nil {
		return "", fmt.Errorf("reading node %s: %w", node, err)
	}
	return summaryURLOf(n)
}

func summaryURLOf(n *v1.Node) (string, error) {
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return "", fmt.Errorf("node %s: status.daemonEndpoints.kubeletEndpoint.port is not set", n.Name)
	}
	addr := ""
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			addr = a.Address
			break
		}
	}
	if addr == "" && len(n.Status.Addresses) > 0 {
		addr = n.Status.Addresses[0].Address
	}
	if addr == "" {
		return "", fmt.Errorf("node %s: status.addresses is empty", n.Name)
	}
	return "https://" + net.JoinHostPort(addr, strconv.Itoa(int(port))) + "/stats/summary", nil
}

// Summary implements DiskSource without waiting on the network: it returns
// the last fetch's result (nil and its error when it failed) and, when that
// is Every old, starts the next fetch in the background, so a slow or hung
// kubelet never delays a memory decision. Call Fetch once first.
func (k *KubeletSummary) Summary(ctx context.Context) (*statsapi.Summary, error) {
	every := k.Every
	if every <= 0 {
		every = DefaultSummaryEvery
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.fetching && time.Since(k.at) >= every {
		k.fetching = true
		go func() {
			s, err := k.fetch(context.Background())
			k.mu.Lock()
			k.last, k.err, k.at, k.fetching = s, err, time.Now(), false
			k.mu.Unlock()
		}()
	}
	if k.last == nil && k.err == nil {
		return nil, errors.New("the kubelet's Summary has not been fetched yet")
	}
	return k.last, k.err
}

// Fetch fetches the kubelet's Summary now and keeps it for Summary.
func (k *KubeletSummary) Fetch(ctx context.Context) (*statsapi.Summary, error) {
	s, err := k.fetch(ctx)
	k.mu.Lock()
	k.last, k.err, k.at = s, err, time.Now()
	k.mu.Unlock()
	return s, err
}

func (k *KubeletSummary) fetch(ctx context.Context) (*statsapi.Summary, error) {
	to := k.Timeout
	if to <= 0 {
		to = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	req, err := newGet(ctx, k.URL)
	if err != nil {
		return nil, err
	}
	resp, err := k.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet Summary %s: %w", k.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("kubelet Summary %s: HTTP %s", k.URL, resp.Status)
	}
	s, err := decodeDiskPart(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kubelet Summary %s: %w", k.URL, err)
	}
	return s, nil
}

// summaryDisk is the part of the kubelet's Summary that DiskSource gives, in
// the Summary's own field types and JSON names: the node's filesystems and
// each pod's storage (its ephemeral storage, volumes, and the containers'
// writable layers and logs, by name). The rest (the CPU, memory, network,
// swap and process stats of the node, every pod and every container) evictd
// reads itself, so decoding skips it instead of building it to drop it: the
// Summary of a 110-pod node (307 KiB of JSON on the real node) is fetched
// every 10 s, and decoding it whole made 2.6 times the allocations
// (BenchmarkKubeletSummaryHeap). Only what is kept is built; the JSON
// decoder's own buffer is most of what a fetch still allocates.
type summaryDisk struct {
	Node struct {
		NodeName string                 `json:"nodeName"`
		Fs       *statsapi.FsStats      `json:"fs,omitempty"`
		Runtime  *statsapi.RuntimeStats `json:"runtime,omitempty"`
	} `json:"node"`
	Pods []struct {
		PodRef           statsapi.PodReference  `json:"podRef"`
		EphemeralStorage *statsapi.FsStats      `json:"ephemeral-storage,omitempty"`
		VolumeStats      []statsapi.VolumeStats `json:"volume,omitempty"`
		Containers       []struct {
			Name   string            `json:"name"`
			Rootfs *statsapi.FsStats `json:"rootfs,omitempty"`
			Logs   *statsapi.FsStats `json:"logs,omitempty"`
		} `json:"containers"`
	} `json:"pods"`
}

// decodeDiskPart decodes a kubelet Summary's JSON into the part of it
// summaryDisk names, as a Summary.
func decodeDiskPart(r io.Reader) (*statsapi.Summary, error) {
	var d summaryDisk
	if err := json.NewDecoder(r).Decode(&d); err != nil {
		return nil, err
	}
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: d.Node.NodeName, Fs: d.Node.Fs, Runtime: d.Node.Runtime}}
	out.Pods = make([]statsapi.PodStats, len(d.Pods))
	for i := range d.Pods {
		p, o := &d.Pods[i], &out.Pods[i]
		o.PodRef, o.EphemeralStorage, o.VolumeStats = p.PodRef, p.EphemeralStorage, p.VolumeStats
		o.Containers = make([]statsapi.ContainerStats, len(p.Containers))
		for j := range p.Containers {
			c := &p.Containers[j]
			o.Containers[j] = statsapi.ContainerStats{Name: c.Name, Rootfs: c.Rootfs, Logs: c.Logs}
		}
	}
	return out, nil
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}
