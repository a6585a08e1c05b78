// Package lint checks a kubelet eviction configuration (a KubeletConfiguration
// with the kubelet's eviction flags laid over it) before it reaches a node.
// Errors are the kubelet v1.37.2's own, obtained from internal/policy (which
// parses thresholds exactly as the kubelet does) and internal/memqos (its
// MemoryQoS validation), so their wording is the kubelet's. Warnings and
// infos are the pitfalls: settings the kubelet accepts without a word that
// do something other than what they look like.
package lint

import (
	"sort"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Severity of a finding.
type Severity string

const (
	// SeverityError: the kubelet refuses to start (or, for a field it
	// decodes leniently, silently ignores the setting).
	SeverityError Severity = "error"
	// SeverityWarning: accepted, but it does something other than what it
	// looks like, or weakens eviction.
	SeverityWarning Severity = "warning"
	// SeverityInfo: worth knowing; usually intended.
	SeverityInfo Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// Finding is one problem: what, where, why it matters and how to fix it.
type Finding struct {
	Severity Severity `json:"severity"`
	// Rule is a stable identifier, e.g. "partial-eviction-hard".
	Rule string `json:"rule"`
	// Field is the path in the KubeletConfiguration (or the kubelet flag,
	// "--eviction-hard", when the value came from a flag).
	Field string `json:"field"`
	Value string `json:"value"`
	// Message says what is wrong; for errors it is the kubelet's own text.
	Message string `json:"message"`
	Why     string `json:"why"`
	Fix     string `json:"fix"`
}

// Layout is the node's filesystem layout, when the user knows it.
type Layout string

const (
	LayoutUnknown Layout = ""
	LayoutSingle  Layout = "single"  // images and containers on the node filesystem
	LayoutImageFs Layout = "imagefs" // a dedicated image filesystem
	LayoutSplit   Layout = "split"   // imagefs for images, a separate containerfs
)

// Input is what is linted.
type Input struct {
	// Config is the file's KubeletConfiguration with the eviction flags
	// already applied (load.EvictionFlags.Apply). Nil is an empty config.
	Config *kubeletconfigv1beta1.KubeletConfiguration
	// ConfigFile is the file's name; "" means the kubelet runs without
	// --config, with flags only.
	ConfigFile string
	// Present holds the top-level fields written in the file or its
	// drop-ins (kubeletconfig.Config.Present), to tell "0s" from absent.
	Present map[string]bool
	// Configz: the configuration is a /configz dump, the kubelet's final
	// one (defaulted; drop-ins and flags merged), not a file it loads.
	Configz bool
	// Reading are what reading the configuration accepted without a word
	// (kubeletconfig.Config.Warnings): unknown fields, duplicate keys,
	// drop-in quirks. Skipped are the drop-in directory's files the
	// kubelet skips (not *.conf).
	Reading []error
	Skipped []string
	// FlagsSet are the kubelet eviction flags given (without "--").
	FlagsSet []string
	// CgroupVersion of the node: 1, 2, or 0 when unknown.
	CgroupVersion int
	// Layout of the node's filesystems, when known.
	Layout Layout
}

func (in *Input) flagSet(name string) bool {
	for _, f := range in.FlagsSet {
		if f == name {
			return true
		}
	}
	return false
}

// field names a map field, with the flag when the map came from one.
func (in *Input) field(mapField, flag, key string) string {
	base := mapField
	if in.flagSet(flag) {
		base = "--" + flag
	}
	if key == "" {
		return base
	}
	return base + "." + key
}

// Check runs every rule and returns the findings, errors first, then
// warnings, then infos, each group by field.
func Check(in Input) []Finding {
	if in.Config == nil {
		in.Config = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	var out []Finding
	for _, r := range rules {
		for _, f := range r.check(&in) {
			f.Rule = r.name
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := out[i].Severity.rank(), out[j].Severity.rank(); a != b {
			return a < b
		}
		return out[i].Field < out[j].Field
	})
	return out
}

// Exit codes of `evictd lint`.
const (
	ExitClean    = 0
	ExitWarnings = 1 // warnings (or infos) only
	ExitErrors   = 2
)

// ExitCode is 2 with any error, 1 with only warnings, else 0. Infos alone
// do not fail a lint.
func ExitCode(findings []Finding) int {
	code := ExitClean
	for _, f := range findings {
		switch f.Severity {
		case SeverityError:
			return ExitErrors
		case SeverityWarning:
			code = ExitWarnings
		}
	}
	return code
}

// Counts returns how many findings have each severity.
func Counts(findings []Finding) (errors, warnings, infos int) {
	for _, f := range findings {
		switch f.Severity {
		case SeverityError:
			errors++
		case SeverityWarning:
			warnings++
		default:
			infos++
		}
	}
	return
}

type rule struct {
	name  string
	check func(in *Input) []Finding
}

// Rules lists the rule identifiers, for documentation and tests.
func Rules() []string {
	names := make([]string, 0, len(rules))
	for _, r := range rules {
		names = append(names, r.name)
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinQuoted(list []string) string {
	return strings.Join(list, ", ")
}
