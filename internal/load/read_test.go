package load

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestReadFileCap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pods.json")
	if err := os.WriteFile(p, []byte(strings.Repeat(" ", 1025)+"[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer SetMaxInputBytes(0)
	SetMaxInputBytes(1024)
	_, err := PodsFile(p)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p+": file too large: 1027 bytes, more than the 1024-byte cap (raise it with --max-input-size)") {
		t.Fatalf("err = %v", err)
	}
	// A pipe has no size to stat: the read itself stops at the cap.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write(make([]byte, 4096)); w.Close() }()
	defer r.Close()
	if _, err := ReadFile("/dev/fd/" + strconv.Itoa(int(r.Fd()))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("pipe: err = %v", err)
	}
	SetMaxInputBytes(0)
	if _, err := PodsFile(p); err != nil {
		t.Fatalf("default cap: %v", err)
	}
}

func TestReadYAMLFileRefusesACutFile(t *testing.T) {
	dir := t.TempDir()
	whole := "workloads:\n- name: web\n  cgroup: web\n  priority: 10\n"
	write := func(s string) string {
		p := filepath.Join(dir, "w.yaml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := ReadYAMLFile(write(whole)); err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(whole); cut++ {
		if whole[cut-1] == '\n' {
			continue // a cut at a line end is a shorter file
		}
		_, err := ReadYAMLFile(write(whole[:cut]))
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d (%q): err = %v", cut, whole[:cut], err)
		}
	}
	if _, err := ReadYAMLFile(write(`{"workloads":[]}`)); err != nil {
		t.Fatalf("JSON without a newline: %v", err)
	}
}

func TestPodListWithoutItems(t *testing.T) {
	_, err := ParsePods([]byte("kind: PodList\napiVersion: v1\n"), "in.yaml")
	if err == nil || !strings.Contains(err.Error(), "in.yaml: items: required in a PodList") {
		t.Fatalf("err = %v", err)
	}
}

// A file of the wrong kind (a secret) is refused without its keys.
func TestWrongDocumentNotEchoed(t *testing.T) {
	for _, doc := range []string{
		"root:$y$j9T$secret:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
		"user: admin\npassword: hunter2\n",
		"root:$y$j9T$secret: x\n",
	} {
		_, err := ParseSummary([]byte(doc), "in.yaml")
		if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "root") ||
			strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "password") {
			t.Errorf("%q: err = %v", doc, err)
		}
	}
	// One mistyped field is still named.
	if _, err := ParseSummary([]byte("nod: {}\n"), "in.yaml"); err == nil || err.Error() != "in.yaml: nod: unknown field" {
		t.Errorf("typo: err = %v", err)
	}
}

func TestKubeletConfigLenient(t *testing.T) {
	doc := "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" +
		"evictionHard: {memory.available: 1Gi}\nevictionHard: {memory.available: 2Gi}\nfutureField: 3\n"
	if _, err := ParseKubeletConfig([]byte(doc), "c.yaml"); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("strict: err = %v", err)
	}
	d, err := ParseKubeletDocument([]byte(doc), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kc, warns := d.Config, d.Warnings
	if kc.EvictionHard["memory.available"] != "2Gi" {
		t.Errorf("the last duplicate must win, as in the kubelet: %v", kc.EvictionHard)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.Error())
	}
	want := []string{
		`c.yaml: evictionHard: "evictionHard": duplicate key (lines 3 and 4); the kubelet would silently keep the last one`,
		`c.yaml: futureField: unknown field`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Anything but unknown fields and duplicates stays an error.
	for _, bad := range []string{
		"futureField: 1\nevictionMaxPodGracePeriod: soon\n",
		"kind: Pod\nfutureField: 1\n",
		"user: admin\npassword: hunter2\n",
		// One unknown key and nothing of a KubeletConfiguration: not read
		// as one with the kubelet's defaults.
		"kubeletConfig: {evictionHard: {memory.available: 1Gi}}\n",
		"futureField: 1\n",
	} {
		if _, err := ParseKubeletDocument([]byte(bad), "c.yaml"); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// A /configz dump is read as the KubeletConfiguration it holds; its errors
// and warnings name its fields under kubeletconfig.
func TestParseKubeletDocumentConfigz(t *testing.T) {
	const dump = `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1",` +
		`"evictionHard":{"memory.available":"200Mi","nodefs.available":"10%"},"evictionPressureTransitionPeriod":"5m0s","aNewerField":1}}`
	d, err := ParseKubeletDocument([]byte(dump), "configz.json")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Configz || d.Config.EvictionHard["memory.available"] != "200Mi" || !d.Present["evictionPressureTransitionPeriod"] {
		t.Errorf("configz %v, evictionHard %v, present %v", d.Configz, d.Config.EvictionHard, d.Present)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Error() != "configz.json: kubeletconfig.aNewerField: unknown field" {
		t.Errorf("warnings %v", d.Warnings)
	}
	for bad, want := range map[string]string{
		`{"kubeletconfig":{"evictionMaxPodGracePeriod":"soon"}}`: `configz.json: kubeletconfig.evictionMaxPodGracePeriod: "soon": want a whole number`,
		`{"kubeletconfig":[1]}`:                                  "configz.json: kubeletconfig: is a list, want the KubeletConfiguration object of a /configz dump",
		`{"kubeletconfig":{"kind":"Pod"}}`:                       `configz.json: kubeletconfig.kind: "Pod": want KubeletConfiguration`,
		`{"kubeletconfig":{"user":"admin"}}`:                     "configz.json: kubeletconfig: none of its keys is a field",
	} {
		if _, err := ParseKubeletDocument([]byte(bad), "configz.json"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", bad, err, want)
		}
	}
}

// Drop-ins: one object, a duplicate key refused (YAML and JSON alike),
// unknown fields left to the merged decode.
func TestParseKubeletDropIn(t *testing.T) {
	d, err := ParseKubeletDropIn([]byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard: {memory.available: ~}\nfuture: 1\n"), "10.conf")
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != KubeletConfigKind || d.APIVersion != KubeletConfigAPIVersion || !strings.Contains(string(d.Patch), `"memory.available":null`) {
		t.Errorf("%+v %s", d, d.Patch)
	}
	for bad, want := range map[string]string{
		"evictionHard: {}\nevictionHard: {}\n":  "10.conf: evictionHard: \"evictionHard\": duplicate key: the kubelet refuses a drop-in",
		`{"evictionSoft":{},"evictionSoft":{}}`: "10.conf: evictionSoft: duplicate key: the kubelet refuses a drop-in",
		"- evictionHard: {}\n":                  "10.conf: top level is a list",
		"\n# nothing\n":                         "10.conf: file is empty",
	} {
		if _, err := ParseKubeletDropIn([]byte(bad), "10.conf"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", bad, err, want)
		}
	}
}

// The merged configuration is decoded as encoding/json does in the
// kubelet: field names match case-insensitively, unknown fields are dropped,
// and a wrong type names its field.
func TestDecodeKubeletMerged(t *testing.T) {
	kc, err := DecodeKubeletMerged([]byte(`{"EvictionSoft":{"memory.available":"1Gi"},"unknown":1}`), "merged")
	if err != nil || kc.EvictionSoft["memory.available"] != "1Gi" {
		t.Fatalf("%v %v", kc, err)
	}
	if _, err := DecodeKubeletMerged([]byte(`{"evictionMaxPodGracePeriod":"30"}`), "merged"); err == nil ||
		err.Error() != `merged: evictionMaxPodGracePeriod: "30": want a whole number` {
		t.Errorf("err %v", err)
	}
}
