// Package policy is evictd's pure eviction policy engine: a re-implementation
// of the kubelet v1.37.2 eviction manager (pkg/kubelet/eviction) as a
// deterministic state machine in the style of etcd's raft.
//
// The Engine is given the time and its inputs (a stats Summary and the active
// pods) and returns a Decision: the observations, the thresholds met, the node
// conditions, any node-level reclaim that must run first, the ranked
// candidates with the keys that ranked them, and the pod(s) to evict with the
// grace period, message, event annotations and pod condition the kubelet
// would use. It reads no clock, opens no file, logs nothing and starts no
// goroutine; its state is explicit (State) and JSON-serialisable.
//
// One Step is one kubelet synchronize. When the Decision carries a Reclaim
// request, the caller runs the named node-level reclaim functions and calls
// Reclaimed with the Summary seen afterwards; the engine then either stops
// (reclaim was enough) or ranks and evicts, exactly as the kubelet does.
//
// Where the kubelet is not deterministic (the order of a Go map decides which
// of several met thresholds governs), the engine applies one fixed rule that
// always yields one of the kubelet's possible decisions; see
// docs/kubelet-parity.md for each such rule and every reproduced quirk.
package policy
