package lint

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/policy"
)

// Kubelet flag names (without "--") as internal/load registers them.
const (
	flagHard       = "eviction-hard"
	flagSoft       = "eviction-soft"
	flagGrace      = "eviction-soft-grace-period"
	flagReclaim    = "eviction-minimum-reclaim"
	flagMaxGrace   = "eviction-max-pod-grace-period"
	flagTransition = "eviction-pressure-transition-period"
)

// housekeepingInterval is the kubelet's eviction monitoring interval (10 s):
// how often synchronize runs without kernel notifications.
const housekeepingInterval = 10 * time.Second

var rules = []rule{
	{"kubelet-config-identity", ruleIdentity},
	{"unknown-field", ruleUnknownField},
	{"duplicate-key", ruleDuplicateKey},
	{"drop-in-field-case", ruleDropInFieldCase},
	{"merge-defaults-in-drop-in", ruleMergeDefaultsInDropIn},
	{"drop-in-skipped", ruleDropInSkipped},
	{"kubelet-threshold-error", ruleThresholdErrors},
	{"kubelet-memory-qos-error", ruleMemoryQoSErrors},
	{"kubelet-feature-gate-error", ruleFeatureGateErrors},
	{"no-config-no-default-thresholds", ruleFlagsOnlyNoDefaults},
	{"partial-eviction-hard", rulePartialEvictionHard},
	{"signal-disabled-by-0-or-100-percent", ruleDisabledSignal},
	{"percentage-not-dropped", rulePercentageNotDropped},
	{"soft-grace-zero", ruleSoftGraceZero},
	{"soft-not-above-hard", ruleSoftNotAboveHard},
	{"threshold-above-any-capacity", ruleAboveAnyCapacity},
	{"quantity-below-one-unit", ruleSubUnit},
	{"threshold-suspiciously-small", ruleSuspiciouslySmall},
	{"grace-period-without-soft-threshold", ruleOrphanGrace},
	{"minimum-reclaim-without-threshold", ruleOrphanReclaim},
	{"minimum-reclaim-out-of-proportion", ruleReclaimOutOfProportion},
	{"containerfs-threshold-overridden", ruleContainerFs},
	{"max-pod-grace-period", ruleMaxPodGrace},
	{"pressure-transition-period", ruleTransitionPeriod},
	{"hard-memory-not-covered-by-reservation", ruleReservation},
	{"kernel-memcg-notification-on-cgroup-v2", ruleMemcgNotification},
	{"imagefs-thresholds-on-single-filesystem", ruleImageFsSingle},
	{"local-storage-capacity-isolation-off", ruleLocalStorage},
	{"separate-disk-gc-off-with-split-filesystem", ruleSeparateDiskGC},
	{"flag-replaces-file-map", ruleFlagReplacesFile},
}

// --- errors -------------------------------------------------------------

func ruleIdentity(in *Input) []Finding {
	if in.ConfigFile == "" || in.Configz {
		return nil
	}
	kc := in.Config
	var missing []string
	if kc.Kind == "" {
		missing = append(missing, "kind: KubeletConfiguration")
	}
	if kc.APIVersion == "" {
		missing = append(missing, "apiVersion: kubelet.config.k8s.io/v1beta1")
	}
	if len(missing) == 0 {
		return nil
	}
	field, what := "kind", "Kind"
	if kc.Kind != "" {
		field, what = "apiVersion", "apiVersion"
	}
	return []Finding{{
		Severity: SeverityError, Field: field,
		Message: fmt.Sprintf("failed to decode: Object '%s' is missing", what),
		Why:     "the kubelet's config loader needs both to pick the decoder and refuses to start without them",
		Fix:     "add " + strings.Join(missing, " and ") + " at the top of the file",
	}}
}

