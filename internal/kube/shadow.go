package kube

import (
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
)

// ShadowReport compares one eviction by the kubelet with evictd's decisions.
type ShadowReport struct {
	Pod policy.PodRef `json:"pod"`
	// KubeletAt is when evictd's informer saw the kubelet's eviction.
	KubeletAt time.Time `json:"kubeletAt"`
	// Decided: evictd had decided to evict this very pod (same UID).
	Decided bool `json:"decided"`
	// Lead is how long before KubeletAt evictd first decided it.
	Lead time.Duration `json:"leadNs,omitempty"`
	// LastDecided is the pod evictd decided last, when it is another one.
	LastDecided *policy.PodRef `json:"lastDecided,omitempty"`
}

// Shadow records, in shadow mode (the agent deciding in dry-run beside the
// kubelet that acts), whether evictd had decided the pods the kubelet
// evicts on this node and how much earlier. Hook Record into
// agent.Config.OnRecord and Watch onto the pod informer.
type Shadow struct {
	Log *slog.Logger
	Now func() time.Time // nil: time.Now
	// Wake, when set, is woken (source "shadow") each time the kubelet
	// evicts a pod, so that evictd decides again at once, as it does after
	// an eviction of its own. The kubelet moves on to its next pod as soon
	// as the evicted one is cleaned up; a shadow that waited for its next
	// tick would not have decided that pod yet, and would record the
	// kubelet's next choice as one it had not made.
	Wake notify.Sink

	mu       sync.Mutex
	decided  map[types.UID]time.Time
	last     *policy.PodRef
	reported map[types.UID]bool
	reports  []ShadowReport
}

// Record notes the pods a synchronize decided to evict.
func (s *Shadow) Record(rec agent.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decided == nil {
		s.decided = map[types.UID]time.Time{}
	}
	for _, ev := range rec.Decision.Evictions {
		uid := types.UID(ev.Pod.UID)
		if _, ok := s.decided[uid]; !ok {
			s.decided[uid] = rec.Time
		}
		ref := ev.Pod
		s.last = &ref
	}
}

// Watch reports every pod the informer sees evicted by the kubelet.
func (s *Shadow) Watch(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*v1.Pod); ok && EvictedByKubelet(p) {
				s.observe(p)
			}
		},
	})
	return err
}

// Reports returns the comparisons so far.
func (s *Shadow) Reports() []ShadowReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ShadowReport(nil), s.reports...)
}

func (s *Shadow) observe(p *v1.Pod) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	s.mu.Lock()
	if s.reported[p.UID] {
		s.mu.Unlock()
		return
	}
	if s.reported == nil {
		s.reported = map[types.UID]bool{}
	}
	s.reported[p.UID] = true
	r := ShadowReport{Pod: policy.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}, KubeletAt: now}
	if at, ok := s.decided[p.UID]; ok {
		r.Decided, r.Lead = true, now.Sub(at)
	} else if s.last != nil {
		l := *s.last
		r.LastDecided = &l
	}
	s.reports = append(s.reports, r)
	s.mu.Unlock()
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	attrs := []any{"pod", p.Namespace + "/" + p.Name, "evictd_decided", r.Decided}
	if r.Decided {
		attrs = append(attrs, "lead", r.Lead.Round(time.Millisecond))
	} else if r.LastDecided != nil {
		attrs = append(attrs, "evictd_last_decided", r.LastDecided.Namespace+"/"+r.LastDecided.Name)
	}
	log.Info("shadow: the kubelet evicted a pod", attrs...)
	if s.Wake != nil {
		s.Wake.Wake(notify.Wake{Source: "shadow", At: now})
	}
}

// kubeletEvictions reports, once per pod, each pod on this node that the
// kubelet's eviction manager evicted, as the informer sees it: in shadow mode
// the kubelet's evictions are expected, in any other mode each one is an
// eviction the kubelet made before evictd did (evictd's alert
// EvictdKubeletEvictedFirst). Pods evictd evicted itself are not counted:
// their DisruptionTarget condition is evictd's copy of the kubelet's.
type kubeletEvictions struct {
	ours func(types.UID) bool // evictd evicted this pod
	seen func(*v1.Pod)

	mu       sync.Mutex
	reported map[types.UID]bool
}

func (k *kubeletEvictions) watch(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			p, ok := obj.(*v1.Pod)
			if !ok || !EvictedByKubelet(p) || (k.ours != nil && k.ours(p.UID)) {
				return
			}
			k.mu.Lock()
			if k.reported == nil {
				k.reported = map[types.UID]bool{}
			}
			first := !k.reported[p.UID]
			k.reported[p.UID] = true
			k.mu.Unlock()
			if first {
				k.seen(p)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				k.mu.Lock()
				delete(k.reported, p.UID)
				k.mu.Unlock()
			}
		},
	})
	return err
}

// EvictedByKubelet reports whether the kubelet's eviction manager evicted
// pod: phase Failed with reason Evicted, or (a container that exited 0 on
// SIGTERM leaves the pod Succeeded) the DisruptionTarget condition with
// reason TerminationByKubelet.
func EvictedByKubelet(p *v1.Pod) bool {
	if p.Status.Phase == v1.PodFailed && p.Status.Reason == policy.Reason {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet {
			return true
		}
	}
	return false
}
