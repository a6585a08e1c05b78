package load

import (
	"errors"
	"strings"
	"testing"
)

// The kubelet falls back to lenient decoding on unknown fields and
// duplicate keys (keeping the last); everything else stays an error.
func TestParseKubeletConfigLenient(t *testing.T) {
	const head = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
	for _, tc := range []struct {
		name, in string
		warn     error
		err      bool
		hard     string
	}{
		{"strict ok", head + "evictionHard: {memory.available: 300Mi}\n", nil, false, "300Mi"},
		{"unknown field", head + "someFutureField: 1\nevictionHard: {memory.available: 300Mi}\n", ErrUnknownField, false, "300Mi"},
		{"duplicate key keeps the last", head + "evictionHard: {memory.available: 100Mi}\nevictionHard: {memory.available: 200Mi}\n", ErrDuplicateKey, false, "200Mi"},
		{"wrong type", head + "someFutureField: 1\nevictionMaxPodGracePeriod: ten\n", nil, true, ""},
		{"wrong kind", "kind: Pod\napiVersion: v1\n", nil, true, ""},
		{"not yaml", head + "evictionHard: [\n", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, warn, err := ParseKubeletConfigLenient([]byte(tc.in), "config.yaml")
			if tc.err {
				if err == nil {
					t.Fatalf("no error")
				}
				if !strings.Contains(err.Error(), "config.yaml") {
					t.Errorf("error does not name the file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.warn == nil) != (warn == nil) || (tc.warn != nil && !errors.Is(warn, tc.warn)) {
				t.Errorf("warning %v, want %v", warn, tc.warn)
			}
			if got := kc.EvictionHard["memory.available"]; got != tc.hard {
				t.Errorf("evictionHard = %q, want %q", got, tc.hard)
			}
		})
	}
}