// ruleThresholdErrors reports every entry the kubelet's ParseThresholdConfig
// rejects (the kubelet stops at the first; lint shows them all), each with
// the kubelet's wording, by parsing the entries one at a time with
// internal/policy's parser.
func ruleThresholdErrors(in *Input) []Finding {
	kc := in.Config
	var out []Finding
	add := func(field, value string, err error) {
		out = append(out, Finding{Severity: SeverityError, Field: field, Value: value,
			Message: err.Error(), Why: "the kubelet refuses to start with this value", Fix: thresholdFix(err)})
	}
	for _, k := range sortedKeys(kc.EvictionHard) {
		if _, err := policy.ParseThresholdConfig(nil, map[string]string{k: kc.EvictionHard[k]}, nil, nil, nil); err != nil {
			add(in.field("evictionHard", flagHard, k), kc.EvictionHard[k], err)
		}
	}
	for _, k := range sortedKeys(kc.EvictionSoft) {
		v := kc.EvictionSoft[k]
		if _, err := policy.ParseThresholdConfig(nil, nil, map[string]string{k: v}, map[string]string{k: "1m"}, nil); err != nil {
			add(in.field("evictionSoft", flagSoft, k), v, err)
			continue
		}
		if _, ok := kc.EvictionSoftGracePeriod[k]; !ok {
			_, err := policy.ParseThresholdConfig(nil, nil, map[string]string{k: v}, nil, nil)
			if err == nil {
				err = fmt.Errorf("grace period must be specified for the soft eviction threshold %s", k)
			}
			out = append(out, Finding{Severity: SeverityError, Field: in.field("evictionSoftGracePeriod", flagGrace, k), Value: "",
				Message: err.Error(), Why: "every soft threshold needs a grace period; the kubelet refuses to start without one",
				Fix: fmt.Sprintf("add evictionSoftGracePeriod.%s, e.g. 1m30s (0s would make it a hard threshold)", k)})
		}
	}
	for _, k := range sortedKeys(kc.EvictionSoftGracePeriod) {
		if _, err := policy.ParseThresholdConfig(nil, nil, nil, map[string]string{k: kc.EvictionSoftGracePeriod[k]}, nil); err != nil {
			add(in.field("evictionSoftGracePeriod", flagGrace, k), kc.EvictionSoftGracePeriod[k], err)
		}
	}
	for _, k := range sortedKeys(kc.EvictionMinimumReclaim) {
		if _, err := policy.ParseThresholdConfig(nil, nil, nil, nil, map[string]string{k: kc.EvictionMinimumReclaim[k]}); err != nil {
			add(in.field("evictionMinimumReclaim", flagReclaim, k), kc.EvictionMinimumReclaim[k], err)
		}
	}
	// Safety net: anything the whole-config path rejects that the entry by
	// entry checks did not (there should be nothing).
	if len(out) == 0 {
		if _, err := policy.ConfigFromKubelet(kc); err != nil && policy.KindOf(err) != policy.ErrUnrecognizedFeatureGate {
			f := Finding{Severity: SeverityError, Message: err.Error(), Why: "the kubelet refuses to start with this configuration", Fix: thresholdFix(err)}
			var fe *policy.FieldError
			if errors.As(err, &fe) {
				f.Field, f.Value, f.Message = fe.Field, fe.Value, fe.Err.Error()
			}
			out = append(out, f)
		}
	}
	return out
}

func thresholdFix(err error) string {
	switch policy.KindOf(err) {
	case policy.ErrUnsupportedSignal:
		names := make([]string, 0, len(policy.Signals))
		for _, s := range policy.Signals {
			names = append(names, string(s))
		}
		return "use one of: " + strings.Join(names, ", ")
	case policy.ErrMinReclaimNotPositive:
		return "use a positive percentage or a quantity (0 is allowed as a quantity, e.g. \"0Mi\")"
	case policy.ErrThresholdNotPositive:
		return "use a positive quantity such as 100Mi, or \"0%\" to disable the signal"
	case policy.ErrPercentageOutOfRange:
		return "use a percentage between 0% and 100%"
	case policy.ErrNegativeGracePeriod:
		return "use a non-negative Go duration such as 30s, 1m30s or 5m"
	case policy.ErrMissingGracePeriod:
		return "add the grace period, e.g. 1m30s (0s would make it a hard threshold)"
	case policy.ErrNegativeMinReclaim:
		return "use a non-negative quantity such as 500Mi"
	case policy.ErrBadValue:
		return "write a quantity like 100Mi or 1Gi, or a percentage like 10%"
	case policy.ErrBadDuration:
		return "write a Go duration such as 90s or 1m30s"
	case policy.ErrUnrecognizedFeatureGate:
		return "remove it, or check its spelling against the kubelet v1.37.2's feature gates"
	}
	return "correct the value"
}

