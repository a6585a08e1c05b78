package policy

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, e.g. "memory.available".
type Signal string

// The nine signals the kubelet v1.37.2 accepts (pkg/kubelet/eviction/api).
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalPIDAvailable               Signal = "pid.available"
)

// Signals lists every valid signal in evictd's fixed display order. The order
// is also the tie-break evictd uses where the kubelet's order is random (see
// docs/kubelet-parity.md).
var Signals = []Signal{
	SignalMemoryAvailable,
	SignalAllocatableMemoryAvailable,
	SignalNodeFsAvailable,
	SignalNodeFsInodesFree,
	SignalImageFsAvailable,
	SignalImageFsInodesFree,
	SignalContainerFsAvailable,
	SignalContainerFsInodesFree,
	SignalPIDAvailable,
}

// Resource names internal to the kubelet's eviction code; they appear in
// messages ("The node was low on resource: inodes.") and annotations.
const (
	ResourceInodes v1.ResourceName = "inodes"
	ResourcePIDs   v1.ResourceName = "pids"
)

// ThresholdOperator relates an observation to a threshold value.
type ThresholdOperator string

// OpLessThan is the only operator the kubelet uses: a threshold is met when
// the available amount is less than the threshold quantity.
const OpLessThan ThresholdOperator = "LessThan"

var signalToCondition = map[Signal]v1.NodeConditionType{
	SignalMemoryAvailable:            v1.NodeMemoryPressure,
	SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	SignalImageFsAvailable:           v1.NodeDiskPressure,
	SignalContainerFsAvailable:       v1.NodeDiskPressure,
	SignalNodeFsAvailable:            v1.NodeDiskPressure,
	SignalImageFsInodesFree:          v1.NodeDiskPressure,
	SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	SignalContainerFsInodesFree:      v1.NodeDiskPressure,
	SignalPIDAvailable:               v1.NodePIDPressure,
}

var signalToResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:            v1.ResourceMemory,
	SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	SignalImageFsInodesFree:          ResourceInodes,
	SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	SignalContainerFsInodesFree:      ResourceInodes,
	SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:           ResourceInodes,
	SignalPIDAvailable:               ResourcePIDs,
}

// ValidSignal reports whether the kubelet accepts s.
func ValidSignal(s Signal) bool {
	_, ok := signalToResource[s]
	return ok
}

// ConditionFor returns the node condition a met threshold on s raises.
func ConditionFor(s Signal) (v1.NodeConditionType, bool) {
	c, ok := signalToCondition[s]
	return c, ok
}

// ResourceFor returns the resource the kubelet reclaims for s.
func ResourceFor(s Signal) (v1.ResourceName, bool) {
	r, ok := signalToResource[s]
	return r, ok
}

func signalRank(s Signal) int {
	for i, x := range Signals {
		if x == s {
			return i
		}
	}
	return len(Signals)
}

// ThresholdValue is a literal quantity or a fraction of capacity. Only the
// first non-zero field is used (Quantity wins).
type ThresholdValue struct {
	Quantity *resource.Quantity `json:"quantity,omitempty"`
	// Percentage is a fraction (0.1 for "10%") held as float32, as the kubelet does.
	Percentage float32 `json:"percentage,omitempty"`
}

// String formats the value the way it is written in a config: "100Mi" or "10%".
func (v ThresholdValue) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return formatPercent(v.Percentage) + "%"
}

// formatPercent writes a float32 fraction as the shortest percentage that
// parses back to it ("0.105" → "10.5"), shifting the decimal point in the
// text so that float32 rounding does not show (0.3*100 is 30.000002 in float32).
func formatPercent(p float32) string {
	s := strconv.FormatFloat(float64(p), 'f', -1, 32)
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	r.Mul(r, big.NewRat(100, 1))
	if r.IsInt() {
		return r.Num().String()
	}
	decimals := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		decimals = len(s) - i - 1 - 2
	}
	if decimals < 1 {
		decimals = 1
	}
	return strings.TrimRight(r.FloatString(decimals), "0")
}

// Threshold is one eviction threshold, the kubelet's evictionapi.Threshold.
type Threshold struct {
	Signal   Signal            `json:"signal"`
	Operator ThresholdOperator `json:"operator"`
	Value    ThresholdValue    `json:"value"`
	// GracePeriod is zero for hard thresholds.
	GracePeriod time.Duration   `json:"gracePeriod"`
	MinReclaim  *ThresholdValue `json:"minReclaim,omitempty"`
}

