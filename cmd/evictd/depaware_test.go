package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The agent's dependencies, in the manner of tailscale's depaware: every
// package cmd/evictd links is listed in depaware.txt, checked in and reviewed
// on change, so that a dependency cannot arrive unseen; and the packages that
// once doubled the agent's size are refused outright, even in an updated
// list. Regenerate with
//
//	go test ./cmd/evictd -run TestDepaware -update
//
// and review the diff: a package added to the agent is a package every node
// runs.

const depawareFile = "depaware.txt"

// forbiddenDeps are import paths (a path, or a prefix ending in "/") the
// agent must not link: html/template keeps every exported method of every
// linked package alive (client-go's and k8s.io/api's), the plotting stack is
// megabytes of fonts and renderers. They belong to evictd-tools. client-go's
// clientset and its scheme (every typed client imports the scheme) register
// all of Kubernetes' API groups at start: 13 MB of the agent and 9.8 MiB of
// its RSS; the agent's client is internal/kubeclient.
var forbiddenDeps = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/informers/",
	"html/template",
	"github.com/evictd/evictd/internal/report",
	"github.com/evictd/evictd/internal/chart",
	"gonum.org/v1/plot",
	"gonum.org/v1/plot/",
	"codeberg.org/go-fonts/",
	"codeberg.org/go-latex/",
	"codeberg.org/go-pdf/",
	"git.sr.ht/~sbinet/gg",
	"github.com/ajstarks/svgo",
	"github.com/golang/freetype",
	"golang.org/x/image/",
}

// agentDeps lists the packages cmd/evictd links on linux/amd64 as make build
// builds it: every package of a module, and the standard library's packages
// except its internal ones (they come and go with Go releases, and no
// module can import them). It runs the go command of the toolchain that
// built the test, offline: the module cache holds every dependency once the
// package's tests compiled.
func agentDeps(t *testing.T) []string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, "list", "-deps", "-f", "{{if .Standard}}std {{end}}{{.ImportPath}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, std := strings.CutPrefix(line, "std "); std {
			if path == "internal" || strings.HasPrefix(path, "internal/") || strings.HasPrefix(path, "vendor/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") {
				continue
			}
			line = path
		}
		deps = append(deps, line)
	}
	slices.Sort(deps)
	return deps
}

func TestDepaware(t *testing.T) {
	deps := agentDeps(t)
	for _, d := range deps {
		for _, f := range forbiddenDeps {
			if d == f || strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) {
				t.Errorf("the agent links %s, which it must not (see forbiddenDeps for why and where it belongs)", d)
			}
		}
	}
	got := "# The packages the agent binary (cmd/evictd) links on linux/amd64, the\n" +
		"# standard library's internal packages left out. Checked in and reviewed\n" +
		"# on change; regenerate with: go test ./cmd/evictd -run TestDepaware -update\n" +
		strings.Join(deps, "\n") + "\n"
	if lqUpdate() {
		if err := os.WriteFile(depawareFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(depawareFile)
	if err != nil {
		t.Fatalf("%v (create it: go test ./cmd/evictd -run TestDepaware -update)", err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	slices.Sort(want) // the list may have been edited by hand
	if added, removed := diffSorted(want, deps); len(added)+len(removed) > 0 {
		var b strings.Builder
		for _, p := range added {
			fmt.Fprintf(&b, "\n+ %s", p)
		}
		for _, p := range removed {
			fmt.Fprintf(&b, "\n- %s", p)
		}
		t.Errorf("the agent's dependencies differ from %s (+ linked now, not listed; - listed, no longer linked):%s\n"+
			"if the change is meant, update the list and have it reviewed: go test ./cmd/evictd -run TestDepaware -update",
			depawareFile, b.String())
	}
}

// diffSorted is what got has that want lacks, and the reverse; both are
// sorted.
func diffSorted(want, got []string) (added, removed []string) {
	for _, p := range got {
		if _, found := slices.BinarySearch(want, p); !found {
			added = append(added, p)
		}
	}
	for _, p := range want {
		if _, found := slices.BinarySearch(got, p); !found {
			removed = append(removed, p)
		}
	}
	return added, removed
}