// ruleFeatureGateErrors reports every featureGates name the kubelet does not
// know (the kubelet stops at the first), with its wording.
func ruleFeatureGateErrors(in *Input) []Finding {
	var out []Finding
	for _, k := range sortedKeys(in.Config.FeatureGates) {
		if err := policy.CheckFeatureGate(k); err != nil {
			out = append(out, Finding{Severity: SeverityError, Field: "featureGates." + k, Value: fmt.Sprint(in.Config.FeatureGates[k]),
				Message: err.Error(), Why: "the kubelet refuses to start with a feature gate it does not know", Fix: thresholdFix(err)})
		}
	}
	return out
}

func ruleMemoryQoSErrors(in *Input) []Finding {
	_, err := memqos.FromKubelet(in.Config)
	if err == nil {
		return nil
	}
	f := Finding{Severity: SeverityError, Message: err.Error(), Why: "the kubelet's configuration validation fails and it does not start"}
	switch policy.KindOf(err) {
	case policy.ErrThrottlingFactorWithoutMemoryQoS:
		f.Field, f.Value = "memoryThrottlingFactor", fmt.Sprint(*in.Config.MemoryThrottlingFactor)
		f.Fix = "remove memoryThrottlingFactor, or enable the MemoryQoS feature gate"
	case policy.ErrThrottlingFactorOutOfRange:
		f.Field, f.Value = "memoryThrottlingFactor", fmt.Sprint(*in.Config.MemoryThrottlingFactor)
		f.Fix = "use a factor in (0, 1], e.g. 0.9"
	case policy.ErrReservationPolicyNeedsMemoryQoS:
		f.Field, f.Value = "memoryReservationPolicy", string(in.Config.MemoryReservationPolicy)
		f.Fix = "enable the MemoryQoS feature gate or set memoryReservationPolicy: None"
	default:
		f.Field, f.Value = "memoryReservationPolicy", string(in.Config.MemoryReservationPolicy)
		f.Fix = "use None or TieredReservation"
	}
	return []Finding{f}
}

// --- warnings -------------------------------------------------------------

func ruleFlagsOnlyNoDefaults(in *Input) []Finding {
	if in.ConfigFile != "" || in.Config.EvictionHard != nil {
		return nil
	}
	return []Finding{{
		Severity: SeverityWarning, Field: "--eviction-hard",
		Message: "no config file and no --eviction-hard: the kubelet has no hard eviction thresholds",
		Why: "the kubelet adds the default evictionHard (memory.available<100Mi, nodefs.available<10%, ...) only " +
			"when it loads a config file; a kubelet started with flags alone evicts on nothing but soft thresholds",
		Fix: "pass --eviction-hard with the thresholds you want, e.g. " +
			"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%",
	}}
}

func rulePartialEvictionHard(in *Input) []Finding {
	kc := in.Config
	if kc.EvictionHard == nil {
		return nil
	}
	if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
		return nil
	}
	defaults := policy.DefaultEvictionHard()
	var missing []string
	for _, k := range sortedKeys(defaults) {
		if _, ok := kc.EvictionHard[k]; !ok {
			missing = append(missing, k+"<"+defaults[k])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	field := in.field("evictionHard", flagHard, "")
	fix := "list every threshold you want, or set mergeDefaultEvictionSettings: true to keep the defaults you do not override"
	if in.flagSet(flagHard) {
		fix = "list every threshold you want in --eviction-hard (mergeDefaultEvictionSettings does not apply to the flag: " +
			"the kubelet merges before it re-applies its flags)"
	}
	msg := "evictionHard replaces the defaults: no hard threshold for " + joinQuoted(signalsOf(missing))
	why := "a set evictionHard is used as is, without the defaults " + joinQuoted(missing) + "; those resources can run out with no eviction"
	if in.ConfigFile == "" {
		msg = "no hard threshold for " + joinQuoted(signalsOf(missing))
		why = "a kubelet without a config file gets no default thresholds (" + joinQuoted(missing) + "); those resources can run out with no eviction"
	}
	if len(kc.EvictionHard) == 0 {
		msg = "evictionHard is empty: the kubelet has no hard eviction thresholds at all"
	}
	return []Finding{{
		Severity: SeverityWarning, Field: field, Value: formatMap(kc.EvictionHard, "<"),
		Message: msg, Why: why, Fix: fix,
	}}
}

func signalsOf(pairs []string) []string {
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i], _, _ = strings.Cut(p, "<")
	}
	return out
}