// Hard reports whether the threshold evicts without a grace period (the
// kubelet's isHardEvictionThreshold: GracePeriod == 0, so a soft threshold
// with grace 0s is hard too).
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// String formats the threshold for people: "memory.available<100Mi",
// with " (soft, grace 2m0s)" and " (min-reclaim 500Mi)" when they apply.
func (t Threshold) String() string {
	var b strings.Builder
	b.WriteString(string(t.Signal))
	if t.Operator == "" {
		b.WriteString(" (no source threshold: never met)")
		return b.String()
	}
	b.WriteString("<")
	b.WriteString(t.Value.String())
	if !t.Hard() {
		b.WriteString(" (soft, grace ")
		b.WriteString(t.GracePeriod.String())
		b.WriteString(")")
	}
	if t.MinReclaim != nil {
		b.WriteString(" (min-reclaim ")
		b.WriteString(t.MinReclaim.String())
		b.WriteString(")")
	}
	return b.String()
}

// ThresholdQuantity resolves a threshold value against capacity exactly as
// the kubelet's GetThresholdQuantity: a quantity is copied, a percentage is
// int64(float64(capacity) * float64(float32 percentage)), truncated.
func ThresholdQuantity(v ThresholdValue, capacity *resource.Quantity) *resource.Quantity {
	return thresholdQuantity(v, capacity)
}

func thresholdQuantity(v ThresholdValue, capacity *resource.Quantity) *resource.Quantity {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(capacity.Value())*float64(v.Percentage)), resource.BinarySI)
}

// nodeAllocatableEnforcementKey is the enforceNodeAllocatable entry that makes
// the kubelet add allocatableMemory.available thresholds.
const nodeAllocatableEnforcementKey = "pods"

// ParseThresholdConfig parses the kubelet's eviction settings into thresholds,
// with the kubelet v1.37.2's rules and error wording (helpers.go
// ParseThresholdConfig): hard thresholds first, then soft ones, then — when
// allocatableConfig contains "pods" — an allocatableMemory.available copy of
// each hard memory.available threshold. "0%" and "100%" silently drop a
// threshold. Within each group evictd orders by signal name (the kubelet
// iterates a map; see sortedKeys and docs/kubelet-parity.md for why the order
// matters when several thresholds are met at once).
func ParseThresholdConfig(allocatableConfig []string, evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim map[string]string) ([]Threshold, error) {
	return parseThresholdConfig(allocatableConfig, evictionHard, sortedKeys(evictionHard), evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim)
}

// parseThresholdConfig is ParseThresholdConfig with the hard thresholds in
// the order of hardKeys (the kubelet's map order differs run to run; see
// ConfigFromKubelet for the order evictd uses).
func parseThresholdConfig(allocatableConfig []string, evictionHard map[string]string, hardKeys []string, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim map[string]string) ([]Threshold, error) {
	results := []Threshold{}
	hard, err := parseThresholdStatementsInOrder(evictionHard, hardKeys)
	if err != nil {
		return nil, err
	}
	results = append(results, hard...)
	soft, err := parseThresholdStatements(evictionSoft)
	if err != nil {
		return nil, err
	}
	grace, err := parseGracePeriods(evictionSoftGracePeriod)
	if err != nil {
		return nil, err
	}
	minReclaims, err := parseMinimumReclaims(evictionMinimumReclaim)
	if err != nil {
		return nil, err
	}
	for i := range soft {
		period, ok := grace[soft[i].Signal]
		if !ok {
			return nil, newError(ErrMissingGracePeriod, string(soft[i].Signal), fmt.Sprintf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal))
		}
		soft[i].GracePeriod = period
	}
	results = append(results, soft...)
	for i := range results {
		if mr, ok := minReclaims[results[i].Signal]; ok {
			mr := mr
			results[i].MinReclaim = &mr
		}
	}
	for _, key := range allocatableConfig {
		if key == nodeAllocatableEnforcementKey {
			results = addAllocatableThresholds(results)
			break
		}
	}
	return results, nil
}

func addAllocatableThresholds(thresholds []Threshold) []Threshold {
	var extra []Threshold
	for _, t := range thresholds {
		if t.Signal == SignalMemoryAvailable && t.Hard() {
			extra = append(extra, Threshold{
				Signal:     SignalAllocatableMemoryAvailable,
				Operator:   t.Operator,
				Value:      t.Value,
				MinReclaim: t.MinReclaim,
			})
		}
	}
	return append(append([]Threshold{}, thresholds...), extra...)
}

