package kubeletconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/evictd/evictd/internal/policy"
)

// CheckKubeletVersion judges a Node's status.nodeInfo.kubeletVersion (e.g.
// "v1.37.2", "v1.37.4-eks-1a2b3c", "v1.37.2+k3s1") against the kubelet
// release whose eviction decisions evictd reproduces (policy.KubeletVersion):
// nil for the same minor release — patch releases do not change the
// eviction manager's decisions as a rule, and evictd's parity tests pin the
// exact one — an error saying what differs otherwise.
func CheckKubeletVersion(kubeletVersion string) error {
	want := version.MustParseGeneric(policy.KubeletVersion)
	got, err := version.ParseGeneric(kubeletVersion)
	if err != nil {
		return fmt.Errorf("the node's kubelet version %q cannot be read (%v): evictd implements the eviction decisions of kubelet %s and cannot tell whether this one decides the same", kubeletVersion, err, policy.KubeletVersion)
	}
	if got.Major() == want.Major() && got.Minor() == want.Minor() {
		return nil
	}
	return fmt.Errorf("the node's kubelet is %s; evictd implements the eviction decisions of kubelet %s (v%d.%d.x): where the eviction manager changed between the releases, evictd decides differently from this kubelet (docs/kubelet-parity.md)",
		kubeletVersion, policy.KubeletVersion, want.Major(), want.Minor())
}