func ruleDisabledSignal(in *Input) []Finding {
	var out []Finding
	check := func(mapField, flag string, m map[string]string) {
		for _, k := range sortedKeys(m) {
			if v := m[k]; v == "0%" || v == "100%" {
				out = append(out, Finding{
					Severity: SeverityWarning, Field: in.field(mapField, flag, k), Value: v,
					Message: "this threshold is silently dropped: " + k + " has no " + strings.TrimPrefix(mapField, "eviction") + " threshold",
					Why:     "the kubelet discards a threshold written exactly as 0% or 100% (the documented way to disable a signal); nothing is logged",
					Fix:     "if you meant to disable it, remove the entry (or keep it and note why); otherwise write a real value such as 10% or 500Mi",
				})
			}
		}
	}
	check("evictionHard", flagHard, in.Config.EvictionHard)
	check("evictionSoft", flagSoft, in.Config.EvictionSoft)
	return out
}

func rulePercentageNotDropped(in *Input) []Finding {
	var out []Finding
	check := func(mapField, flag string, m map[string]string) {
		for _, k := range sortedKeys(m) {
			v := m[k]
			if !strings.HasSuffix(v, "%") || v == "0%" || v == "100%" {
				continue
			}
			p, err := policy.ParsePercentage(v)
			if err != nil {
				continue
			}
			switch {
			case p == 0:
				out = append(out, Finding{Severity: SeverityWarning, Field: in.field(mapField, flag, k), Value: v,
					Message: "a zero percentage that is not written \"0%\" is kept, and is never met",
					Why:     "only the exact text 0% disables a signal; " + v + " becomes a threshold of 0 that fires only when less than nothing is available",
					Fix:     "write \"0%\" to disable the signal, or a real value"})
			case p == 1:
				out = append(out, Finding{Severity: SeverityWarning, Field: in.field(mapField, flag, k), Value: v,
					Message: "a 100% threshold that is not written \"100%\" is kept, and is always met",
					Why:     "only the exact text 100% disables a signal; " + v + " means available < capacity, which always holds: permanent pressure and evictions",
					Fix:     "write \"100%\" to disable the signal, or a real value such as 10%"})
			}
		}
	}
	check("evictionHard", flagHard, in.Config.EvictionHard)
	check("evictionSoft", flagSoft, in.Config.EvictionSoft)
	return out
}

func ruleSoftGraceZero(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	for _, k := range sortedKeys(kc.EvictionSoft) {
		g, ok := kc.EvictionSoftGracePeriod[k]
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(g); err == nil && d == 0 {
			out = append(out, Finding{Severity: SeverityWarning, Field: in.field("evictionSoftGracePeriod", flagGrace, k), Value: g,
				Message: "a soft threshold with a 0s grace period is a hard threshold",
				Why:     "the kubelet tells hard from soft by the grace period alone: this one evicts at once with the hard-eviction grace period (1 s; the runtime raises it to 2 s), ignoring evictionMaxPodGracePeriod",
				Fix:     "give it a grace period (e.g. 1m), or move it to evictionHard to say what it does"})
		}
	}
	return out
}

