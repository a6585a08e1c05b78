package policy

import (
	"errors"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TestConfigErrorKinds: every error the kubelet's parsers return has a kind
// callers can switch on, and keeps the kubelet's wording.
func TestConfigErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		hard, soft, grace, reclaim map[string]string
		kind                       ErrorKind
		msg                        string
	}{
		{hard: map[string]string{"memory.availabel": "1Gi"}, kind: ErrUnsupportedSignal, msg: "unsupported eviction signal memory.availabel"},
		{grace: map[string]string{"bogus": "1m"}, kind: ErrUnsupportedSignal, msg: "unsupported eviction signal bogus"},
		{reclaim: map[string]string{"bogus": "1Mi"}, kind: ErrUnsupportedSignal, msg: "unsupported eviction signal bogus"},
		{hard: map[string]string{"memory.available": "abc"}, kind: ErrBadValue,
			msg: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
		{hard: map[string]string{"memory.available": "x%"}, kind: ErrBadValue, msg: `strconv.ParseFloat: parsing "x": invalid syntax`},
		{reclaim: map[string]string{"memory.available": "x%"}, kind: ErrBadValue, msg: `strconv.ParseFloat: parsing "x": invalid syntax`},
		{reclaim: map[string]string{"memory.available": "abc"}, kind: ErrBadValue,
			msg: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
		{hard: map[string]string{"nodefs.available": "101%"}, kind: ErrPercentageOutOfRange, msg: "eviction percentage threshold nodefs.available must be <= 100%: 101%"},
		{hard: map[string]string{"nodefs.available": "-1%"}, kind: ErrPercentageOutOfRange, msg: "eviction percentage threshold nodefs.available must be >= 0%: -1%"},
		{hard: map[string]string{"memory.available": "0"}, kind: ErrThresholdNotPositive, msg: "eviction threshold memory.available must be positive: 0"},
		{hard: map[string]string{"memory.available": "-1Mi"}, kind: ErrThresholdNotPositive, msg: "eviction threshold memory.available must be positive: -1Mi"},
		{reclaim: map[string]string{"nodefs.available": "0%"}, kind: ErrMinReclaimNotPositive, msg: "eviction percentage minimum reclaim nodefs.available must be positive: 0%"},
		{reclaim: map[string]string{"memory.available": "-1Mi"}, kind: ErrNegativeMinReclaim, msg: "negative eviction minimum reclaim specified for memory.available"},
		{grace: map[string]string{"memory.available": "soon"}, kind: ErrBadDuration, msg: `time: invalid duration "soon"`},
		{grace: map[string]string{"memory.available": "-1m"}, kind: ErrNegativeGracePeriod, msg: "invalid eviction grace period specified: -1m, must be a positive value"},
		{soft: map[string]string{"memory.available": "1Gi"}, kind: ErrMissingGracePeriod, msg: "grace period must be specified for the soft eviction threshold memory.available"},
	} {
		_, err := ParseThresholdConfig(nil, tc.hard, tc.soft, tc.grace, tc.reclaim)
		if err == nil {
			t.Errorf("%+v: no error", tc)
			continue
		}
		if got := KindOf(err); got != tc.kind {
			t.Errorf("%v: kind %v, want %v", err, got, tc.kind)
		}
		if !errors.Is(err, &Error{Kind: tc.kind}) {
			t.Errorf("%v: errors.Is(err, &Error{Kind: %v}) is false", err, tc.kind)
		}
		if err.Error() != tc.msg {
			t.Errorf("message %q, want the kubelet's %q", err, tc.msg)
		}
	}
	if KindOf(errors.New("x")) != ErrOther || KindOf(nil) != ErrOther {
		t.Error("a plain error or nil has a kind")
	}
}

// TestFeatureGates: a gate the kubelet does not know is an error in
// component-base's wording, naming the field; a known gate that does not
// change eviction is accepted, as the kubelet accepts it.
func TestFeatureGates(t *testing.T) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{"MemoryQoS": true, "AllAlpha": false, "NoSuchGate": true, "AnotherUnknown": false}}
	_, err := ConfigFromKubelet(kc)
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *FieldError", err)
	}
	// The kubelet stops at the first unknown name; evictd's first is in sorted order.
	if fe.Field != "featureGates.AnotherUnknown" || fe.Value != "false" || fe.Err.Error() != "unrecognized feature gate: AnotherUnknown" {
		t.Errorf("got %s = %q: %v", fe.Field, fe.Value, fe.Err)
	}
	if KindOf(err) != ErrUnrecognizedFeatureGate {
		t.Errorf("kind %v", KindOf(err))
	}
	delete(kc.FeatureGates, "NoSuchGate")
	delete(kc.FeatureGates, "AnotherUnknown")
	kc.FeatureGates["PodLevelResources"] = false
	cfg, err := ConfigFromKubelet(kc)
	if err != nil {
		t.Fatalf("known gates refused: %v", err)
	}
	if cfg.Features.PodLevelResources {
		t.Error("PodLevelResources=false not applied")
	}
	for _, name := range []string{"KubeletSeparateDiskGC", "PodLevelResources", "PodLevelResourcesFixKubeletQOSClass",
		"InPlacePodVerticalScalingMemoryBackedVolumes", "TaintTolerationComparisonOperators", "MemoryQoS", "AllAlpha", "AllBeta",
		"NativeHistograms", "ControllerManagerReleaseLeaderElectionLockOnExit", "LoggingBetaOptions"} {
		if CheckFeatureGate(name) != nil {
			t.Errorf("%s is a kubelet v1.37.2 gate but is refused", name)
		}
	}
	for _, name := range []string{"", "kubeletSeparateDiskGC", "KubeletSeparateDiskGC ", "NoSuchGate"} {
		if CheckFeatureGate(name) == nil {
			t.Errorf("%q accepted", name)
		}
	}
}
