// This file is NOT part of the parity module's own packages (the leading "_" of
// its directory hides it from ./...). scripts/test-parity.sh maps it, with
// `go build -overlay`, into the module cache copy of
// k8s.io/kubernetes/pkg/kubelet/eviction, so that the oracle can drive the
// unexported synchronize of the real upstream eviction manager without copying
// any upstream source into this repository.

package eviction

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// ParitySynchronize runs one synchronize of a manager built by NewManager,
// exactly as the kubelet's monitoring loop and memcg notifier do.
func ParitySynchronize(ctx context.Context, m Manager, diskInfoProvider DiskInfoProvider, podFunc ActivePodsFunc) ([]*v1.Pod, error) {
	return m.(*managerImpl).synchronize(ctx, diskInfoProvider, podFunc)
}

// ParityNodeConditions returns the node conditions the manager reports after
// its last synchronize (transition period included), in the manager's order.
func ParityNodeConditions(m Manager) []v1.NodeConditionType {
	impl := m.(*managerImpl)
	impl.RLock()
	defer impl.RUnlock()
	return append([]v1.NodeConditionType(nil), impl.nodeConditions...)
}