func ruleSoftNotAboveHard(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	hard := in.effectiveHard()
	for _, k := range sortedKeys(kc.EvictionSoft) {
		hv, ok := hard[k]
		if !ok {
			continue
		}
		sv := kc.EvictionSoft[k]
		cmp, ok := compareThresholdValues(sv, hv)
		if !ok || cmp > 0 {
			continue
		}
		out = append(out, Finding{Severity: SeverityWarning, Field: in.field("evictionSoft", flagSoft, k), Value: sv,
			Message: fmt.Sprintf("the soft threshold is not above the hard one (%s<%s)", k, hv),
			Why:     "both fire when available drops below them, so the hard threshold is met first (or together) and the soft one, with its grace period, never decides",
			Fix:     "set the soft threshold above the hard one, e.g. hard 100Mi, soft 500Mi"})
	}
	return out
}

func ruleOrphanGrace(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	for _, k := range sortedKeys(kc.EvictionSoftGracePeriod) {
		if _, ok := kc.EvictionSoft[k]; ok || !policy.ValidSignal(policy.Signal(k)) {
			continue
		}
		out = append(out, Finding{Severity: SeverityInfo, Field: in.field("evictionSoftGracePeriod", flagGrace, k), Value: kc.EvictionSoftGracePeriod[k],
			Message: "grace period for a signal without a soft threshold is ignored",
			Why:     "grace periods apply only to evictionSoft; hard thresholds act at once",
			Fix:     "add evictionSoft." + k + " or remove the grace period"})
	}
	return out
}

func ruleOrphanReclaim(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	hard := in.effectiveHard()
	for _, k := range sortedKeys(kc.EvictionMinimumReclaim) {
		if !policy.ValidSignal(policy.Signal(k)) {
			continue
		}
		if usable(hard[k]) || usable(kc.EvictionSoft[k]) {
			continue
		}
		if _, err := policy.ParseThresholdConfig(nil, nil, nil, nil, map[string]string{k: kc.EvictionMinimumReclaim[k]}); err != nil {
			continue // an invalid value is already an error
		}
		if k == string(policy.SignalContainerFsAvailable) || k == string(policy.SignalContainerFsInodesFree) {
			continue // containerfs thresholds are derived; their reclaim is reported by containerfs-threshold-overridden
		}
		out = append(out, Finding{Severity: SeverityInfo, Field: in.field("evictionMinimumReclaim", flagReclaim, k), Value: kc.EvictionMinimumReclaim[k],
			Message: "minimum reclaim for a signal without a threshold is ignored",
			Why:     "a minimum reclaim only extends an eviction that a threshold on the same signal started",
			Fix:     "add a threshold for " + k + " or remove the minimum reclaim"})
	}
	return out
}

// usable: a threshold value that yields a threshold (not absent, not dropped).
func usable(v string) bool { return v != "" && v != "0%" && v != "100%" }

func ruleReclaimOutOfProportion(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	hard := in.effectiveHard()
	for _, k := range sortedKeys(kc.EvictionMinimumReclaim) {
		r := kc.EvictionMinimumReclaim[k]
		// Compare with the smaller threshold on the signal: the reclaim is
		// attached to every threshold of the signal.
		var against string
		for _, t := range []string{hard[k], kc.EvictionSoft[k]} {
			if _, ok := compareThresholdValues(t, t); !ok || !usable(t) {
				continue
			}
			if against == "" {
				against = t
			} else if c, ok := compareThresholdValues(t, against); ok && c < 0 {
				against = t
			}
		}
		if against == "" {
			continue
		}
		c, ok := compareThresholdValues(r, against)
		if !ok || c <= 0 {
			continue
		}
		out = append(out, Finding{Severity: SeverityWarning, Field: in.field("evictionMinimumReclaim", flagReclaim, k), Value: r,
			Message: fmt.Sprintf("minimum reclaim %s is larger than the threshold %s<%s it extends", r, k, against),
			Why: "once the threshold is met the kubelet keeps evicting, one pod per cycle, until available is above threshold + reclaim (" +
				against + " + " + r + "): far more pods go than the threshold suggests",
			Fix: "keep the minimum reclaim at or below the threshold, e.g. threshold 500Mi with reclaim 200Mi"})
	}
	return out
}

