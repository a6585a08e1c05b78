// Package archtest keeps the architecture's import rule by machine: the pure
// core (policy engine, memory-QoS arithmetic) must not reach the OS, the
// network, a clock, logging or metrics. Direct imports are checked against
// forbidden and logging; the full dependency graph (go list -deps) against
// forbiddenAnywhere and allowedModules. See ../../docs/architecture.md.
package archtest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/evictd/evictd"

// corePatterns are the packages of the pure core. Add a package here when it
// joins the core.
var corePatterns = []string{
	module + "/internal/policy/...",
	module + "/internal/memqos/...",
	// Pure text escaping: the policy's errors repeat keys the user wrote.
	module + "/internal/safetext",
}

// forbidden are import paths (or prefixes ending in "/") that no core package
// may import itself. The core may use k8s.io/api, apimachinery, kubelet and
// component-helpers types even though those modules import os or klog
// internally: the rule is about what the core does, not about its type
// libraries' internals.
var forbidden = []string{
	"os", "os/exec", "os/signal", "syscall", "net", "net/", "io/fs", "io/ioutil",
	"log", "log/slog", "runtime/pprof", "unsafe", "math/rand", "math/rand/v2", "time/tzdata",
	"golang.org/x/sys/", "github.com/prometheus/", "k8s.io/client-go/",
	"k8s.io/klog", "k8s.io/kubernetes/", "k8s.io/component-base/metrics",
}

// forbiddenCalls are package-level functions that read a clock, sleep or
// start timers; the engine is given "now" instead.
var forbiddenCalls = map[string]bool{
	"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true,
	"time.After": true, "time.Tick": true, "time.NewTimer": true, "time.NewTicker": true, "time.AfterFunc": true,
}

// logging are the logging packages (or prefixes ending in "/") the core
// may not import: it returns what happened in its Decision and the agent
// logs it. Type libraries the core uses do reach klog and logr internally;
// that is allowed, the core calling them is not.
var logging = []string{
	"log", "log/slog", "log/syslog", "k8s.io/klog/", "k8s.io/klog", "github.com/go-logr/",
	"go.uber.org/zap", "github.com/sirupsen/logrus", "github.com/rs/zerolog",
}

// forbiddenAnywhere are packages (or prefixes ending in "/") that must not
// be in the core's dependency graph at all, however they get there.
var forbiddenAnywhere = []string{
	"k8s.io/client-go/", "k8s.io/kubernetes/", "os/exec", "os/signal", "plugin",
}

// allowedModules are the modules the core's full dependency graph
// (go list -deps) may contain, each with the core import that brings it. A
// module not listed fails TestCoreDependencyGraph with the import chain that
// brought it, so a new dependency of the core is a decision made here, in
// review, and not a side effect.
var allowedModules = map[string]string{
	"k8s.io/api":                           "core/v1 types",
	"k8s.io/apimachinery":                  "resource.Quantity, meta/v1",
	"k8s.io/kubelet":                       "stats/v1alpha1 Summary, config/v1beta1 KubeletConfiguration",
	"k8s.io/component-helpers":             "pod requests, priority",
	"k8s.io/utils":                         "via apimachinery",
	"k8s.io/klog/v2":                       "via apimachinery and k8s.io/api (the core does not call it: see logging)",
	"k8s.io/kube-openapi":                  "via apimachinery",
	"github.com/go-logr/logr":              "via klog (the core does not call it: see logging)",
	"gopkg.in/inf.v0":                      "via resource.Quantity",
	"github.com/fxamacker/cbor/v2":         "via apimachinery's serializers",
	"github.com/x448/float16":              "via cbor",
	"sigs.k8s.io/json":                     "via apimachinery",
	"sigs.k8s.io/randfill":                 "via apimachinery",
	"sigs.k8s.io/structured-merge-diff/v6": "via apimachinery",
	"github.com/json-iterator/go":          "via apimachinery",
	"github.com/modern-go/concurrent":      "via json-iterator",
	"github.com/modern-go/reflect2":        "via json-iterator",
	"go.yaml.in/yaml/v2":                   "via kube-openapi",
	"golang.org/x/net":                     "via apimachinery/pkg/util/net",
	"golang.org/x/text":                    "via golang.org/x/net",
	"github.com/davecgh/go-spew":           "via apimachinery/pkg/util/diff",
	"github.com/pmezard/go-difflib":        "via apimachinery/pkg/util/diff",
	"github.com/spf13/pflag":               "via component-base (KubeletConfiguration's logging and feature-gate types)",
	"github.com/spf13/cobra":               "via component-base/cli/flag",
	"github.com/blang/semver/v4":           "via component-base/version",
	"k8s.io/component-base":                "via KubeletConfiguration (logs, tracing API types; featuregate)",
	"github.com/prometheus/client_golang":  "via component-base/featuregate's metrics (the core registers none)",
	"github.com/prometheus/client_model":   "via prometheus",
	"github.com/prometheus/common":         "via prometheus",
	"github.com/prometheus/procfs":         "via prometheus",
	"github.com/beorn7/perks":              "via prometheus",
	"github.com/cespare/xxhash/v2":         "via prometheus",
	"github.com/munnerz/goautoneg":         "via prometheus",
	"google.golang.org/protobuf":           "via prometheus",
	"golang.org/x/sys":                     "via prometheus/procfs (the core itself may not import it)",
	"go.opentelemetry.io/otel":             "via component-base tracing and metrics types",
	"go.opentelemetry.io/otel/trace":       "via component-base tracing types",
	"github.com/evictd/evictd":             "the core itself (TestCoreDependencyGraph checks which of its packages)",
}

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	// TestGoFiles and XTestGoFiles: TestKernelWritesStayInTheEdges checks
	// tests too.
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string
	Standard     bool
	DepOnly      bool
	Module       *struct{ Path string }
	Error        *struct{ Err string }
}

