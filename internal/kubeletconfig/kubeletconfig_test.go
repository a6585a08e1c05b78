package kubeletconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

const head = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"

// write creates files (path relative to dir → content) and returns dir.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// thresholds is the policy's view: what the kubelet evicts on.
func thresholds(t *testing.T, c *Config) []string {
	t.Helper()
	cfg, err := policy.ConfigFromKubelet(c.Kubelet)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, th := range cfg.Thresholds {
		out = append(out, th.String())
	}
	return out
}

// The drop-ins of --config-dir are merged over the file as the kubelet
// merges them: in lexical order, subdirectories included, only *.conf, each
// a JSON merge patch (maps merged key by key, null removes a key) over the
// file with the default evictionHard already merged in.
func TestDropInsMergedAsTheKubeletMergesThem(t *testing.T) {
	dir := write(t, map[string]string{
		"config.yaml": head + "evictionHard: {memory.available: 500Mi}\nevictionSoft: {memory.available: 1Gi}\n" +
			"evictionSoftGracePeriod: {memory.available: 1m}\nevictionMaxPodGracePeriod: 30\n",
		"d/10-disk.conf":   head + "evictionHard: {nodefs.available: 5%}\nevictionMaxPodGracePeriod: 60\n",
		"d/20-memory.conf": head + "evictionHard: {memory.available: 300Mi}\nevictionSoft: {memory.available: null}\nevictionSoftGracePeriod: null\n",
		// A subdirectory's files come where the directory sorts: after 20-.
		"d/30/05-last.conf": head + "evictionMaxPodGracePeriod: 90\n",
		// Skipped: not .conf.
		"d/40-ignored.yaml":     head + "evictionHard: {memory.available: 10Gi}\n",
		"d/50-ignored.conf.bak": head + "evictionHard: {memory.available: 10Gi}\n",
	})
	c, err := Read(Source{File: filepath.Join(dir, "config.yaml"), DropInDir: filepath.Join(dir, "d")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Kubelet.EvictionHard, map[string]string{"memory.available": "300Mi", "nodefs.available": "5%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("evictionHard %v, want %v (the file's partial map, no defaults, merged key by key)", got, want)
	}
	if len(c.Kubelet.EvictionSoft) != 0 || c.Kubelet.EvictionSoftGracePeriod != nil {
		t.Errorf("null did not remove: soft %v grace %v", c.Kubelet.EvictionSoft, c.Kubelet.EvictionSoftGracePeriod)
	}
	if c.Kubelet.EvictionMaxPodGracePeriod != 90 {
		t.Errorf("evictionMaxPodGracePeriod %d, want 90 from d/30/05-last.conf, merged last", c.Kubelet.EvictionMaxPodGracePeriod)
	}
	wantFiles := []string{"config.yaml", "d/10-disk.conf", "d/20-memory.conf", "d/30/05-last.conf"}
	for i := range wantFiles {
		wantFiles[i] = filepath.Join(dir, wantFiles[i])
	}
	if !reflect.DeepEqual(c.Files, wantFiles) || len(c.Skipped) != 2 {
		t.Errorf("files %v, skipped %v", c.Files, c.Skipped)
	}
	if !c.Final || c.Present["evictionSoftGracePeriod"] || !c.Present["evictionMaxPodGracePeriod"] {
		t.Errorf("final %v, present %v", c.Final, c.Present)
	}
	if got, want := strings.Join(thresholds(t, c), " "), "memory.available<300Mi nodefs.available<5% allocatableMemory.available<300Mi"; got != want {
		t.Errorf("thresholds %s, want %s", got, want)
	}
	if got := c.Describe(); got != filepath.Join(dir, "config.yaml")+" + "+filepath.Join(dir, "d")+" (3 drop-ins)" {
		t.Errorf("describe %q", got)
	}
}

// A file without evictionHard gets the defaults before the drop-ins, so a
// drop-in's evictionHard adds to them instead of replacing them.
func TestDropInEvictionHardAddsToTheDefaults(t *testing.T) {
	dir := write(t, map[string]string{
		"config.yaml": head,
		"d/10.conf":   head + "evictionHard: {memory.available: 200Mi, imagefs.available: null}\n",
	})
	c, err := Read(Source{File: filepath.Join(dir, "config.yaml"), DropInDir: filepath.Join(dir, "d")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.inodesFree": "5%"}
	if !reflect.DeepEqual(c.Kubelet.EvictionHard, want) {
		t.Errorf("evictionHard %v, want %v", c.Kubelet.EvictionHard, want)
	}
}

// Without --config, the kubelet never merges the default thresholds: drop-ins
// that set no evictionHard leave the node without hard thresholds, and a
// mergeDefaultEvictionSettings in a drop-in changes nothing (warned).
func TestDropInsWithoutConfigFileGetNoDefaults(t *testing.T) {
	dir := write(t, map[string]string{
		"10.conf": head + "evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\nmergeDefaultEvictionSettings: true\n",
	})
	c, err := Read(Source{DropInDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.ConfigFromKubelet(c.Kubelet)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Thresholds) != 1 || cfg.Thresholds[0].GracePeriod == 0 {
		t.Errorf("thresholds %v, want the soft one alone (no default hard ones without --config)", thresholds(t, c))
	}
	if len(c.Warnings) != 1 || !errors.Is(c.Warnings[0], ErrMergeDefaultsInDropIn) {
		t.Errorf("warnings %v", c.Warnings)
	}
	if got := c.Describe(); got != dir+" (1 drop-in)" {
		t.Errorf("describe %q", got)
	}
}

// encoding/json decodes the merged drop-ins case-insensitively: a key in the
// wrong case applies where the configuration so far does not have the field,
// and loses to the right spelling where it does (the merged keys are sorted,
// the later one wins). Unknown fields are dropped. Both are warned.
func TestDropInKeysCaseInsensitive(t *testing.T) {
	dir := write(t, map[string]string{
		"config.yaml": head + "evictionHard: {memory.available: 100Mi}\n",
		"d/10.conf": head + "EvictionSoft: {memory.available: 1Gi}\nEvictionSoftGracePeriod: {memory.available: 1m}\n" +
			"EvictionHard: {memory.available: 900Mi, pid.available: 10%}\naFutureField: 1\n",
	})
	c, err := Read(Source{File: filepath.Join(dir, "config.yaml"), DropInDir: filepath.Join(dir, "d")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubelet.EvictionSoft["memory.available"] != "1Gi" {
		t.Errorf("EvictionSoft not applied: %v", c.Kubelet.EvictionSoft)
	}
	if got, want := c.Kubelet.EvictionHard, map[string]string{"memory.available": "100Mi", "pid.available": "10%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("evictionHard %v, want %v", got, want)
	}
	var cases, unknown int
	for _, w := range c.Warnings {
		switch {
		case errors.Is(w, ErrFieldCase):
			cases++
		case errors.Is(w, ErrDropInUnknownField) && strings.Contains(w.Error(), "aFutureField"):
			unknown++
		default:
			t.Errorf("unexpected warning %v", w)
		}
	}
	if cases != 3 || unknown != 1 {
		t.Errorf("%d case and %d unknown-field warnings, want 3 and 1: %v", cases, unknown, c.Warnings)
	}
}

// What the kubelet refuses to start with is an error naming the file.
func TestDropInErrors(t *testing.T) {
	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no kind": {map[string]string{"10.conf": "evictionHard: {}\n"}, "10.conf: kind: Object 'Kind' is missing: the kubelet does not start"},
		"other apiVersion": {map[string]string{"10.conf": "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1\n"},
			`10.conf: apiVersion: "kubelet.config.k8s.io/v1": the kubelet does not start: failed to load kubelet dropin file, unknown apiVersion/kind`},
		"duplicate key": {map[string]string{"10.conf": head + "evictionHard: {}\nevictionHard: {}\n"}, "the kubelet refuses a drop-in with a duplicate key"},
		"wrong type":    {map[string]string{"10.conf": head + "evictionMaxPodGracePeriod: soon\n"}, `evictionMaxPodGracePeriod: "soon": want a whole number (the kubelet does not start: failed to unmarshal merged JSON`},
		"empty":         {map[string]string{"10.conf": "\n"}, "10.conf: file is empty"},
	} {
		dir := write(t, c.files)
		_, err := Read(Source{DropInDir: dir})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
	// A wrong type a later drop-in overrides never reaches the kubelet's
	// decoder: no error.
	dir := write(t, map[string]string{"10.conf": head + "evictionMaxPodGracePeriod: soon\n", "20.conf": head + "evictionMaxPodGracePeriod: 30\n"})
	if c, err := Read(Source{DropInDir: dir}); err != nil || c.Kubelet.EvictionMaxPodGracePeriod != 30 {
		t.Errorf("overridden wrong type: %v", err)
	}
	if _, err := Read(Source{DropInDir: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "failed to walk through kubelet dropin directory") {
		t.Errorf("missing directory: %v", err)
	}
}

// The kubelet walks --config-dir with filepath.WalkDir, which does not
// follow a symbolic link at the root: a symlinked drop-in directory is read
// as nothing.
func TestDropInDirSymlinkNotFollowed(t *testing.T) {
	dir := write(t, map[string]string{"real/10.conf": head + "evictionHard: {memory.available: 1Gi}\n"})
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "real"), link); err != nil {
		t.Fatal(err)
	}
	c, err := Read(Source{DropInDir: link})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Kubelet.EvictionHard) != 0 || len(c.Files) != 0 || len(c.Skipped) != 1 {
		t.Errorf("evictionHard %v, files %v, skipped %v", c.Kubelet.EvictionHard, c.Files, c.Skipped)
	}
}

// A /configz dump is final: its evictionHard is the kubelet's, never merged
// with the defaults again, and it takes no drop-ins.
func TestConfigzIsFinal(t *testing.T) {
	dir := write(t, map[string]string{
		"configz.json": `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1",` +
			`"evictionHard":{"memory.available":"1Gi"},"mergeDefaultEvictionSettings":true,"evictionPressureTransitionPeriod":"5m0s"}}`,
		"empty.json": `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1"}}`,
	})
	c, err := Read(Source{File: filepath.Join(dir, "configz.json")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(thresholds(t, c), " "); got != "memory.available<1Gi allocatableMemory.available<1Gi" {
		t.Errorf("thresholds %s", got)
	}
	if !c.Configz || !c.Final || !strings.HasSuffix(c.Describe(), "configz.json (/configz)") {
		t.Errorf("configz %v final %v describe %q", c.Configz, c.Final, c.Describe())
	}
	// No evictionHard in /configz: the kubelet has none (encoding/json
	// omits an empty map), not the defaults.
	c, err = Read(Source{File: filepath.Join(dir, "empty.json")})
	if err != nil {
		t.Fatal(err)
	}
	if got := thresholds(t, c); len(got) != 0 {
		t.Errorf("thresholds %v, want none", got)
	}
	if _, err := Read(Source{File: filepath.Join(dir, "configz.json"), DropInDir: dir}); err == nil || !strings.Contains(err.Error(), "drop --config-dir") {
		t.Errorf("configz with drop-ins: %v", err)
	}
}

// A file alone is returned as decoded: the policy applies the defaults.
func TestFileAloneNotFinal(t *testing.T) {
	dir := write(t, map[string]string{"c.yaml": head + "evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\nfuture: 1\n"})
	c, err := Read(Source{File: filepath.Join(dir, "c.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Final || len(c.Kubelet.EvictionHard) != 1 || len(c.Warnings) != 1 || !errors.Is(c.Warnings[0], load.ErrUnknownField) {
		t.Errorf("final %v, evictionHard %v, warnings %v", c.Final, c.Kubelet.EvictionHard, c.Warnings)
	}
	if n := len(thresholds(t, c)); n != 6 {
		t.Errorf("%d thresholds, want the 5 defaults (one overridden) + allocatable", n)
	}
}
