package policy

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/safetext"
)

// KubeletVersion is the kubelet release whose eviction decisions the policy
// reproduces, quirks included (docs/kubelet-parity.md); the parity tier
// checks it against that release's own eviction manager.
const KubeletVersion = "v1.37.2"

// Defaults the kubelet v1.37.2 applies, with where they come from.
const (
	// DefaultPressureTransitionPeriod replaces an unset or zero
	// evictionPressureTransitionPeriod (pkg/kubelet/apis/config/v1beta1/defaults.go).
	// Quirk: "0s" is indistinguishable from unset, so it also becomes 5m.
	DefaultPressureTransitionPeriod = 5 * time.Minute
)

// DefaultEvictionHard is the kubelet's Linux evictionHard default
// (pkg/kubelet/eviction/defaults_linux.go). Copy before modifying.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// DefaultEnforceNodeAllocatable is the kubelet's enforceNodeAllocatable default.
func DefaultEnforceNodeAllocatable() []string { return []string{"pods"} }

// FeatureGates are the kubelet feature gates that change eviction decisions,
// as explicit settings. DefaultFeatureGates holds the v1.37.2 defaults.
type FeatureGates struct {
	// KubeletSeparateDiskGC (beta, on): containerfs signals and the split
	// image/container filesystem layout. Off with a split layout, the kubelet
	// errors on its first synchronize and never evicts on thresholds again.
	KubeletSeparateDiskGC bool `json:"kubeletSeparateDiskGC"`
	// PodLevelResources (beta, on): pod-level requests replace container
	// requests in ranking and add a pod part to memory eviction messages.
	PodLevelResources bool `json:"podLevelResources"`
	// PodLevelResourcesFixKubeletQOSClass (beta, on): QoS from pod-level
	// resources only when they are set (admission's BestEffort check).
	PodLevelResourcesFixKubeletQOSClass bool `json:"podLevelResourcesFixKubeletQOSClass"`
	// InPlacePodVerticalScalingMemoryBackedVolumes (alpha, off): when on,
	// memory-backed emptyDirs are not checked against their sizeLimit.
	InPlacePodVerticalScalingMemoryBackedVolumes bool `json:"inPlacePodVerticalScalingMemoryBackedVolumes"`
	// TaintTolerationComparisonOperators (alpha, off): Lt/Gt tolerations in
	// admission's memory-pressure toleration check.
	TaintTolerationComparisonOperators bool `json:"taintTolerationComparisonOperators"`
}

// DefaultFeatureGates returns the kubelet v1.37.2 defaults
// (pkg/features/kube_features.go).
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{
		KubeletSeparateDiskGC:               true,
		PodLevelResources:                   true,
		PodLevelResourcesFixKubeletQOSClass: true,
	}
}

// apply sets the gates named in a KubeletConfiguration featureGates map. A
// name the kubelet v1.37.2 does not know is an error in component-base's
// featuregate wording ("unrecognized feature gate: X"), with which the kubelet
// refuses to start; it stops at the first, and so does apply, checking the
// names in sorted order (the kubelet's is a map's). Known gates that do not
// change an eviction decision are accepted and ignored.
func (g *FeatureGates) apply(m map[string]bool) error {
	for _, name := range sortedKeys(m) {
		on := m[name]
		switch name {
		case "KubeletSeparateDiskGC":
			g.KubeletSeparateDiskGC = on
		case "PodLevelResources":
			g.PodLevelResources = on
		case "PodLevelResourcesFixKubeletQOSClass":
			g.PodLevelResourcesFixKubeletQOSClass = on
		case "InPlacePodVerticalScalingMemoryBackedVolumes":
			g.InPlacePodVerticalScalingMemoryBackedVolumes = on
		case "TaintTolerationComparisonOperators":
			g.TaintTolerationComparisonOperators = on
		default:
			if err := CheckFeatureGate(name); err != nil {
				return &FieldError{Field: "featureGates." + name, Value: strconv.FormatBool(on), Err: err}
			}
		}
	}
	return nil
}

// CheckFeatureGate returns the kubelet's error for a feature gate name it
// does not know (kind ErrUnrecognizedFeatureGate), nil for one it knows.
func CheckFeatureGate(name string) error {
	if KnownFeatureGate(name) {
		return nil
	}
	return newError(ErrUnrecognizedFeatureGate, name, "unrecognized feature gate: "+name)
}

