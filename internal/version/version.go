// Package version says which evictd this is and which kubelet's eviction
// semantics it implements: `evictd version`, `evictd --version` and the
// evictd_build_info metric print the same values.
package version

import (
	"runtime"
	"runtime/debug"

	"github.com/evictd/evictd/internal/policy"
)

// Kubelet is the kubelet release whose eviction decisions evictd reproduces
// (policy.KubeletVersion); docs/kubelet-parity.md lists the quirks that come
// with it and docs/install.md the kubelet versions supported.
const Kubelet = policy.KubeletVersion

// stamped and revision are set at link time by `make build` and `make image`:
//
//	-ldflags "-X github.com/evictd/evictd/internal/version.stamped=v0.1.0
//	          -X github.com/evictd/evictd/internal/version.revision=<commit>"
//
// (scripts/version.sh computes both from git).
var stamped, revision string

// Version is the stamped version ("v0.1.0", "v0.1.0-3-g1a2b3c4d5e6f-dirty"),
// or the module's own when the binary was built without stamping
// (`go install …@v0.1.0`: "v0.1.0"; `go build` in a checkout: "(devel)").
func Version() string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Revision is the commit the binary was built from: stamped, or the one Go
// recorded (go build -buildvcs); "" when neither knows it.
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// GoVersion is the Go release that built the binary.
func GoVersion() string { return runtime.Version() }
