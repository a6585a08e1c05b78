package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/policy"
)

// DefaultPDBWait is how long a soft-threshold eviction that a
// PodDisruptionBudget refuses (429) is retried before evictd deletes the pod.
// It is the kubelet's evictionMonitoringPeriod: the kubelet, which ignores
// PDBs, evicts that pod itself at its next synchronize once the same soft
// threshold's grace period has run out, so waiting longer would only hand
// the eviction to the kubelet; waiting this long gives the disruption
// controller one period to allow it.
const DefaultPDBWait = 10 * time.Second

// DefaultCallTimeout bounds each API call evictd makes while evicting.
// client-go's typed EvictV1 would retry a 429 with Retry-After silently for
// about 100 s; evictd's calls never retry and give up after this long.
const DefaultCallTimeout = 5 * time.Second

// Component is the source component of evictd's Events.
const Component = "evictd"

// Evictor implements agent.Evictor through the API server: the Eviction API
// (policy/v1) with the kubelet's grace period and a UID precondition; then
// the kubelet's DisruptionTarget condition (reason TerminationByKubelet, the
// kubelet's message) and its "Evicted" Warning Event with the kubelet's
// message and annotations.
//
// When a PodDisruptionBudget refuses (429): for an immediate eviction (hard
// threshold, local-storage limit) evictd deletes the pod at once with the
// same grace and precondition, as the kubelet ignores PDBs; for a soft
// threshold it returns an error and retries at the next synchronize, and
// deletes once the first refusal is PDBWait old (PDBWait < 0: never).
//
// A pod that is gone (404) or replaced by another with the same name (UID
// precondition failed, 409) counts as evicted already: it is not evicted
// twice.
type Evictor struct {
	Client *kubeclient.Client
	Node   string
	// PDBWait: see DefaultPDBWait; negative never overrides a PDB.
	PDBWait time.Duration
	// CallTimeout bounds each API call (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// Local, when set, kills an immediate eviction's pod cgroup on this
	// node when it still runs after the grace period plus a deadline.
	Local *LocalFallback
	// Events and Conditions write the Evicted Event and the
	// DisruptionTarget condition off the eviction path, so that an API
	// server slow to take them delays neither the next decision nor a
	// local kill (nil: at once, on the caller's goroutine).
	Events, Conditions *Recorder
	// Killer and PodDir stop a victim's growth on this node before the
	// eviction is posted (Hold; agent.Holder): PodDir finds the pod's
	// cgroup directory (Stats.PodDir).
	Killer *actuate.Killer
	PodDir func(pod *v1.Pod) (string, bool)
	DryRun bool
	Log    *slog.Logger
	Now    func() time.Time // nil: time.Now

	mu      sync.Mutex
	refused map[types.UID]time.Time // first PDB refusal per pod
	evicted map[types.UID]time.Time // pods evictd evicted, for ownEvictionsKept
}

// ownEvictionsKept is how long the evictor remembers a pod it evicted, so
// that the kubelet-eviction counter does not count it when the kubelet's
// status update of the terminated pod arrives: far longer than any grace
// period evictd gives plus the kubelet's status sync.
const ownEvictionsKept = 30 * time.Minute

// noteEvicted remembers that evictd evicted the pod, before its condition
// is patched: from then on the pod looks evicted by the kubelet.
func (e *Evictor) noteEvicted(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if e.evicted == nil {
		e.evicted = map[types.UID]time.Time{}
	}
	for u, at := range e.evicted {
		if now.Sub(at) > ownEvictionsKept {
			delete(e.evicted, u)
		}
	}
	e.evicted[uid] = now
}

// Evicted reports whether evictd evicted the pod with this UID (in the last
// ownEvictionsKept).
func (e *Evictor) Evicted(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.evicted[uid]
	return ok
}

var (
	_ agent.Evictor = (*Evictor)(nil)
	_ agent.Holder  = (*Evictor)(nil)
)