// KnownFeatureGate reports whether the kubelet v1.37.2 knows the feature
// gate name (kubeletFeatureGates, checked against the kubelet by the parity
// tier).
func KnownFeatureGate(name string) bool {
	i := sort.SearchStrings(kubeletFeatureGates, name)
	return i < len(kubeletFeatureGates) && kubeletFeatureGates[i] == name
}

// Config is the eviction manager's configuration after the kubelet's
// defaulting, merging and parsing (the kubelet's eviction.Config plus the
// settings and gates it reads elsewhere).
type Config struct {
	// Thresholds as ParseThresholdConfig returns them (before the containerfs
	// rules, which depend on the filesystem layout and are applied by the Engine).
	Thresholds []Threshold `json:"thresholds"`
	// PressureTransitionPeriod: how long a node condition stays after the last
	// time a threshold raised it.
	PressureTransitionPeriod time.Duration `json:"pressureTransitionPeriod"`
	// MaxPodGracePeriodSeconds caps the grace period of soft evictions.
	MaxPodGracePeriodSeconds int64 `json:"maxPodGracePeriodSeconds"`
	// LocalStorageCapacityIsolation enables emptyDir sizeLimit and
	// ephemeral-storage limit evictions (default true).
	LocalStorageCapacityIsolation bool `json:"localStorageCapacityIsolation"`
	// KernelMemcgNotification is informational for the engine: it only makes
	// the agent add wake-ups, never changes a decision.
	KernelMemcgNotification bool `json:"kernelMemcgNotification"`
	// Features are the feature gates that matter to eviction.
	Features FeatureGates `json:"features"`
	// Profile selects behaviours beyond the kubelet (zero: none, the
	// kubelet's decisions). ConfigFromKubelet leaves it zero: it is
	// evictd's setting, not the kubelet's.
	Profile Profile `json:"profile,omitzero"`
}

// FieldError is a configuration error that names the field path and value.
type FieldError struct {
	Field string // e.g. "evictionHard.memory.available"
	Value string
	Err   error
}

// Error renders one line. A map key is the user's text and the kubelet's
// message repeats it ("unsupported eviction signal X"), so the field and the
// cause are escaped: a key holding a newline or a terminal escape cannot
// split the line or drive the reader's terminal. Printable keys read as the
// kubelet writes them.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %q: %s", safetext.Escape(e.Field), e.Value, safetext.Escape(fmt.Sprint(e.Err)))
}

func (e *FieldError) Unwrap() error { return e.Err }

