package load

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ (go test's format) and
// are also added here from the realistic testdata files, so that the plain
// `go test` run exercises every seed.

func addFileSeeds(f *testing.F, globs ...string) {
	f.Helper()
	for _, g := range globs {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// checkErr asserts the error contract: a *load.Error on one line that names
// the file.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var le *Error
	if !errors.As(err, &le) {
		t.Fatalf("error is not a *load.Error: %T %v", err, err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "in.yaml") {
		t.Fatalf("error is not one line naming the file: %q", msg)
	}
}

func FuzzParseKubeletConfig(f *testing.F) {
	addFileSeeds(f, "testdata/kubelet-config.*")
	f.Add([]byte("evictionHard:\n  memory.available: 1Gi\n  memory.available: 2Gi\n"))
	f.Add([]byte(`{"evictionMaxPodGracePeriod":"x","evictionHard":{"a":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kc, err := ParseKubeletConfig(data, "in.yaml")
		checkErr(t, err)
		if err == nil && kc == nil {
			t.Fatal("nil config without error")
		}
	})
}

func FuzzParseKubeletDocument(f *testing.F) {
	addFileSeeds(f, "testdata/kubelet-config.*")
	f.Add([]byte(`{"kubeletconfig":{"kind":"KubeletConfiguration","evictionHard":{"memory.available":"200Mi"},"x":1}}`))
	f.Add([]byte("kubeletconfig:\n  evictionHard: {a: 1}\n  evictionHard: {a: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseKubeletDocument(data, "in.yaml")
		checkErr(t, err)
		if err == nil && (d == nil || d.Config == nil) {
			t.Fatal("nil config without error")
		}
		if d != nil {
			for _, w := range d.Warnings {
				checkErr(t, w)
			}
		}
	})
}

func FuzzParseKubeletDropIn(f *testing.F) {
	addFileSeeds(f, "testdata/kubelet-config.*")
	f.Add([]byte("kind: KubeletConfiguration\nevictionHard: {memory.available: null}\n"))
	f.Add([]byte(`{"evictionSoft":{},"evictionSoft":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseKubeletDropIn(data, "in.yaml")
		checkErr(t, err)
		if err == nil && (d == nil || !json.Valid(d.Patch)) {
			t.Fatalf("no valid patch without error: %+v", d)
		}
		if err == nil {
			_, err := DecodeKubeletMerged(d.Patch, "in.yaml")
			checkErr(t, err)
		}
	})
}

func FuzzParseSummary(f *testing.F) {
	addFileSeeds(f, "testdata/summary.json")
	f.Add([]byte(`{"node":{"memory":{"availableBytes":-1}}}`))
	f.Add([]byte("node:\n  fs: {capacityBytes: 1e30}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSummary(data, "in.yaml")
		checkErr(t, err)
		if err == nil && s == nil {
			t.Fatal("nil summary without error")
		}
	})
}

func FuzzParsePods(f *testing.F) {
	addFileSeeds(f, "testdata/pods*")
	f.Add([]byte(podYAML))
	f.Add([]byte(`{"kind":"List","items":[{"kind":"Pod","spec":{"containers":[{"resources":{"limits":{"memory":"1x"}}}]}}, null]}`))
	f.Add([]byte("- metadata: {name: a}\n- 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ParsePods(data, "in.yaml")
		checkErr(t, err)
		for _, p := range pods {
			if p == nil {
				t.Fatal("nil pod in result")
			}
		}
	})
}