func ruleContainerFs(in *Input) []Finding {
	var out []Finding
	kc := in.Config
	check := func(mapField, flag string, m map[string]string) {
		for _, k := range sortedKeys(m) {
			if k != string(policy.SignalContainerFsAvailable) && k != string(policy.SignalContainerFsInodesFree) {
				continue
			}
			src := "nodefs (single filesystem or split layout) or imagefs (dedicated imagefs)"
			switch in.Layout {
			case LayoutSingle, LayoutSplit:
				src = "nodefs"
			case LayoutImageFs:
				src = "imagefs"
			}
			out = append(out, Finding{Severity: SeverityWarning, Field: in.field(mapField, flag, k), Value: m[k],
				Message: "containerfs thresholds are overwritten by the kubelet",
				Why:     "on its first synchronize the kubelet replaces every containerfs threshold with a copy of the " + src + " one and logs \"found conflicting containerfs eviction. Ignoring.\"",
				Fix:     "remove it and set the " + strings.Replace(k, "containerfs", "nodefs", 1) + " (or imagefs) threshold instead"})
		}
	}
	check("evictionHard", flagHard, kc.EvictionHard)
	check("evictionSoft", flagSoft, kc.EvictionSoft)
	return out
}

func hasSoftWithGrace(in *Input) bool {
	for k, v := range in.Config.EvictionSoft {
		if !usable(v) {
			continue
		}
		if d, err := time.ParseDuration(in.Config.EvictionSoftGracePeriod[k]); err == nil && d > 0 {
			return true
		}
	}
	return false
}

func ruleMaxPodGrace(in *Input) []Finding {
	m := in.Config.EvictionMaxPodGracePeriod
	if !hasSoftWithGrace(in) || m > 0 {
		return nil
	}
	field := "evictionMaxPodGracePeriod"
	if in.flagSet(flagMaxGrace) {
		field = "--" + flagMaxGrace
	}
	f := Finding{Severity: SeverityWarning, Field: field, Value: fmt.Sprint(m)}
	if m == 0 {
		f.Message = "soft evictions give pods no grace period (evictionMaxPodGracePeriod is 0, the default)"
		f.Why = "a soft eviction uses min(evictionMaxPodGracePeriod, terminationGracePeriodSeconds) = 0: the container runtime's 2 s minimum applies, no gentler than a hard eviction"
	} else {
		f.Message = "a negative evictionMaxPodGracePeriod does not defer to the pod's grace period"
		f.Why = "the flag's help says it does, but v1.37.2 uses min(evictionMaxPodGracePeriod, terminationGracePeriodSeconds), a negative number: containers get the runtime's 2 s minimum"
	}
	f.Fix = "set evictionMaxPodGracePeriod to the longest shutdown you allow under soft pressure, e.g. 60"
	return []Finding{f}
}

func ruleTransitionPeriod(in *Input) []Finding {
	d := in.Config.EvictionPressureTransitionPeriod.Duration
	explicit := in.Present["evictionPressureTransitionPeriod"] || in.flagSet(flagTransition)
	field := "evictionPressureTransitionPeriod"
	if in.flagSet(flagTransition) {
		field = "--" + flagTransition
	}
	switch {
	case explicit && d == 0 && !in.flagSet(flagTransition) && generatedDurations(in) >= generatedFileMinZeroDurations:
		return []Finding{{Severity: SeverityInfo, Field: field, Value: "0s",
			Message: "0s means the default, 5m0s (the file writes every duration it leaves unset as 0s, as kubeadm does)",
			Why:     "the kubelet cannot tell 0 from unset and defaults it; a file serialized from defaults, like kubeadm's /var/lib/kubelet/config.yaml, gets the 5m0s default, which is usually what was meant",
			Fix:     "nothing to do if 5m0s is meant; otherwise set the period you want, e.g. 30s"}}
	case explicit && d == 0:
		return []Finding{{Severity: SeverityWarning, Field: field, Value: "0s",
			Message: "0s means the default, 5m0s",
			Why:     "the kubelet cannot tell 0 from unset and defaults it: node conditions stay 5 minutes after pressure ends (and BestEffort pods are refused meanwhile)",
			Fix:     "use the smallest period you want, e.g. 1s; conditions are recomputed every 10s anyway"}}
	case d < 0:
		return []Finding{{Severity: SeverityWarning, Field: field, Value: d.String(),
			Message: "a negative transition period hides every pressure condition",
			Why:     "a condition is kept while now − last observed < period, which never holds: the node never reports MemoryPressure/DiskPressure/PIDPressure, although it still evicts",
			Fix:     "use a positive period such as 5m"}}
	case d > 0 && d < housekeepingInterval:
		return []Finding{{Severity: SeverityInfo, Field: field, Value: d.String(),
			Message: "a transition period shorter than the 10s monitoring interval",
			Why:     "conditions can clear between two synchronize loops and come back on the next: the node may flap between pressure and no pressure",
			Fix:     "use at least 10s (the default is 5m)"}}
	}
	return nil
}

