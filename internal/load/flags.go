package load

import (
	"fmt"
	"github.com/spf13/pflag"
	"time"

	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Kubelet eviction flag names, exactly as the kubelet spells them.
const (
	FlagEvictionHard                     = "eviction-hard"
	FlagEvictionSoft                     = "eviction-soft"
	FlagEvictionSoftGracePeriod          = "eviction-soft-grace-period"
	FlagEvictionMinimumReclaim           = "eviction-minimum-reclaim"
	FlagEvictionMaxPodGracePeriod        = "eviction-max-pod-grace-period"
	FlagEvictionPressureTransitionPeriod = "eviction-pressure-transition-period"
)

// EvictionFlags holds the kubelet's six eviction flags as given on a command
// line. The maps are parsed by the kubelet's own flag types
// (k8s.io/component-base/cli/flag), so the syntax and the quirks are the
// kubelet's: "signal<value" pairs separated by commas for --eviction-hard and
// --eviction-soft, "signal=value" pairs for the grace periods and minimum
// reclaims, spaces around keys and values trimmed, a repeated flag adds to
// the pairs of the earlier ones, a repeated key keeps the last value.
type EvictionFlags struct {
	Hard                     map[string]string
	Soft                     map[string]string
	SoftGracePeriod          map[string]string
	MinimumReclaim           map[string]string
	MaxPodGracePeriod        int32
	PressureTransitionPeriod time.Duration

	fs *pflag.FlagSet
}

// RegisterEvictionFlags adds the kubelet's eviction flags to fs.
func RegisterEvictionFlags(fs *pflag.FlagSet) *EvictionFlags {
	f := &EvictionFlags{fs: fs}
	fs.Var(&mapFlag{v: cliflag.NewLangleSeparatedMapStringString(&f.Hard), typ: "SIGNAL<QTY,..."}, FlagEvictionHard,
		"kubelet flag: hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10%; replaces the config file's evictionHard")
	fs.Var(&mapFlag{v: cliflag.NewLangleSeparatedMapStringString(&f.Soft), typ: "SIGNAL<QTY,..."}, FlagEvictionSoft,
		"kubelet flag: soft eviction thresholds, e.g. memory.available<1.5Gi; replaces evictionSoft")
	fs.Var(&mapFlag{v: cliflag.NewMapStringString(&f.SoftGracePeriod), typ: "SIGNAL=DURATION,..."}, FlagEvictionSoftGracePeriod,
		"kubelet flag: soft threshold grace periods, e.g. memory.available=1m30s; replaces evictionSoftGracePeriod")
	fs.Var(&mapFlag{v: cliflag.NewMapStringString(&f.MinimumReclaim), typ: "SIGNAL=QTY,..."}, FlagEvictionMinimumReclaim,
		"kubelet flag: minimum reclaims, e.g. imagefs.available=2Gi; replaces evictionMinimumReclaim")
	fs.Int32Var(&f.MaxPodGracePeriod, FlagEvictionMaxPodGracePeriod, 0,
		"kubelet flag: maximum grace period in seconds for soft evictions; overrides evictionMaxPodGracePeriod")
	fs.DurationVar(&f.PressureTransitionPeriod, FlagEvictionPressureTransitionPeriod, 0,
		"kubelet flag: how long a pressure condition is held after the last threshold met; overrides evictionPressureTransitionPeriod")
	return f
}

// Set reports which eviction flags were given on the command line (after
// fs.Parse), by their kubelet names.
func (f *EvictionFlags) Set() []string {
	var names []string
	if f.fs == nil {
		return nil
	}
	f.fs.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case FlagEvictionHard, FlagEvictionSoft, FlagEvictionSoftGracePeriod, FlagEvictionMinimumReclaim,
			FlagEvictionMaxPodGracePeriod, FlagEvictionPressureTransitionPeriod:
			names = append(names, fl.Name)
		}
	})
	return names
}

// Apply lays the flags given on the command line over kc, as the kubelet
// does when it re-parses its command line over the loaded config file
// (cmd/kubelet/app/server.go: kubeletConfigFlagPrecedence): a given map flag
// replaces the file's map entirely, a given scalar flag overrides the field,
// flags not given leave the file alone.
//
// One ordering consequence is kept: the kubelet merges the default
// evictionHard into the file's map (mergeDefaultEvictionSettings) before the
// flags are re-parsed, so a map given by --eviction-hard is never merged with
// the defaults. Apply therefore sets mergeDefaultEvictionSettings to false
// when --eviction-hard is given, so that policy.ConfigFromKubelet decides
// exactly as the kubelet did.
func (f *EvictionFlags) Apply(kc *kubeletconfigv1beta1.KubeletConfiguration) error {
	if kc == nil {
		return fmt.Errorf("load: Apply: nil KubeletConfiguration")
	}
	for _, name := range f.Set() {
		switch name {
		case FlagEvictionHard:
			kc.EvictionHard = nonNil(f.Hard)
			no := false
			kc.MergeDefaultEvictionSettings = &no
		case FlagEvictionSoft:
			kc.EvictionSoft = nonNil(f.Soft)
		case FlagEvictionSoftGracePeriod:
			kc.EvictionSoftGracePeriod = nonNil(f.SoftGracePeriod)
		case FlagEvictionMinimumReclaim:
			kc.EvictionMinimumReclaim = nonNil(f.MinimumReclaim)
		case FlagEvictionMaxPodGracePeriod:
			kc.EvictionMaxPodGracePeriod = f.MaxPodGracePeriod
		case FlagEvictionPressureTransitionPeriod:
			kc.EvictionPressureTransitionPeriod.Duration = f.PressureTransitionPeriod
		}
	}
	return nil
}

// nonNil keeps "given but empty" (--eviction-hard=) distinguishable from
// "not given": the kubelet's flag types allocate the map on the first Set.
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// mapFlag wraps the kubelet's map flag types for help output: their
// String method dereferences the target map pointer (nil in a zero value),
// and their Type, "mapStringString", says nothing about the syntax; typ is
// the placeholder help shows instead.
type mapFlag struct {
	v interface {
		Set(string) error
		String() string
	}
	typ string
}

func (m *mapFlag) String() string {
	if m == nil || m.v == nil {
		return ""
	}
	return m.v.String()
}

func (m *mapFlag) Set(s string) error { return m.v.Set(s) }
func (m *mapFlag) Type() string       { return m.typ }