// Hold implements agent.Holder: the pod's cgroup on this node is held at
// its usage before the eviction goes to the API server, so the pod stops
// growing during the round trip, the kubelet's watch and the grace period;
// the kubelet's kill (SIGTERM, then SIGKILL through the runtime) then works
// on it as on any pod, since nothing is frozen.
func (e *Evictor) Hold(pod *v1.Pod, r actuate.Resource) (*actuate.Hold, error) {
	if e.Killer == nil || e.PodDir == nil {
		return nil, errors.New("no local cgroup access")
	}
	dir, ok := e.PodDir(pod)
	if !ok {
		return nil, fmt.Errorf("no cgroup found for pod %s/%s (uid %s)", pod.Namespace, pod.Name, pod.UID)
	}
	return e.Killer.Hold(actuate.Target{Name: pod.Namespace + "/" + pod.Name, Cgroup: dir}, r)
}

func (e *Evictor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Evictor) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

func (e *Evictor) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := e.CallTimeout
	if d <= 0 {
		d = DefaultCallTimeout
	}
	return context.WithTimeout(ctx, d)
}

// Evict implements agent.Evictor. It returns when the API server accepted
// the eviction (or the deletion); the agent then waits for the pod to be
// gone from the informer, as the kubelet waits for its cleanup.
func (e *Evictor) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (agent.EvictResult, error) {
	start := e.now()
	secs := int64(grace / time.Second)
	// Through the API a grace period of 0 is a force delete: the pod object
	// goes at once while its containers may still run. The kubelet's own
	// kill with 0 (evictionMaxPodGracePeriod 0) waits the runtime's minimum
	// of 2 s instead; 1 s through the API leads the kubelet to the same.
	if secs < 1 {
		secs = 1
	}
	if e.DryRun {
		return agent.EvictResult{Method: fmt.Sprintf("dry-run (would evict through the Eviction API, grace %ds)", secs), DryRun: true}, nil
	}
	res := agent.EvictResult{Method: "Eviction API"}
	done := func(err error) (agent.EvictResult, error) {
		res.Took = e.now().Sub(start)
		return res, err
	}
	err := e.evict(ctx, pod, secs)
	switch {
	case err == nil:
	case ev.Immediate && e.Local != nil && unreachable(err):
		how, lerr := e.Local.wait(ctx, pod, grace)
		if lerr != nil {
			return done(fmt.Errorf("eviction API: %w; local kill: %v", err, lerr))
		}
		if how == "" {
			return done(fmt.Errorf("eviction API: %w (the pod's processes stopped meanwhile)", err))
		}
		res.Method, res.Gone = how+" (eviction API: "+err.Error()+")", true
		return done(nil)
	case gone(err):
		e.forget(pod.UID)
		res.Method, res.Gone = "already gone (deleted or replaced meanwhile)", true
		return done(nil)
	case apierrors.IsTooManyRequests(err):
		if !e.overridePDB(pod.UID, ev.Immediate) {
			return done(fmt.Errorf("a PodDisruptionBudget refused the eviction (429): %w; %s", err, e.pdbPlan(pod.UID)))
		}
		if derr := e.delete(ctx, pod, secs); derr != nil {
			if gone(derr) {
				e.forget(pod.UID)
				res.Method, res.Gone = "already gone (deleted or replaced meanwhile)", true
				return done(nil)
			}
			return done(fmt.Errorf("a PodDisruptionBudget refused the eviction and the delete failed: %w", derr))
		}
		res.Method = "delete (a PodDisruptionBudget refused the eviction)"
	default:
		// Refused (a 4xx other than a PDB's, or a 5xx for an eviction
		// with no local fallback): nothing happened to the pod.
		return done(fmt.Errorf("eviction API: %w (%w)", err, agent.ErrUntouched))
	}
	e.forget(pod.UID)
	e.noteEvicted(pod.UID)
	e.record(pod, ev)
	if ev.Immediate && e.Local != nil {
		how, lerr := e.Local.wait(ctx, pod, grace)
		if lerr != nil {
			return done(fmt.Errorf("%s accepted, but the local kill after the deadline failed: %w", res.Method, lerr))
		}
		if how != "" {
			res.Method += ", then " + how
			res.Gone = true
		}
	}
	return done(nil)
}

func gone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }

