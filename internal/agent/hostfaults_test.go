package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func hostOptions(t *testing.T, rootRel string, logs *bytes.Buffer) HostOptions {
	t.Helper()
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	return HostOptions{Policy: cfg, WorkloadRoot: rootRel, Log: logTo(logs), MemcgNotification: Auto, PSI: Off, MemoryEvents: Off, FastPoll: Off}
}

// A second agent on the same workloads, or on cgroups inside or around
// them, is refused with the PID of the first; one on another root is not.
// A dry run (which changes nothing) may run beside a real agent.
func TestSecondInstanceRefused(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	inner, err := sb.Child("inner")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sb.Child("other")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	first, err := NewHost(hostOptions(t, inner.Rel, &logs))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{inner.Rel, sb.Parent.Rel} {
		_, err := NewHost(hostOptions(t, rel, &logs))
		if !errors.Is(err, ErrOtherInstance) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("second agent on %s: err = %v, want %v naming pid %d", rel, err, ErrOtherInstance, os.Getpid())
		}
	}
	dry := hostOptions(t, inner.Rel, &logs)
	dry.DryRun = true
	if h, err := NewHost(dry); err != nil {
		t.Fatalf("a dry run beside a real agent: %v", err)
	} else {
		h.Wakeups.Close()
		h.Pods.Close()
	}
	sibling, err := NewHost(hostOptions(t, other.Rel, &logs))
	if err != nil {
		t.Fatalf("an agent on another root: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sibling.Run(ctx)
	first.Run(ctx) // returns at once and drops the lock
	again, err := NewHost(hostOptions(t, inner.Rel, &logs))
	if err != nil {
		t.Fatalf("after the first agent stopped: %v", err)
	}
	again.Run(ctx)
}