func ruleReservation(in *Input) []Finding {
	kc := in.Config
	sys, sysOK := kc.SystemReserved["memory"]
	kube, kubeOK := kc.KubeReserved["memory"]
	if !sysOK && !kubeOK {
		return nil
	}
	hard := in.effectiveHard()["memory.available"]
	if !usable(hard) || strings.HasSuffix(hard, "%") {
		return nil
	}
	h, err := resource.ParseQuantity(hard)
	if err != nil {
		return nil
	}
	var reserved resource.Quantity
	for _, v := range []string{sys, kube} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil // reported elsewhere by the kubelet's own validation
		}
		reserved.Add(q)
	}
	if reserved.Cmp(h) > 0 {
		return nil
	}
	field, value := "systemReserved.memory", sys
	if !sysOK {
		field, value = "kubeReserved.memory", kube
	}
	return []Finding{{Severity: SeverityWarning, Field: field, Value: value,
		Message: fmt.Sprintf("systemReserved + kubeReserved memory (%s) does not cover the hard threshold memory.available<%s", reserved.String(), hard),
		Why: "pods may burst up to the kubepods limit, capacity − reserved; then memory.available is reserved − daemons' use, below the threshold " +
			"before system daemons use anything: evictions start while the daemons are still inside their reservation",
		Fix: "reserve the daemons' share plus the threshold, e.g. systemReserved.memory = 1Gi + " + hard + " (the Kubernetes docs' 1.5Gi for 1Gi + 500Mi)"}}
}

func ruleMemcgNotification(in *Input) []Finding {
	if !in.Config.KernelMemcgNotification {
		return nil
	}
	f := Finding{Field: "kernelMemcgNotification", Value: "true",
		Why: "the kubelet's memory threshold notifier uses cgroup v1's cgroup.event_control; on cgroup v2 it is a no-op, so memory pressure is only seen by the 10s polling",
		Fix: "on cgroup v2, rely on polling, or run evictd's agent, which wakes up on memory.events/PSI"}
	switch in.CgroupVersion {
	case 2:
		f.Severity, f.Message = SeverityWarning, "kernelMemcgNotification does nothing on cgroup v2"
	case 1:
		return nil
	default:
		f.Severity, f.Message = SeverityInfo, "kernelMemcgNotification works on cgroup v1 only"
	}
	return []Finding{f}
}

func ruleImageFsSingle(in *Input) []Finding {
	if in.Layout != LayoutSingle {
		return nil
	}
	hard := in.effectiveHard()
	var out []Finding
	for _, pair := range [][2]string{{"imagefs.available", "nodefs.available"}, {"imagefs.inodesFree", "nodefs.inodesFree"}} {
		iv, nv := hard[pair[0]], hard[pair[1]]
		if !usable(iv) {
			continue
		}
		if usable(nv) {
			if c, ok := compareThresholdValues(iv, nv); ok && c <= 0 {
				continue
			}
		}
		field := in.field("evictionHard", flagHard, pair[0])
		if _, set := in.Config.EvictionHard[pair[0]]; !set {
			field += " (default)"
		}
		out = append(out, Finding{Severity: SeverityWarning, Field: field, Value: iv,
			Message: fmt.Sprintf("on a single filesystem %s<%s is the effective disk threshold, not %s<%s", pair[0], iv, pair[1], orNone(nv)),
			Why:     "without a dedicated image filesystem, imagefs signals observe the node filesystem: the larger threshold raises DiskPressure and evicts first",
			Fix:     fmt.Sprintf("set %s to the value you want for the node filesystem, or lower %s to %s", pair[1], pair[0], orNone(nv))})
	}
	return out
}

