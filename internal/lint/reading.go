package lint

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/suggest"
)

// The reading rules turn what reading the configuration accepted without
// a word into findings: the kubelet accepts such a file (it decodes
// leniently), so they are warnings, and every other rule still runs on what
// it reads.

func ruleUnknownField(in *Input) []Finding {
	var out []Finding
	for _, le := range readingErrors(in, load.ErrUnknownField) {
		out = append(out, Finding{Severity: SeverityWarning, Field: le.Field, Message: "unknown field in " + le.File,
			Why: "the kubelet's strict decoding fails; it then decodes leniently, logs \"Using lenient decoding as strict decoding failed\" and ignores the field: the setting has no effect (often a typo)",
			Fix: fieldFix(le.Field)})
	}
	for _, le := range readingErrors(in, kubeletconfig.ErrDropInUnknownField) {
		out = append(out, Finding{Severity: SeverityWarning, Field: le.Field, Message: "unknown field in the drop-in " + le.File,
			Why: "the kubelet merges drop-ins as JSON and decodes the result leniently, without a word: the setting has no effect (often a typo)",
			Fix: fieldFix(le.Field)})
	}
	return out
}

func ruleDuplicateKey(in *Input) []Finding {
	var out []Finding
	for _, le := range readingErrors(in, load.ErrDuplicateKey) {
		out = append(out, Finding{Severity: SeverityWarning, Field: le.Field, Value: le.Value, Message: "duplicate key in " + le.File,
			Why: "the kubelet's lenient fallback keeps only the last value, silently",
			Fix: "keep one entry per key"})
	}
	return out
}

func ruleDropInFieldCase(in *Input) []Finding {
	var out []Finding
	for _, le := range readingErrors(in, kubeletconfig.ErrFieldCase) {
		out = append(out, Finding{Severity: SeverityWarning, Field: le.Field,
			Message: "the drop-in " + le.File + " spells the field " + le.Value + " in another case",
			Why: "the kubelet decodes the merged drop-ins with encoding/json, which matches field names case-insensitively: this key applies where nothing else sets " +
				le.Value + ", and where something does, the spelling that sorts last wins",
			Fix: "write " + le.Value})
	}
	return out
}

func ruleMergeDefaultsInDropIn(in *Input) []Finding {
	var out []Finding
	for _, le := range readingErrors(in, kubeletconfig.ErrMergeDefaultsInDropIn) {
		out = append(out, Finding{Severity: SeverityWarning, Field: le.Field, Value: le.Value,
			Message: "mergeDefaultEvictionSettings in the drop-in " + le.File + " has no effect",
			Why:     "the kubelet merges the default evictionHard thresholds while it loads the config file, before any drop-in; a drop-in's evictionHard is merged key by key over that map instead",
			Fix:     "set mergeDefaultEvictionSettings in the config file (--config), or list the thresholds in the drop-in"})
	}
	return out
}

func ruleDropInSkipped(in *Input) []Finding {
	var out []Finding
	for _, p := range in.Skipped {
		out = append(out, Finding{Severity: SeverityInfo, Field: p,
			Message: "the kubelet skips this file of its --config-dir",
			Why:     "only files whose name ends in .conf are drop-ins; anything else in the directory (and below it) is ignored",
			Fix:     "rename it to end in .conf if it is meant to apply"})
	}
	return out
}

// readingErrors are the reading warnings with cause.
func readingErrors(in *Input, cause error) []*load.Error {
	var out []*load.Error
	for _, w := range in.Reading {
		var le *load.Error
		if errors.As(w, &le) && errors.Is(w, cause) {
			out = append(out, le)
		}
	}
	return out
}

// fieldFix suggests the field an unknown one may be a typo of.
func fieldFix(field string) string {
	fix := "correct the field name (fields are case-sensitive, e.g. evictionHard) or remove it"
	if strings.ContainsAny(field, ".[") {
		return fix
	}
	if near := suggest.Near(field, configFieldNames()); len(near) > 0 {
		return "did you mean " + strings.Join(near, " or ") + "? " + fix
	}
	return fix
}

func configFieldNames() []string {
	var names []string
	t := reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{})
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// generatedFileMinZeroDurations: a file that writes at least this many of
// kubeadmZeroDurations as 0s besides evictionPressureTransitionPeriod was
// serialized from defaults (kubeadm marshals the KubeletConfiguration it
// builds, and encoding/json writes a zero metav1.Duration, a struct, as 0s
// despite omitempty: 13 durations besides this one in v1.37's type); a
// hand-written file names a duration to set it.
const generatedFileMinZeroDurations = 3

// kubeadmZeroDurations are the KubeletConfiguration's duration fields but
// evictionPressureTransitionPeriod: those kubeadm's generated
// /var/lib/kubelet/config.yaml writes as 0s when it leaves them unset.
var kubeadmZeroDurations = []string{
	"syncFrequency", "fileCheckFrequency", "httpCheckFrequency", "nodeStatusUpdateFrequency", "nodeStatusReportFrequency",
	"imageMinimumGCAge", "imageMaximumGCAge", "volumeStatsAggPeriod", "runtimeRequestTimeout", "streamingConnectionIdleTimeout",
	"cpuManagerReconcilePeriod", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods",
}

// generatedDurations counts the kubeadmZeroDurations written as 0s.
func generatedDurations(in *Input) int {
	js, err := json.Marshal(in.Config)
	if err != nil {
		return 0
	}
	var fields map[string]any
	_ = json.Unmarshal(js, &fields)
	n := 0
	for _, name := range kubeadmZeroDurations {
		if in.Present[name] && fields[name] == "0s" {
			n++
		}
	}
	return n
}