// evict posts an Eviction with the grace period and the UID precondition,
// without client-go's retries on 429.
func (e *Evictor) evict(ctx context.Context, pod *v1.Pod, grace int64) error {
	ctx, cancel := e.callCtx(ctx)
	defer cancel()
	uid := pod.UID
	body := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{
			GracePeriodSeconds: &grace,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		},
	}
	return e.Client.Core().Post().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("eviction").
		MaxRetries(0).Body(body).Do(ctx).Error()
}

func (e *Evictor) delete(ctx context.Context, pod *v1.Pod, grace int64) error {
	ctx, cancel := e.callCtx(ctx)
	defer cancel()
	uid := pod.UID
	return e.Client.Core().Delete().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		MaxRetries(0).Body(&metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}}).
		Do(ctx).Error()
}

// overridePDB notes a PDB refusal and says whether to delete now.
func (e *Evictor) overridePDB(uid types.UID, immediate bool) bool {
	if immediate {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refused == nil {
		e.refused = map[types.UID]time.Time{}
	}
	first, ok := e.refused[uid]
	if !ok {
		first = e.now()
		e.refused[uid] = first
	}
	return e.PDBWait >= 0 && e.now().Sub(first) >= e.PDBWait
}

func (e *Evictor) pdbPlan(uid types.UID) string {
	if e.PDBWait < 0 {
		return "not overriding it (--pdb-wait < 0); retrying at the next synchronize"
	}
	e.mu.Lock()
	first := e.refused[uid]
	e.mu.Unlock()
	left := e.PDBWait - e.now().Sub(first)
	return fmt.Sprintf("retrying at the next synchronize, deleting the pod if still refused after %s (in %s)", e.PDBWait, left.Round(time.Second))
}

func (e *Evictor) forget(uid types.UID) {
	e.mu.Lock()
	delete(e.refused, uid)
	e.mu.Unlock()
}

// record hands the kubelet's DisruptionTarget condition and Evicted Event
// to their recorders. Failures are logged there: the pod is on its way out
// either way.
func (e *Evictor) record(pod *v1.Pod, ev policy.Eviction) {
	name := pod.Namespace + "/" + pod.Name
	at := e.now()
	if ev.Condition != nil {
		c := *ev.Condition
		e.Conditions.Post("the DisruptionTarget condition of "+name, func(ctx context.Context) error {
			if err := e.patchCondition(ctx, pod, c, at); err != nil && !gone(err) {
				return err
			}
			return nil
		})
	}
	ref := podRef(pod)
	e.Events.Post("the Evicted event of "+name, func(ctx context.Context) error {
		return createEvent(ctx, e.Client, e.Node, ref, ev.Pod.Namespace, policy.Reason, ev.Message, ev.Annotations, at)
	})
}

func podRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

// patchCondition sets the DisruptionTarget condition through pods/status
// with a strategic merge patch (conditions merge by type), after the
// eviction, so it replaces the one the Eviction API sets
// (EvictionByEvictionAPI). A UID precondition in the patch keeps it off a
// replacement pod of the same name.
func (e *Evictor) patchCondition(ctx context.Context, pod *v1.Pod, c v1.PodCondition, at time.Time) error {
	c.LastTransitionTime = metav1.NewTime(at)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []v1.PodCondition{c}},
	})
	if err != nil {
		return err
	}
	_, err = e.Client.PatchPodStatus(ctx, pod.Namespace, pod.Name, types.StrategicMergePatchType, patch)
	return err
}

// createEvent creates a Warning Event as the kubelet's recorder does
// (source component "evictd" on this node), in the namespace given (""
// is "default", where the kubelet's node Events go).
func createEvent(ctx context.Context, client *kubeclient.Client, node string, ref v1.ObjectReference, namespace, reason, message string, ann map[string]string, now time.Time) error {
	if client == nil {
		return errors.New("no API client")
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	t := metav1.NewTime(now)
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: namespace, Annotations: ann},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                v1.EventTypeWarning,
		Source:              v1.EventSource{Component: Component, Host: node},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		ReportingController: Component,
		ReportingInstance:   Component + "-" + node,
	}
	_, err := client.CreateEvent(ctx, ev)
	return err
}
