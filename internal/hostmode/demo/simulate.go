package demo

import (
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/hog"
)

// simStep is the simulated time between two synchronizes: the real agent is
// woken by the kernel at the crossing; a simulation can only look often.
const simStep = 250 * time.Millisecond

// Simulate tells the same story without root: the workloads' memory follows
// their scripts on paper, and the same policy engine decides every 250 ms of
// simulated time, as "evictd simulate" runs a scenario. Kills are instant.
func Simulate(out io.Writer) (*Summary, error) {
	cfg, err := policy.ConfigFromKubelet(Config())
	if err != nil {
		return nil, err
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		return nil, err
	}
	file := File()
	var pods []*v1.Pod
	scripts := map[string][]hog.Step{}
	for i, s := range file.Workloads {
		pods = append(pods, simPod(file.Workloads[i]))
		steps, err := hog.ParseScript(roles[i].script)
		if err != nil {
			return nil, err
		}
		scripts[s.Name] = steps
	}
	fmt.Fprintf(out, "evictd demo (simulated: same workloads, thresholds and engine; memory follows the scripts on paper)\n")
	fmt.Fprintf(out, "Sandbox limit %s; hard allocatableMemory.available<%s, soft <%s for %s.\n\n", q(limitBytes), hardText, softText, softGrace)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gone := map[string]time.Duration{} // evicted at
	sum := &Summary{Evictions: []Eviction{}}
	lastMet := ""
	for el := time.Duration(0); el <= 25*time.Second; el += simStep {
		now := start.Add(el)
		var active []*v1.Pod
		var podStats []statsv1alpha1.PodStats
		var total uint64
		for _, p := range pods {
			if _, ok := gone[p.Name]; ok {
				continue
			}
			ws := uint64(usageAt(scripts[p.Name], el))
			total += ws
			active = append(active, p)
			podStats = append(podStats, statsv1alpha1.PodStats{
				PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
				Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: u64p(ws), UsageBytes: u64p(ws)},
			})
		}
		if total > limitBytes {
			sum.KernelOOMKills++ // would not happen in this story; counted if it did
		}
		nodeAvail, nodeWS := uint64(64<<30), total
		s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
			Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: &nodeAvail, WorkingSetBytes: &nodeWS, UsageBytes: &nodeWS},
			SystemContainers: []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods,
				Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: u64p(limitBytes - total), WorkingSetBytes: u64p(total), UsageBytes: u64p(total)}}},
		}, Pods: podStats}
		d := eng.Step(now, policy.Input{Summary: s, Pods: active})
		if met := metText(d, false); met != lastMet {
			if met == "" {
				fmt.Fprintf(out, "[%5.1fs] recovered: no threshold met — %s\n", el.Seconds(), availText(d))
			} else {
				fmt.Fprintf(out, "[%5.1fs] %s\n", el.Seconds(), metText(d, true))
			}
			lastMet = met
		}
		for _, ev := range d.Evictions {
			n := &narrator{w: out, start: time.Now().Add(-el)}
			narrateDecision(n, agent.Trigger{Reason: "simulated synchronize", At: time.Now()}, d, agent.Action{Pod: ev.Pod,
				Grace: time.Duration(ev.GracePeriodSeconds) * time.Second, Message: ev.Message})
			gone[ev.Pod.Name] = el
			sum.Evictions = append(sum.Evictions, Eviction{Workload: ev.Pod.Name, Signal: ev.Signal,
				GracePeriodSeconds: ev.GracePeriodSeconds, Trigger: fmt.Sprintf("simulated synchronize every %s", simStep)})
		}
	}
	return sum, nil
}

func u64p(v uint64) *uint64 { return &v }

func simPod(s workload.Spec) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: workload.Namespace, UID: workload.UID(s.Name), Annotations: map[string]string{}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: s.Requests, Limits: s.Limits}}},
			Priority: &s.Priority, TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds}}
	if s.Critical {
		p.Annotations["kubernetes.io/config.source"] = "file"
	}
	return p
}

// usageAt is the memory a hog script holds el after it starts.
func usageAt(steps []hog.Step, el time.Duration) int64 {
	var held int64
	t := time.Duration(0)
	for _, st := range steps {
		switch st.Op {
		case "alloc":
			held += st.Bytes
		case "sleep":
			if el < t+st.Dur {
				return held
			}
			t += st.Dur
		case "ramp":
			d := time.Duration(float64(st.Bytes) / float64(st.Rate) * float64(time.Second))
			if el < t+d {
				return held + int64(float64(st.Rate)*(el-t).Seconds())
			}
			held += st.Bytes
			t += d
		case "hold":
			return held
		case "free":
			held = 0
		}
	}
	return held
}