// ConfigFromKubelet turns a KubeletConfiguration (as read from a file, before
// defaulting) into an engine Config the way the kubelet v1.37.2 does:
//
//   - defaulting (pkg/kubelet/apis/config/v1beta1/defaults.go): a zero
//     evictionPressureTransitionPeriod becomes 5m, a nil enforceNodeAllocatable
//     becomes [pods], a nil localStorageCapacityIsolation becomes true, a nil
//     mergeDefaultEvictionSettings becomes false;
//   - the evictionHard merge (cmd/kubelet/app/server.go loadConfigFile): nil →
//     the defaults; otherwise, with mergeDefaultEvictionSettings, missing
//     default keys are added; otherwise the user's map replaces the defaults;
//   - ParseThresholdConfig with enforceNodeAllocatable.
//
// kc is not modified. Errors name the field and value and carry the kubelet's
// wording.
func ConfigFromKubelet(kc *kubeletconfigv1beta1.KubeletConfiguration) (Config, error) {
	if kc == nil {
		kc = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	cfg := Config{
		PressureTransitionPeriod:      kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds:      int64(kc.EvictionMaxPodGracePeriod),
		LocalStorageCapacityIsolation: true,
		KernelMemcgNotification:       kc.KernelMemcgNotification,
		Features:                      DefaultFeatureGates(),
	}
	if cfg.PressureTransitionPeriod == 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	// A negative period is not validated by the kubelet either: no condition
	// is ever reported (now-last < period never holds). Accepted for parity.
	if kc.LocalStorageCapacityIsolation != nil {
		cfg.LocalStorageCapacityIsolation = *kc.LocalStorageCapacityIsolation
	}
	if err := cfg.Features.apply(kc.FeatureGates); err != nil {
		return Config{}, err
	}
	enforce := kc.EnforceNodeAllocatable
	if enforce == nil {
		enforce = DefaultEnforceNodeAllocatable()
	}
	hard := EffectiveEvictionHard(kc)
	hardKeys := effectiveEvictionHardOrder(kc, hard)

	// Check entry by entry first, so the error names the field.
	if err := checkStatements("evictionHard", hard); err != nil {
		return Config{}, err
	}
	if err := checkStatements("evictionSoft", kc.EvictionSoft); err != nil {
		return Config{}, err
	}
	if _, err := parseGracePeriodsField(kc.EvictionSoftGracePeriod); err != nil {
		return Config{}, err
	}
	for _, k := range sortedKeys(kc.EvictionMinimumReclaim) {
		if _, err := parseMinimumReclaims(map[string]string{k: kc.EvictionMinimumReclaim[k]}); err != nil {
			return Config{}, &FieldError{Field: "evictionMinimumReclaim." + k, Value: kc.EvictionMinimumReclaim[k], Err: err}
		}
	}
	thresholds, err := parseThresholdConfig(enforce, hard, hardKeys, kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
	if err != nil {
		// Only a soft threshold without grace period is left to fail here.
		for _, k := range sortedKeys(kc.EvictionSoft) {
			if _, ok := kc.EvictionSoftGracePeriod[k]; !ok {
				return Config{}, &FieldError{Field: "evictionSoftGracePeriod." + k, Value: "", Err: err}
			}
		}
		return Config{}, err
	}
	cfg.Thresholds = thresholds
	return cfg, nil
}

// EffectiveEvictionHard returns the evictionHard map the kubelet uses after
// its loadConfigFile merge (a new map; kc is not modified).
func EffectiveEvictionHard(kc *kubeletconfigv1beta1.KubeletConfiguration) map[string]string {
	if kc.EvictionHard == nil {
		return DefaultEvictionHard()
	}
	out := make(map[string]string, len(kc.EvictionHard)+5)
	for k, v := range kc.EvictionHard {
		out[k] = v
	}
	if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
		for k, v := range DefaultEvictionHard() {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

// defaultEvictionHardOrder is the order of the kubelet's DefaultEvictionHard
// map literal (defaults_linux.go), its most likely iteration order.
var defaultEvictionHardOrder = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree"}

// effectiveEvictionHardOrder is the kubelet's most likely iteration order of
// the merged evictionHard map: the user's keys as decoded (sorted, see
// sortedKeys), then the defaults loadConfigFile inserted, in their literal
// order; all defaults in literal order when evictionHard was absent.
func effectiveEvictionHardOrder(kc *kubeletconfigv1beta1.KubeletConfiguration, merged map[string]string) []string {
	if kc.EvictionHard == nil {
		return append([]string(nil), defaultEvictionHardOrder...)
	}
	keys := sortedKeys(kc.EvictionHard)
	for _, k := range defaultEvictionHardOrder {
		if _, user := kc.EvictionHard[k]; !user {
			if _, ok := merged[k]; ok {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

func checkStatements(field string, m map[string]string) error {
	for _, k := range sortedKeys(m) {
		if _, err := parseThresholdStatement(Signal(k), m[k]); err != nil {
			return &FieldError{Field: field + "." + k, Value: m[k], Err: err}
		}
	}
	return nil
}

func parseGracePeriodsField(m map[string]string) (map[Signal]time.Duration, error) {
	for _, k := range sortedKeys(m) {
		if _, err := parseGracePeriods(map[string]string{k: m[k]}); err != nil {
			return nil, &FieldError{Field: "evictionSoftGracePeriod." + k, Value: m[k], Err: err}
		}
	}
	return parseGracePeriods(m)
}

// ErrSplitFsWithoutGate is the kubelet's error when the filesystem layout is
// split but KubeletSeparateDiskGC is off.
var ErrSplitFsWithoutGate = errors.New("KubeletSeparateDiskGC is turned off but we still have a split filesystem")
