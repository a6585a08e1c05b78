// Package archtest keeps the architecture's import rule by machine: the pure
// core (policy engine, memory-QoS arithmetic) must not reach the OS, the
// network, a clock, logging or metrics. See ../../docs/architecture.md.
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

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func listCore(t *testing.T) []listedPackage {
	t.Helper()
	touchCoreSources(t)
	args := append([]string{"list", "-json", "-e"}, corePatterns...)
	cmd := exec.Command("go", args...)
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
		if len(p.GoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
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
		prefix := strings.TrimSuffix(pat, "/...")
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

func TestCoreImportsStayPure(t *testing.T) {
	pkgs := listCore(t)
	if len(pkgs) == 0 {
		t.Skip("no core package exists yet (internal/policy, internal/memqos)")
	}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			for _, f := range forbidden {
				if imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f)) {
					t.Errorf("core package %s imports %s: the core is pure (no OS, network, clock, logging or metrics)", p.ImportPath, imp)
				}
			}
			if strings.HasPrefix(imp, module+"/") && !isCore(imp) {
				t.Errorf("core package %s imports %s, which is outside the core: imports point inward only", p.ImportPath, imp)
			}
		}
	}
}

func TestCoreReadsNoClockAndStartsNoGoroutine(t *testing.T) {
	pkgs := listCore(t)
	if len(pkgs) == 0 {
		t.Skip("no core package exists yet (internal/policy, internal/memqos)")
	}
	for _, p := range pkgs {
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
