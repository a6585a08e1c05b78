package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Profile selects behaviours beyond the kubelet's (docs/profile.md). The zero
// value is the kubelet profile: every decision is the kubelet v1.37.2's, and
// the parity tier proves it. Each field answers a long-standing upstream
// request that the kubelet does not meet; none of them is on by default.
type Profile struct {
	// HardPreemptsSoft (kubernetes#123872): a hard threshold is never held
	// back by a soft-threshold eviction still waiting out a long grace
	// period. The kubelet's kill blocks its eviction loop for the whole
	// grace period; with this the agent keeps synchronizing and acts on a
	// hard threshold at once. Carried out by the agent (internal/agent); the
	// engine's decisions are unchanged by it.
	HardPreemptsSoft bool `json:"hardPreemptsSoft,omitempty"`
	// ReclaimFirst (kubernetes#43916): on a memory signal whose working set
	// holds file pages, the decision asks for memory.reclaim (cgroup v2) on
	// the signal's cgroup first, and evicts only if the Summary seen after
	// it still meets a threshold — the kubelet's node-level reclaim, applied
	// to memory.
	ReclaimFirst bool `json:"reclaimFirst,omitempty"`
	// SwapAware (kubernetes/enhancements#2400; kubernetes#128137 and
	// #129578, closed unmerged): on a node with swap, free swap counts as
	// available memory for the memory signals, and a pod's swap usage counts
	// as memory usage in the ranking.
	SwapAware bool `json:"swapAware,omitempty"`
	// LoopBreaker (kubernetes#124388): pods of a controller whose pods were
	// evicted from this node LoopEvictions times within LoopWindow are
	// ranked after the other pods while the node stays under pressure, with
	// an EvictionLoop Event when the loop is recorded.
	LoopBreaker bool `json:"loopBreaker,omitempty"`
	// MemAvailable (kubernetes#138372): memory.available is the kernel's
	// MemAvailable (/proc/meminfo) instead of capacity minus the root
	// cgroup's working set. The caller passes it in Input.Host.
	MemAvailable bool `json:"memAvailable,omitempty"`

	// LoopWindow is how close together evictions of one controller's pods
	// must be to count as a loop, and how long a loop is remembered after
	// the node was last under pressure (0: DefaultLoopWindow).
	LoopWindow time.Duration `json:"loopWindow,omitempty"`
}

// DefaultLoopWindow is the loop breaker's window: "evicted again within
// minutes" (kubernetes#124388 shows DaemonSet pods recreated and evicted in
// seconds; a Deployment's replacement lands within a scheduler round).
const DefaultLoopWindow = 10 * time.Minute

// LoopEvictions is how many evictions of one controller's pods within the
// window make a loop: the first eviction is the ordinary one, the second
// shows the controller put a replacement back on the same node.
const LoopEvictions = 2

// Profile names accepted by ParseProfile.
const (
	ProfileKubelet  = "kubelet"
	ProfileExtended = "extended"
)

// behaviour names, as written in --profile lists and shown by String.
var profileBehaviours = []struct {
	name  string
	field func(*Profile) *bool
}{
	{"hard-preempts-soft", func(p *Profile) *bool { return &p.HardPreemptsSoft }},
	{"reclaim-first", func(p *Profile) *bool { return &p.ReclaimFirst }},
	{"swap-aware", func(p *Profile) *bool { return &p.SwapAware }},
	{"loop-breaker", func(p *Profile) *bool { return &p.LoopBreaker }},
	{"memavailable", func(p *Profile) *bool { return &p.MemAvailable }},
}

// ProfileBehaviours lists the behaviour names in their documented order.
func ProfileBehaviours() []string {
	out := make([]string, len(profileBehaviours))
	for i, b := range profileBehaviours {
		out[i] = b.name
	}
	return out
}

// ParseProfile reads a --profile value: "kubelet" (the default: no
// behaviour beyond the kubelet), "extended" (all of them), or a
// comma-separated list of behaviour names (ProfileBehaviours).
func ParseProfile(s string) (Profile, error) {
	var p Profile
	switch strings.TrimSpace(s) {
	case "", ProfileKubelet:
		return p, nil
	case ProfileExtended:
		for _, b := range profileBehaviours {
			*b.field(&p) = true
		}
		return p, nil
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, b := range profileBehaviours {
			if b.name == name {
				*b.field(&p) = true
				found = true
			}
		}
		if !found {
			return Profile{}, fmt.Errorf("unknown profile or behaviour %q: want %s, %s or a comma-separated list of %s",
				name, ProfileKubelet, ProfileExtended, strings.Join(ProfileBehaviours(), ", "))
		}
	}
	return p, nil
}

// Kubelet reports whether p is the kubelet profile (no behaviour on).
func (p Profile) Kubelet() bool { return p.Behaviours() == nil }

// Behaviours lists the names of the behaviours that are on.
func (p Profile) Behaviours() []string {
	var out []string
	for _, b := range profileBehaviours {
		if *b.field(&p) {
			out = append(out, b.name)
		}
	}
	return out
}

// String is "kubelet", "extended" or the list of behaviours that are on.
func (p Profile) String() string {
	on := p.Behaviours()
	switch len(on) {
	case 0:
		return ProfileKubelet
	case len(profileBehaviours):
		return ProfileExtended
	}
	return strings.Join(on, ",")
}

func (p Profile) loopWindow() time.Duration {
	if p.LoopWindow > 0 {
		return p.LoopWindow
	}
	return DefaultLoopWindow
}

