package load

import (
	"errors"
	"github.com/spf13/pflag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestParseKubeletConfigDecodes(t *testing.T) {
	yamlDoc := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  memory.available: 200Mi
  nodefs.available: "10%"
evictionSoft: {memory.available: 500Mi}
evictionSoftGracePeriod:
  memory.available: 1m30s
evictionMaxPodGracePeriod: 30
evictionPressureTransitionPeriod: 2m
kernelMemcgNotification: true
systemReserved: {memory: 1Gi}
`
	jsonDoc := `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
"evictionHard":{"memory.available":"200Mi","nodefs.available":"10%"},"evictionSoft":{"memory.available":"500Mi"},
"evictionSoftGracePeriod":{"memory.available":"1m30s"},"evictionMaxPodGracePeriod":30,
"evictionPressureTransitionPeriod":"2m","kernelMemcgNotification":true,"systemReserved":{"memory":"1Gi"}}`
	for name, doc := range map[string]string{"yaml": yamlDoc, "json": jsonDoc} {
		t.Run(name, func(t *testing.T) {
			kc, err := ParseKubeletConfig([]byte(doc), "config")
			if err != nil {
				t.Fatal(err)
			}
			if got := kc.EvictionHard["memory.available"]; got != "200Mi" {
				t.Errorf("evictionHard[memory.available] = %q", got)
			}
			if got := kc.EvictionHard["nodefs.available"]; got != "10%" {
				t.Errorf("evictionHard[nodefs.available] = %q", got)
			}
			if kc.EvictionSoft["memory.available"] != "500Mi" || kc.EvictionSoftGracePeriod["memory.available"] != "1m30s" {
				t.Errorf("soft = %v grace = %v", kc.EvictionSoft, kc.EvictionSoftGracePeriod)
			}
			if kc.EvictionMaxPodGracePeriod != 30 || kc.EvictionPressureTransitionPeriod.Duration != 2*time.Minute {
				t.Errorf("max grace %d transition %v", kc.EvictionMaxPodGracePeriod, kc.EvictionPressureTransitionPeriod.Duration)
			}
			if kc.KernelMemcgNotification != true || kc.SystemReserved["memory"] != "1Gi" {
				t.Errorf("kernelMemcgNotification %v systemReserved %v", kc.KernelMemcgNotification, kc.SystemReserved)
			}
			if kc.EvictionMinimumReclaim != nil {
				t.Errorf("absent evictionMinimumReclaim decoded as %v, want nil", kc.EvictionMinimumReclaim)
			}
		})
	}
}

// Absent, null and empty evictionHard must stay distinguishable: the
// kubelet's defaulting depends on nil versus present.
func TestParseKubeletConfigKeepsAbsentVersusEmpty(t *testing.T) {
	for _, tc := range []struct {
		doc     string
		wantNil bool
	}{
		{"kind: KubeletConfiguration\n", true},
		{"evictionHard:\n", true},
		{"evictionHard: null\n", true},
		{"evictionHard: {}\n", false},
		{`{"evictionHard":{}}`, false},
	} {
		kc, err := ParseKubeletConfig([]byte(tc.doc), "c")
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		if (kc.EvictionHard == nil) != tc.wantNil {
			t.Errorf("%q: evictionHard nil = %v, want %v", tc.doc, kc.EvictionHard == nil, tc.wantNil)
		}
	}
}

func TestParseKubeletConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      string // the whole error line
		is        error
	}{
		{"empty", "", "config.yaml: file is empty", ErrEmpty},
		{"whitespace", " \n\t\n", "config.yaml: file is empty", ErrEmpty},
		{"only comments", "# nothing here\n", "config.yaml: file is empty", ErrEmpty},
		{"null", "null\n", "config.yaml: file is empty", ErrEmpty},
		{"typo", "evictionHrad:\n  memory.available: 1Gi\n", "config.yaml: evictionHrad: unknown field", ErrUnknownField},
		{"nested unknown", "authentication:\n  anonymus: {enabled: true}\n", "config.yaml: authentication.anonymus: unknown field", ErrUnknownField},
		{"json typo", `{"evictionHrad":{}}`, "config.yaml: evictionHrad: unknown field", ErrUnknownField},
		{"duplicate yaml key", "evictionHard:\n  memory.available: 1Gi\n  memory.available: 2Gi\n",
			`config.yaml: evictionHard.memory.available: "memory.available": duplicate key (lines 2 and 3); the kubelet would silently keep the last one`, ErrDuplicateKey},
		{"duplicate top key", "evictionMaxPodGracePeriod: 1\nevictionMaxPodGracePeriod: 2\n",
			`config.yaml: evictionMaxPodGracePeriod: "evictionMaxPodGracePeriod": duplicate key (lines 1 and 2); the kubelet would silently keep the last one`, ErrDuplicateKey},
		{"duplicate json key", `{"evictionHard":{"memory.available":"1Gi","memory.available":"2Gi"}}`,
			"config.yaml: evictionHard.memory.available: duplicate key", ErrDuplicateKey},
		{"wrong type int", "evictionMaxPodGracePeriod: abc\n", `config.yaml: evictionMaxPodGracePeriod: "abc": want a whole number`, nil},
		{"int overflow", "evictionMaxPodGracePeriod: 99999999999\n", `config.yaml: evictionMaxPodGracePeriod: "99999999999": want a whole number that fits int32`, nil},
		{"wrong type bool", "kernelMemcgNotification: maybe\n", `config.yaml: kernelMemcgNotification: "maybe": want true or false`, nil},
		{"bad duration", "evictionPressureTransitionPeriod: 5 minutes\n",
			`config.yaml: evictionPressureTransitionPeriod: "5 minutes": time: unknown unit " minutes" in duration "5 minutes"`, nil},
		{"map value not a string", "evictionHard:\n  memory.available: [1Gi]\n", `config.yaml: evictionHard.memory.available: "[\"1Gi\"]": want a string (quote the value)`, nil},
		{"unquoted number for a string", "evictionHard:\n  pid.available: 1000\n", `config.yaml: evictionHard.pid.available: "1000": want a string (quote the value)`, nil},
		{"map is a list", "evictionHard: [a, b]\n", `config.yaml: evictionHard: "[\"a\",\"b\"]": want a map`, nil},
		{"top is list", "- a\n- b\n", "config.yaml: top level is a list, want a KubeletConfiguration object", nil},
		{"top is scalar", "hello\n", "config.yaml: top level is a scalar, want a KubeletConfiguration object", nil},
		{"wrong kind", "kind: Pod\napiVersion: v1\n", `config.yaml: kind: "Pod": want KubeletConfiguration`, nil},
		{"wrong apiVersion", "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1\n",
			`config.yaml: apiVersion: "kubelet.config.k8s.io/v1": want kubelet.config.k8s.io/v1beta1`, nil},
		{"two documents", "kind: KubeletConfiguration\n---\nkind: KubeletConfiguration\n",
			"config.yaml: more than one YAML document (---); put one object in the file", nil},
		{"yaml syntax", "evictionHard: {memory.available: 1Gi\n", "", nil},
		{"tab indentation", "evictionHard:\n\tmemory.available: 1Gi\n", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKubeletConfig([]byte(tc.doc), "config.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *load.Error", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			if !strings.HasPrefix(msg, "config.yaml: ") {
				t.Errorf("error does not start with the file name: %q", msg)
			}
			if tc.want != "" && msg != tc.want {
				t.Errorf("error\n got %s\nwant %s", msg, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
		})
	}
}

func TestKubeletConfigFileNamesMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := KubeletConfigFile(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func TestTestdataConfigsDecode(t *testing.T) {
	for _, f := range []string{"testdata/kubelet-config.yaml", "testdata/kubelet-config.json"} {
		kc, err := KubeletConfigFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(kc.EvictionHard) == 0 || kc.Kind != KubeletConfigKind {
			t.Errorf("%s: evictionHard %v kind %q", f, kc.EvictionHard, kc.Kind)
		}
	}
}

func TestEvictionFlagsApply(t *testing.T) {
	base := func() *kubeletconfigv1beta1.KubeletConfiguration {
		yes := true
		return &kubeletconfigv1beta1.KubeletConfiguration{
			EvictionHard:                     map[string]string{"memory.available": "1Gi", "nodefs.available": "5%"},
			EvictionSoft:                     map[string]string{"memory.available": "2Gi"},
			EvictionSoftGracePeriod:          map[string]string{"memory.available": "1m"},
			EvictionMinimumReclaim:           map[string]string{"memory.available": "0"},
			EvictionMaxPodGracePeriod:        10,
			MergeDefaultEvictionSettings:     &yes,
			EvictionPressureTransitionPeriod: metav1Duration(time.Minute),
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration)
	}{
		{"no flags leave the file alone", nil, func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
			if len(kc.EvictionHard) != 2 || kc.EvictionMaxPodGracePeriod != 10 || !*kc.MergeDefaultEvictionSettings {
				t.Errorf("changed: %+v", kc)
			}
		}},
		{"hard replaces the whole map and stops the default merge", []string{"--eviction-hard=memory.available<100Mi"},
			func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
				if len(kc.EvictionHard) != 1 || kc.EvictionHard["memory.available"] != "100Mi" {
					t.Errorf("evictionHard = %v", kc.EvictionHard)
				}
				if *kc.MergeDefaultEvictionSettings {
					t.Error("mergeDefaultEvictionSettings still true after --eviction-hard")
				}
				if kc.EvictionSoft["memory.available"] != "2Gi" {
					t.Errorf("evictionSoft changed: %v", kc.EvictionSoft)
				}
			}},
		{"comma list, spaces trimmed, repeated flag accumulates, last key wins",
			[]string{"--eviction-hard", "memory.available < 100Mi, nodefs.available<10%", "--eviction-hard=memory.available<300Mi,imagefs.available<15%"},
			func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
				want := map[string]string{"memory.available": "300Mi", "nodefs.available": "10%", "imagefs.available": "15%"}
				if !equalMaps(kc.EvictionHard, want) {
					t.Errorf("evictionHard = %v, want %v", kc.EvictionHard, want)
				}
			}},
		{"empty flag gives an empty, non-nil map", []string{"--eviction-hard="},
			func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
				if kc.EvictionHard == nil || len(kc.EvictionHard) != 0 {
					t.Errorf("evictionHard = %#v", kc.EvictionHard)
				}
			}},
		{"grace periods and reclaims use k=v", []string{"--eviction-soft=memory.available<1.5Gi", "--eviction-soft-grace-period=memory.available=1m30s",
			"--eviction-minimum-reclaim=memory.available=0Mi,nodefs.available=500Mi"},
			func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
				if !equalMaps(kc.EvictionSoft, map[string]string{"memory.available": "1.5Gi"}) ||
					!equalMaps(kc.EvictionSoftGracePeriod, map[string]string{"memory.available": "1m30s"}) ||
					!equalMaps(kc.EvictionMinimumReclaim, map[string]string{"memory.available": "0Mi", "nodefs.available": "500Mi"}) {
					t.Errorf("soft %v grace %v reclaim %v", kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
				}
				if !*kc.MergeDefaultEvictionSettings {
					t.Error("merge setting changed without --eviction-hard")
				}
			}},
		{"scalars override", []string{"--eviction-max-pod-grace-period=-1", "--eviction-pressure-transition-period=0s"},
			func(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) {
				if kc.EvictionMaxPodGracePeriod != -1 || kc.EvictionPressureTransitionPeriod.Duration != 0 {
					t.Errorf("max grace %d transition %v", kc.EvictionMaxPodGracePeriod, kc.EvictionPressureTransitionPeriod.Duration)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			ef := RegisterEvictionFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			kc := base()
			if err := ef.Apply(kc); err != nil {
				t.Fatal(err)
			}
			tc.check(t, kc)
		})
	}
}

func TestEvictionFlagsRejectMalformed(t *testing.T) {
	for _, args := range [][]string{
		{"--eviction-hard=memory.available=100Mi"},
		{"--eviction-soft-grace-period=memory.available<1m"},
		{"--eviction-max-pod-grace-period=12abc"},
		{"--eviction-max-pod-grace-period=99999999999"},
		{"--eviction-pressure-transition-period=5"},
	} {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		RegisterEvictionFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// The flag package's help printer calls String on zero values; the kubelet's
// map types would dereference a nil pointer there.
func TestEvictionFlagsHelpDoesNotPanic(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	RegisterEvictionFlags(fs)
	fs.PrintDefaults()
	if strings.Contains(out.String(), "panic") || !strings.Contains(out.String(), "-eviction-hard") {
		t.Errorf("help:\n%s", out.String())
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestParseKubeletDocumentPresent(t *testing.T) {
	doc, err := ParseKubeletDocument([]byte("evictionPressureTransitionPeriod: 0s\nevictionSoft: null\nkind: KubeletConfiguration\n"), "c")
	if err != nil {
		t.Fatal(err)
	}
	kc, present := doc.Config, doc.Present
	if kc.EvictionPressureTransitionPeriod.Duration != 0 || !present["evictionPressureTransitionPeriod"] || !present["kind"] {
		t.Errorf("present = %v", present)
	}
	if present["evictionSoft"] || present["evictionHard"] {
		t.Errorf("null or absent fields reported present: %v", present)
	}
}