// listGraph lists the core packages and everything they depend on
// (go list -deps). It fails when a core pattern matches no package with Go
// files: a renamed or moved core would otherwise leave nothing to check and
// every test here would pass.
func listGraph(t *testing.T) (core, graph []listedPackage) {
	t.Helper()
	touchCoreSources(t)
	graph = goList(t, append([]string{"-e", "-deps"}, corePatterns...)...)
	for _, p := range graph {
		if !p.DepOnly && len(p.GoFiles) > 0 {
			core = append(core, p)
		}
	}
	for _, pat := range corePatterns {
		found := false
		for _, p := range core {
			found = found || matchPattern(pat, p.ImportPath)
		}
		if !found {
			t.Fatalf("core pattern %s matches no package with Go files: update corePatterns when the core moves", pat)
		}
	}
	return core, graph
}

// goList runs go list -json with args and returns the packages it lists,
// failing on any package error.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func matchPattern(pat, path string) bool {
	prefix := strings.TrimSuffix(pat, "/...")
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// touchCoreSources reads every file under the core's directories so that the
// go test cache, which tracks files a test opens but not what a child "go
// list" reads, reruns this test whenever the core changes.
func touchCoreSources(t *testing.T) {
	t.Helper()
	for _, pat := range corePatterns {
		dir := filepath.Join("..", "..", strings.TrimPrefix(strings.TrimSuffix(pat, "/..."), module+"/"))
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				_, _ = os.ReadFile(path)
			}
			return nil
		})
	}
}

func isCore(path string) bool {
	for _, pat := range corePatterns {
		if matchPattern(pat, path) {
			return true
		}
	}
	return false
}

// matches reports whether imp is one of list: an exact path, or below an
// entry ending in "/".
func matches(imp string, list []string) bool {
	for _, f := range list {
		if imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f)) {
			return true
		}
	}
	return false
}

// eachImport calls f for every direct import of every core package.
func eachImport(t *testing.T, f func(pkg, imp string)) {
	t.Helper()
	core, _ := listGraph(t)
	for _, p := range core {
		for _, imp := range p.Imports {
			f(p.ImportPath, imp)
		}
	}
}

func TestCoreImportsStayPure(t *testing.T) {
	eachImport(t, func(pkg, imp string) {
		if matches(imp, forbidden) {
			t.Errorf("core package %s imports %s: the core is pure (no OS, network, clock, logging or metrics)", pkg, imp)
		}
		if strings.HasPrefix(imp, module+"/") && !isCore(imp) {
			t.Errorf("core package %s imports %s, which is outside the core: imports point inward only", pkg, imp)
		}
	})
}

// TestCoreImportsNoLogging: the core logs nothing. It says what happened in
// its Decision; the agent logs one line per state change.
func TestCoreImportsNoLogging(t *testing.T) {
	eachImport(t, func(pkg, imp string) {
		if matches(imp, logging) {
			t.Errorf("core package %s imports the logging package %s: the core logs nothing (put it in the Decision)", pkg, imp)
		}
	})
}

// TestCoreDependencyGraph checks the whole graph, not only direct imports:
// no evictd package outside the core, nothing in forbiddenAnywhere, and no
// module that allowedModules does not name.
func TestCoreDependencyGraph(t *testing.T) {
	core, graph := listGraph(t)
	byPath := make(map[string]*listedPackage, len(graph))
	for i := range graph {
		byPath[graph[i].ImportPath] = &graph[i]
	}
	chain := importChain(core, byPath)
	for _, p := range graph {
		switch {
		case strings.HasPrefix(p.ImportPath, module+"/") && !isCore(p.ImportPath):
			t.Errorf("the core depends on %s, outside the core (%s): imports point inward only", p.ImportPath, chain(p.ImportPath))
		case matches(p.ImportPath, forbiddenAnywhere):
			t.Errorf("the core's dependency graph contains %s (%s)", p.ImportPath, chain(p.ImportPath))
		case !p.Standard && p.Module == nil:
			t.Errorf("%s belongs to no module (%s)", p.ImportPath, chain(p.ImportPath))
		case !p.Standard:
			if _, ok := allowedModules[p.Module.Path]; !ok {
				t.Errorf("module %s entered the core's dependency graph with %s (%s): add it to allowedModules with the reason, or drop the import",
					p.Module.Path, p.ImportPath, chain(p.ImportPath))
			}
		}
	}
}

// importChain returns a function that names one shortest import path from a
// core package to a package of the graph, for the error message.
func importChain(core []listedPackage, byPath map[string]*listedPackage) func(string) string {
	parent := map[string]string{}
	var queue []string
	for _, p := range core {
		parent[p.ImportPath] = ""
		queue = append(queue, p.ImportPath)
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := byPath[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return func(path string) string {
		var hops []string
		for cur := path; cur != ""; cur = parent[cur] {
			hops = append([]string{cur}, hops...)
			if len(hops) > len(parent) {
				break
			}
		}
		return "via " + strings.Join(hops, " → ")
	}
}

func TestCoreReadsNoClockAndStartsNoGoroutine(t *testing.T) {
	core, _ := listGraph(t)
	for _, p := range core {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatalf("parsing %s: %v", path, err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: the core starts no goroutine", fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && forbiddenCalls[id.Name+"."+n.Sel.Name] {
						t.Errorf("%s: the core reads no clock (%s.%s); it is given now", fset.Position(n.Pos()), id.Name, n.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