func orNone(v string) string {
	if !usable(v) {
		return "(none)"
	}
	return v
}

func ruleLocalStorage(in *Input) []Finding {
	l := in.Config.LocalStorageCapacityIsolation
	if l == nil || *l {
		return nil
	}
	return []Finding{{Severity: SeverityWarning, Field: "localStorageCapacityIsolation", Value: "false",
		Message: "ephemeral-storage limits and emptyDir sizeLimit are not enforced",
		Why:     "with it off the kubelet neither evicts pods over their ephemeral-storage limit or emptyDir sizeLimit nor accounts ephemeral storage: one pod can fill the node disk and only DiskPressure eviction is left",
		Fix:     "remove the setting (default true) unless the node's filesystem cannot report usage (e.g. rootless)"}}
}

func ruleSeparateDiskGC(in *Input) []Finding {
	on, set := in.Config.FeatureGates["KubeletSeparateDiskGC"]
	if !set || on || in.Layout != LayoutSplit {
		return nil
	}
	return []Finding{{Severity: SeverityWarning, Field: "featureGates.KubeletSeparateDiskGC", Value: "false",
		Message: "with a split image/container filesystem the eviction manager stops for good",
		Why: "its first synchronize fails with \"" + policy.ErrSplitFsWithoutGate.Error() + "\" after recording the layout, " +
			"so later cycles never build the ranking functions: no threshold-based eviction ever happens on this node",
		Fix: "remove the gate override (on by default since v1.31)"}}
}

func ruleFlagReplacesFile(in *Input) []Finding {
	if in.ConfigFile == "" {
		return nil
	}
	var out []Finding
	for _, p := range []struct{ flag, field string }{
		{flagHard, "evictionHard"}, {flagSoft, "evictionSoft"}, {flagGrace, "evictionSoftGracePeriod"}, {flagReclaim, "evictionMinimumReclaim"},
	} {
		if in.flagSet(p.flag) && in.Present[p.field] {
			out = append(out, Finding{Severity: SeverityInfo, Field: "--" + p.flag,
				Message: "--" + p.flag + " replaces the file's whole " + p.field + " map",
				Why:     "the kubelet applies its flags over the file: a map flag is not merged key by key, the file's entries are gone",
				Fix:     "put all entries in one place"})
		}
	}
	return out
}

// effectiveHard is the evictionHard map the kubelet uses: the file's after
// the default merge, or, for a kubelet without a config file, the flag's map
// or nothing (the defaults are only added when a config file is loaded).
func (in *Input) effectiveHard() map[string]string {
	if in.ConfigFile == "" {
		return in.Config.EvictionHard
	}
	return policy.EffectiveEvictionHard(in.Config)
}

// compareThresholdValues compares two threshold values of the same kind
// (two quantities, or two percentages); ok is false when they cannot be
// compared without the node's capacity or when one does not parse.
func compareThresholdValues(a, b string) (int, bool) {
	ap, bp := strings.HasSuffix(a, "%"), strings.HasSuffix(b, "%")
	if ap != bp {
		return 0, false
	}
	if ap {
		x, err1 := policy.ParsePercentage(a)
		y, err2 := policy.ParsePercentage(b)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	x, err1 := resource.ParseQuantity(a)
	y, err2 := resource.ParseQuantity(b)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return x.Cmp(y), true
}

func formatMap(m map[string]string, sep string) string {
	if len(m) == 0 {
		return "{}"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ",")
}
