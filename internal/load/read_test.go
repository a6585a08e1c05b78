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
	kc, warns, err := ParseKubeletConfigLenient([]byte(doc), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
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
	} {
		if _, _, err := ParseKubeletConfigLenient([]byte(bad), "c.yaml"); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