// sortedKeys returns the map's keys in byte order. The kubelet iterates the
// map, whose order is a random rotation of its insertion order; a config file
// reaches the kubelet as JSON with sorted keys (YAML is converted through
// sigs.k8s.io/yaml, which sorts), so sorted order is also the kubelet's most
// likely order — and it makes the first error reported deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseThresholdStatements(statements map[string]string) ([]Threshold, error) {
	return parseThresholdStatementsInOrder(statements, sortedKeys(statements))
}

// parseThresholdStatementsInOrder parses statements in the order of keys.
func parseThresholdStatementsInOrder(statements map[string]string, keys []string) ([]Threshold, error) {
	if len(statements) == 0 {
		return nil, nil
	}
	var results []Threshold
	for _, signal := range keys {
		t, err := parseThresholdStatement(Signal(signal), statements[signal])
		if err != nil {
			return nil, err
		}
		if t != nil {
			results = append(results, *t)
		}
	}
	return results, nil
}

func parseThresholdStatement(signal Signal, val string) (*Threshold, error) {
	if !ValidSignal(signal) {
		return nil, unsupportedSignal(signal)
	}
	if strings.HasSuffix(val, "%") {
		// the kubelet silently ignores exactly "0%" and "100%"
		if val == "0%" || val == "100%" {
			return nil, nil
		}
		p, err := parsePercentage(val)
		if err != nil {
			return nil, wrapError(ErrBadValue, string(signal), err)
		}
		if p < 0 {
			return nil, newError(ErrPercentageOutOfRange, string(signal), fmt.Sprintf("eviction percentage threshold %v must be >= 0%%: %s", signal, val))
		}
		if p > 1 {
			return nil, newError(ErrPercentageOutOfRange, string(signal), fmt.Sprintf("eviction percentage threshold %v must be <= 100%%: %s", signal, val))
		}
		return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Percentage: p}}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, wrapError(ErrBadValue, string(signal), err)
	}
	if q.Sign() < 0 || q.IsZero() {
		return nil, newError(ErrThresholdNotPositive, string(signal), fmt.Sprintf("eviction threshold %v must be positive: %s", signal, &q))
	}
	return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Quantity: &q}}, nil
}

func unsupportedSignal(s Signal) *Error {
	return newError(ErrUnsupportedSignal, string(s), fmt.Sprintf("unsupported eviction signal %v", s))
}

// ParsePercentage parses "10.5%" into 0.105 (float32), as the kubelet does:
// every trailing "%" is stripped, the rest parsed as a 32-bit float.
func ParsePercentage(input string) (float32, error) { return parsePercentage(input) }

func parsePercentage(input string) (float32, error) {
	value, err := strconv.ParseFloat(strings.TrimRight(input, "%"), 32)
	if err != nil {
		return 0, err
	}
	return float32(value) / 100, nil
}

func parseGracePeriods(statements map[string]string) (map[Signal]time.Duration, error) {
	if len(statements) == 0 {
		return nil, nil
	}
	results := map[Signal]time.Duration{}
	for _, key := range sortedKeys(statements) {
		val := statements[key]
		signal := Signal(key)
		if !ValidSignal(signal) {
			return nil, unsupportedSignal(signal)
		}
		d, err := time.ParseDuration(val)
		if err != nil {
			return nil, wrapError(ErrBadDuration, key, err)
		}
		if d < 0 {
			return nil, newError(ErrNegativeGracePeriod, key, fmt.Sprintf("invalid eviction grace period specified: %v, must be a positive value", val))
		}
		results[signal] = d
	}
	return results, nil
}

func parseMinimumReclaims(statements map[string]string) (map[Signal]ThresholdValue, error) {
	if len(statements) == 0 {
		return nil, nil
	}
	results := map[Signal]ThresholdValue{}
	for _, key := range sortedKeys(statements) {
		val := statements[key]
		signal := Signal(key)
		if !ValidSignal(signal) {
			return nil, unsupportedSignal(signal)
		}
		if strings.HasSuffix(val, "%") {
			p, err := parsePercentage(val)
			if err != nil {
				return nil, wrapError(ErrBadValue, key, err)
			}
			if p <= 0 {
				return nil, newError(ErrMinReclaimNotPositive, key, fmt.Sprintf("eviction percentage minimum reclaim %v must be positive: %s", signal, val))
			}
			results[signal] = ThresholdValue{Percentage: p}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, wrapError(ErrBadValue, key, err)
		}
		if q.Sign() < 0 {
			return nil, newError(ErrNegativeMinReclaim, key, fmt.Sprintf("negative eviction minimum reclaim specified for %v", signal))
		}
		results[signal] = ThresholdValue{Quantity: &q}
	}
	return results, nil
}
