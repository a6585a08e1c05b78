package policy

import "errors"

// ErrorKind says what is wrong with a configuration value, so that callers
// (lint's fixes, the agent's messages) decide by kind, not by the text,
// which is the kubelet's and may change with it.
type ErrorKind int

// The kinds of configuration error, each with the kubelet v1.37.2 check that
// produces it.
const (
	// ErrOther is any error that is not a policy *Error.
	ErrOther ErrorKind = iota
	// ErrUnsupportedSignal: a map key that is no eviction signal
	// ("unsupported eviction signal X").
	ErrUnsupportedSignal
	// ErrBadValue: neither a quantity nor a percentage (resource.ParseQuantity's
	// or strconv.ParseFloat's error, as the kubelet returns it).
	ErrBadValue
	// ErrPercentageOutOfRange: a threshold percentage below 0% or above 100%.
	ErrPercentageOutOfRange
	// ErrThresholdNotPositive: a threshold quantity of zero or less.
	ErrThresholdNotPositive
	// ErrMinReclaimNotPositive: a minimum-reclaim percentage of zero or less.
	ErrMinReclaimNotPositive
	// ErrNegativeMinReclaim: a negative minimum-reclaim quantity.
	ErrNegativeMinReclaim
	// ErrBadDuration: a grace period time.ParseDuration rejects.
	ErrBadDuration
	// ErrNegativeGracePeriod: a negative grace period.
	ErrNegativeGracePeriod
	// ErrMissingGracePeriod: a soft threshold without a grace period.
	ErrMissingGracePeriod
	// ErrUnrecognizedFeatureGate: a featureGates key the kubelet does not
	// know (component-base's featuregate: "unrecognized feature gate: X").
	ErrUnrecognizedFeatureGate
	// The kubelet's MemoryQoS validation (internal/memqos): a
	// memoryThrottlingFactor other than 0.9 with MemoryQoS off, one outside
	// (0, 1], TieredReservation with MemoryQoS off, an unknown
	// memoryReservationPolicy.
	ErrThrottlingFactorWithoutMemoryQoS
	ErrThrottlingFactorOutOfRange
	ErrReservationPolicyNeedsMemoryQoS
	ErrUnknownReservationPolicy
)

var kindNames = [...]string{"other", "unsupported signal", "bad value", "percentage out of range",
	"threshold not positive", "minimum reclaim not positive", "negative minimum reclaim",
	"bad duration", "negative grace period", "missing grace period", "unrecognized feature gate",
	"throttling factor without MemoryQoS", "throttling factor out of range", "reservation policy needs MemoryQoS",
	"unknown reservation policy"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is a configuration error of a known kind. Its text is the kubelet's,
// word for word; Err, when set, is the parser's error it came from.
type Error struct {
	Kind ErrorKind
	// Name is the signal or feature gate the error is about.
	Name string
	msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Kind: k}) match any error of kind k.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.msg == "" && t.Err == nil && t.Name == "" && t.Kind == e.Kind
}

// KindOf returns the kind of the first policy *Error in err's chain, or
// ErrOther.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ErrOther
}

// NewError returns an error of kind about name (a signal, gate or field)
// with the kubelet's message.
func NewError(kind ErrorKind, name, msg string) *Error {
	return &Error{Kind: kind, Name: name, msg: msg}
}

func newError(kind ErrorKind, name, msg string) *Error { return NewError(kind, name, msg) }

// wrapError keeps the parser's error text (the kubelet returns it as is).
func wrapError(kind ErrorKind, name string, err error) *Error {
	return &Error{Kind: kind, Name: name, Err: err}
}
