package kube

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/lint"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// DefaultKubeletConfig is where kubeadm and most distributions put the
// kubelet's configuration file; Kubernetes mode reads it unless --config
// names another or the kubelet's own --config is visible.
const DefaultKubeletConfig = "/var/lib/kubelet/config.yaml"

// PolicyConfig is Kubernetes mode's policy: the kubelet's configuration read
// as the kubelet reads it — its file (file, else the kubelet's own --config,
// else DefaultKubeletConfig), its drop-ins (dropInDir, else the kubelet's
// own) and the eviction flags of its command line in /proc
// (kubeletconfig.ReadNode) — with evictd's eviction flags on top. The
// notes are ReadNode's, and a warning for each signal on which evictd's
// flags put it behind the kubelet, for the caller to log once its other
// checks pass.
func PolicyConfig(node, file, dropInDir string, flags *load.EvictionFlags) (policy.Config, *kubeletconfig.Config, []kubeletconfig.Note, error) {
	c, notes, err := kubeletconfig.ReadNode(kubeletconfig.NodeSource{File: file, DropInDir: dropInDir,
		DefaultFile: DefaultKubeletConfig, ProcRoot: "/proc", NodeName: node})
	if err != nil {
		return policy.Config{}, nil, nil, err
	}
	kubelet := c.Kubelet.DeepCopy()
	if err := c.ApplyFlags(flags, ""); err != nil {
		return policy.Config{}, nil, nil, err
	}
	cfg, err := c.Policy()
	if err != nil {
		return policy.Config{}, nil, nil, err
	}
	// evictd's flags may lower a threshold below the kubelet's own: say so
	// once at start (evictd lint --kubelet-config has the details).
	if kcfg, err := policy.ConfigFromKubelet(kubelet); err == nil && len(flags.Set()) > 0 {
		for _, f := range lint.Coexistence(cfg.Thresholds, kcfg.Thresholds, c.Describe()) {
			notes = append(notes, kubeletconfig.Note{Level: slog.LevelWarn, Msg: "the kubelet acts before evictd on this signal",
				Args: []any{"kubelet_threshold", f.Value, "finding", f.Message, "fix", f.Fix}})
		}
	}
	return cfg, c, notes, nil
}

// RestConfig is how evictd reaches the API server, in 'run --kubernetes'
// and 'selftest --kubernetes' alike: the kubeconfig file when one is
// named, else the in-cluster ServiceAccount.
func RestConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w (outside a pod, pass --kubeconfig)", err)
	}
	return rc, nil
}