// HostMemory is the node's memory as the kernel reports it in /proc/meminfo,
// read by the caller (the engine opens no file). It only changes a decision
// with Profile.MemAvailable; explain shows it beside the kubelet's figure.
type HostMemory struct {
	// Time is when it was read (zero: the Summary's node memory time).
	Time              time.Time `json:"time,omitempty"`
	MemTotalBytes     uint64    `json:"memTotalBytes"`
	MemAvailableBytes uint64    `json:"memAvailableBytes"`
}

// NodeMemory puts the figures a node memory signal can be computed from side
// by side: the kubelet's (capacity − working set of the root cgroup), the
// kernel's MemAvailable when known, and the free swap, with the one the
// decision used.
type NodeMemory struct {
	// WorkingSetAvailable is the kubelet's memory.available.
	WorkingSetAvailable *resource.Quantity `json:"workingSetAvailable,omitempty"`
	// MemAvailable is /proc/meminfo's MemAvailable (nil when not read).
	MemAvailable *resource.Quantity `json:"memAvailable,omitempty"`
	// SwapAvailable is the node's free swap (nil when the Summary has none).
	SwapAvailable *resource.Quantity `json:"swapAvailable,omitempty"`
	// Used says which the decision took: "working set" (the kubelet's),
	// "MemAvailable", either with " + free swap".
	Used string `json:"used"`
}

// MemoryReclaim is the Profile.ReclaimFirst request of a Decision: ask the
// kernel to reclaim memory of the cgroup the signal measures (the root
// cgroup for memory.available, the pods cgroup for
// allocatableMemory.available) before evicting.
type MemoryReclaim struct {
	Signal Signal `json:"signal"`
	// Bytes is how far the signal's available memory is below what the
	// thresholds need (quantity + minimum reclaim − available): how much
	// the working set has to shrink.
	Bytes int64 `json:"bytes"`
	// FileBytes is the part of the working set that is not anonymous memory
	// (working set − RSS): the page cache reclaim can drop.
	FileBytes int64 `json:"fileBytes"`
}

// ReclaimMemory is the node-level reclaim function name of a MemoryReclaim.
const ReclaimMemory = "memoryReclaim"

// EvictionLoopReason is the reason of the loop breaker's Event.
const EvictionLoopReason = "EvictionLoop"

// Loop is one controller's eviction loop as the loop breaker remembers it.
type Loop struct {
	// Controller is "<namespace>/<Kind>/<name>" of the pods' controller.
	Controller string `json:"controller"`
	UID        string `json:"uid"`
	// Evictions are its pods' evictions within the window of the latest,
	// oldest first (at most LoopEvictions+1 kept).
	Evictions []LoopEviction `json:"evictions"`
	// Recorded is when the evictions made it a loop (zero: not yet one).
	Recorded time.Time `json:"recorded,omitzero"`
	// LastPressure is the last synchronize that met a threshold while it
	// was remembered; the loop is forgotten a window after it (or after its
	// last eviction, when that is later).
	LastPressure time.Time `json:"lastPressure"`
}

// LoopEviction is one eviction of a controller's pod.
type LoopEviction struct {
	Pod string    `json:"pod"` // namespace/name
	UID string    `json:"uid"`
	At  time.Time `json:"at"`
}

// loopBook is the loop breaker's state: one Loop per controller UID.
type loopBook map[string]*Loop

func (b loopBook) list() []Loop {
	out := make([]Loop, 0, len(b))
	for _, l := range b {
		c := *l
		c.Evictions = append([]LoopEviction(nil), l.Evictions...)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Controller < out[j].Controller })
	return out
}

// looping reports whether the controller uid is in a recorded loop.
func (b loopBook) looping(uid string) bool {
	l, ok := b[uid]
	return ok && !l.Recorded.IsZero()
}

// expire forgets what is a window old (since the node was last under
// pressure or the controller's last eviction, whichever is later), and
// notes pressure now on the rest.
func (b loopBook) expire(now time.Time, pressure bool, window time.Duration) {
	for uid, l := range b {
		if pressure {
			l.LastPressure = now
			continue
		}
		last := l.LastPressure
		if n := len(l.Evictions); n > 0 && l.Evictions[n-1].At.After(last) {
			last = l.Evictions[n-1].At
		}
		if now.Sub(last) >= window {
			delete(b, uid)
		}
	}
}

// note records the eviction of pod ev of controller (key, uid) and reports
// whether it made the controller's evictions a loop. The same pod decided
// again (its eviction was refused, or is still in progress) is not a new
// eviction: a loop needs replacements.
func (b loopBook) note(key, uid string, ev LoopEviction, window time.Duration) bool {
	l, ok := b[uid]
	if !ok {
		l = &Loop{Controller: key, UID: uid}
		b[uid] = l
	}
	l.LastPressure = ev.At
	kept := l.Evictions[:0]
	for _, x := range l.Evictions {
		if x.UID == ev.UID {
			return false
		}
		if ev.At.Sub(x.At) < window {
			kept = append(kept, x)
		}
	}
	l.Evictions = append(kept, ev)
	if len(l.Evictions) > LoopEvictions+1 {
		l.Evictions = l.Evictions[len(l.Evictions)-LoopEvictions-1:]
	}
	if l.Recorded.IsZero() && len(l.Evictions) >= LoopEvictions {
		l.Recorded = ev.At
		return true
	}
	return false
}
