package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// writeCalls are the functions that write, create, truncate, rename or
// remove a file or directory by path (a cgroup is made and removed with
// mkdir and rmdir). Outside the edges a package may call them only where
// writeAllowed says so; a test file only on a path made from t.TempDir().
var writeCalls = map[string][]string{
	"os":                    {"WriteFile", "Create", "Mkdir", "MkdirAll", "Remove", "RemoveAll", "Truncate", "Rename"},
	"io/ioutil":             {"WriteFile"},
	"syscall":               {"Mkdir", "Mkdirat", "Rmdir", "Unlink", "Unlinkat", "Creat", "Truncate", "Rename"},
	"golang.org/x/sys/unix": {"Mkdir", "Mkdirat", "Rmdir", "Unlink", "Unlinkat", "Creat", "Truncate", "Rename", "Renameat", "Renameat2"},
}

// flaggedOpens are the open calls that write when their flags say so: the
// index of the flags argument, or -1 when the flags cannot be seen in the
// call (Openat2's open_how) and the call always counts as a write.
var flaggedOpens = map[string]map[string]int{
	"os":                    {"OpenFile": 1},
	"syscall":               {"Open": 1, "Openat": 2},
	"golang.org/x/sys/unix": {"Open": 1, "Openat": 2, "Openat2": -1},
}

// readOnlyFlags are the open flags that do not make an open a write. Flags
// made of anything else (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, or a
// variable the test cannot see into) make it one.
var readOnlyFlags = map[string]bool{
	"O_RDONLY": true, "O_CLOEXEC": true, "O_DIRECTORY": true, "O_PATH": true, "O_NOFOLLOW": true,
	"O_NONBLOCK": true, "O_NOCTTY": true, "O_NOATIME": true, "O_LARGEFILE": true,
}

// writeAllowed lists, by package (relative to the module) and function, the
// write calls outside the edges in the agent's code (not its tests), each
// with why it is not a kernel-file write. As for openAllowed, a new entry
// is a decision made here, in review, and one that no longer matches a call
// fails the test.
var writeAllowed = map[string]string{
	"internal/agent.DecisionLog.open":        "evictd's own decision log (creates its directory, appends)",
	"internal/agent.openRegular":             "evictd's own decision log, opened only as a regular file (never a FIFO or a link)",
	"internal/agent.DecisionLog.rotate":      "evictd's own decision log, rotated (renames and removes its old files)",
	"internal/agent.writeFileAtomic":         "evictd's state directory: the state file and growth stops file, renamed into place",
	"internal/agent.HoldsFile.write":         "evictd's own growth stops file, removed when no hold is left",
	"internal/workload/hog.cacheFile":        "the test hog's own data file, written to make page cache; not a kernel file",
	"internal/agent.HoldsFile.undoLeftovers": "evictd's own growth stops file, left by a previous run",
	"cmd/evictd-tools.writeFileAtomic":       "the picture or page the user names (simulate --plot, report), renamed into place",
	"internal/kube/kubetest.writeFile":       "the test apiserver's keys and tokens, in the test's temporary directory",
	"internal/kube/kubetest.start":           "the test apiserver's and etcd's logs, in the test's temporary directory",
}

// writeExempt are packages outside the edges whose writes are not checked,
// with why.
var writeExempt = map[string]string{
	module + "/internal/cgroup/cgrouptest": "the edges' own test helper: internal/cgroup's tests import it, so it cannot import internal/cgroup's writers; it makes and fills test cgroups the plain way",
}

// TestKernelWritesStayInTheEdges fails when a package of the agent (cmd/...,
// internal/...) outside the edge packages writes, creates or removes a file
// or directory by path: every write to /sys/fs/cgroup and /proc goes through
// a writer in internal/cgroup or internal/host, named after the file, with
// the readers' typed errors. Its code may make such a call only where
// writeAllowed says why it is not a kernel file; its tests (and the test
// helper packages, whose helpers write real cgroups) only on a path made
// from t.TempDir() (or os.MkdirTemp, os.CreateTemp) in the same function,
// or where testWriteAllowed says why.
func TestKernelWritesStayInTheEdges(t *testing.T) {
	used := map[string]bool{}
	scanned := 0
	for _, p := range agentPackages(t, writeExempt) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		check := func(name string, test bool) {
			scanned++
			for _, c := range writeCallsIn(t, filepath.Join(p.Dir, name)) {
				key := rel + "." + c.fn
				if test {
					if c.temp {
						continue
					}
					if _, ok := testWriteAllowed[key]; ok {
						used["test "+key] = true
						continue
					}
					t.Errorf("%s: %s calls %s on a path not made from t.TempDir() in %s: write kernel files through internal/cgroup or internal/host "+
						"(cgrouptest for test cgroups), or (for a file that is not a kernel file) add %q to testWriteAllowed with the reason", c.pos, c.fn, c.call, c.fn, key)
					continue
				}
				if _, ok := writeAllowed[key]; ok {
					used[key] = true
					continue
				}
				t.Errorf("%s: %s calls %s outside the edge packages: write kernel files through a writer in internal/cgroup or internal/host "+
					"named after the file, or (for a file that is not a kernel file) add %q to writeAllowed with the reason", c.pos, c.fn, c.call, key)
			}
		}
		for _, name := range p.GoFiles {
			check(name, false)
		}
		for _, name := range append(append([]string(nil), p.TestGoFiles...), p.XTestGoFiles...) {
			check(name, true)
		}
	}
	if scanned == 0 {
		t.Fatal("scanned no file")
	}
	var stale []string
	for k := range writeAllowed {
		if !used[k] {
			stale = append(stale, "writeAllowed lists "+k)
		}
	}
	for k := range testWriteAllowed {
		if !used["test "+k] {
			stale = append(stale, "testWriteAllowed lists "+k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("%s, which makes no such call any more (or only on a t.TempDir() path): remove the entry", k)
	}
}

// testWriteAllowed lists, as writeAllowed does, the test functions (and
// test helpers) that write a file whose path the test cannot trace to
// t.TempDir() in the same function, with why it is not a kernel file.
var testWriteAllowed = map[string]string{
	"cmd/evictd.lqGolden":                               "its golden file under testdata/, rewritten with -update",
	"cmd/evictd.TestDepaware":                           "cmd/evictd/depaware.txt, the agent's dependency list, rewritten with -update",
	"internal/scenario.TestScenariosMatchKubelet":       "the scenarios' golden files under testdata/, rewritten with -update",
	"internal/scenario.TestProfileScenarios":            "the profile scenarios' golden files under testdata/profile/, rewritten with -update",
	"internal/explain.TestReportGoldens":                "explain's golden tables and JSON under testdata/, rewritten with -update",
	"internal/collect.mkdirs":                           "a fixture tree under the t.TempDir() its callers pass",
	"internal/collect.write":                            "a fixture file under the t.TempDir() its callers pass",
	"internal/collect.TestSummaryFailsLoudlyOnBadFiles": "removes a pod of its fixture tree (in a t.TempDir(), made by a helper)",
	"cmd/evictd.TestExplainWithTheNodesRealThresholds":  "kubelet drop-in files in the t.TempDir() writeInputs made",
	"cmd/evictd.TestLintConfigzAndDropIns":              "kubelet drop-in files in the t.TempDir() writeInputs made",
}

type writeCall struct {
	pos, fn, call string
	temp          bool // its path is made from a temporary directory in the same function
}

// writeCallsIn returns the uses of writeCalls and the writing uses of
// flaggedOpens in the Go file at path, with the function they are in and
// whether their path argument is a temporary file's.
func writeCallsIn(t *testing.T, path string) []writeCall {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	names := importNames(f, func(p string) bool {
		_, w := writeCalls[p]
		_, o := flaggedOpens[p]
		return w || o || p == "path/filepath" || p == "path"
	})
	if len(names) == 0 {
		return nil
	}
	var out []writeCall
	for _, d := range f.Decls {
		fn := declName(d)
		temps := tempNames(d, names)
		// Calls first, so that a call's path argument can be judged; then
		// uses as values (a write function passed around counts too).
		seen := map[*ast.SelectorExpr]bool{}
		ast.Inspect(d, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, p, name := pkgSelector(call.Fun, names)
			if sel == nil {
				return true
			}
			seen[sel] = true
			pathArg := 0
			switch {
			case contains(writeCalls[p], name):
			case flaggedOpens[p] != nil:
				i, ok := flaggedOpens[p][name]
				if !ok {
					return true
				}
				if i >= 0 && i < len(call.Args) && readOnly(call.Args[i], names) {
					return true
				}
				if name == "Openat" || name == "Openat2" {
					pathArg = 1
				}
			default:
				return true
			}
			temp := pathArg < len(call.Args) && isTemp(call.Args[pathArg], temps, names)
			out = append(out, writeCall{pos: fset.Position(sel.Pos()).String(), fn: fn, call: p + "." + name, temp: temp})
			return true
		})
		ast.Inspect(d, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || seen[sel] {
				return true
			}
			_, p, name := pkgSelector(sel, names)
			if p == "" {
				return true
			}
			if _, ok := flaggedOpens[p][name]; ok || contains(writeCalls[p], name) {
				out = append(out, writeCall{pos: fset.Position(sel.Pos()).String(), fn: fn, call: p + "." + name})
			}
			return true
		})
	}
	return out
}

// pkgSelector returns e as pkg.Name of an imported package in names.
func pkgSelector(e ast.Expr, names map[string]string) (*ast.SelectorExpr, string, string) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return nil, "", ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return nil, "", ""
	}
	p, ok := names[id.Name]
	if !ok {
		return nil, "", ""
	}
	return sel, p, sel.Sel.Name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readOnly reports whether a flags expression is made only of read-only
// O_ constants of the os, syscall or unix packages, joined by |.
func readOnly(e ast.Expr, names map[string]string) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return readOnly(e.X, names)
	case *ast.BinaryExpr:
		return e.Op == token.OR && readOnly(e.X, names) && readOnly(e.Y, names)
	case *ast.SelectorExpr:
		id, ok := e.X.(*ast.Ident)
		if !ok {
			return false
		}
		switch names[id.Name] {
		case "os", "syscall", "golang.org/x/sys/unix":
			return readOnlyFlags[e.Sel.Name]
		}
	}
	return false
}

// tempNames are the variables of a declaration that hold a temporary
// directory or file path: assigned from t.TempDir(), os.MkdirTemp,
// os.CreateTemp (the file's Name()), or a path joined onto one of those.
// Names, not objects: close enough for tests, where a name is rarely
// reused for another path in one function.
func tempNames(d ast.Decl, names map[string]string) map[string]bool {
	temps := map[string]bool{}
	type assign struct {
		lhs []ast.Expr
		rhs []ast.Expr
	}
	var as []assign
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			as = append(as, assign{n.Lhs, n.Rhs})
		case *ast.ValueSpec:
			var lhs []ast.Expr
			for _, id := range n.Names {
				lhs = append(lhs, id)
			}
			as = append(as, assign{lhs, n.Values})
		}
		return true
	})
	for changed := true; changed; {
		changed = false
		for _, a := range as {
			for i, l := range a.lhs {
				id, ok := l.(*ast.Ident)
				if !ok || temps[id.Name] {
					continue
				}
				var r ast.Expr
				switch {
				case len(a.rhs) == len(a.lhs):
					r = a.rhs[i]
				case len(a.rhs) == 1 && i == 0:
					r = a.rhs[0] // d, err := os.MkdirTemp(...)
				default:
					continue
				}
				if isTemp(r, temps, names) || isTempMaker(r, names) {
					temps[id.Name], changed = true, true
				}
			}
		}
	}
	return temps
}

// isTempMaker: os.MkdirTemp and os.CreateTemp, whose first result is a
// temporary directory or file.
func isTempMaker(e ast.Expr, names map[string]string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	_, p, name := pkgSelector(call.Fun, names)
	return p == "os" && (name == "MkdirTemp" || name == "CreateTemp")
}

// isTemp reports whether a path expression is made from a temporary
// directory: X.TempDir(), a temporary variable, f.Name() of a temporary
// file, filepath.Join or path.Join starting with one, or one + "...".
func isTemp(e ast.Expr, temps map[string]bool, names map[string]string) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return isTemp(e.X, temps, names)
	case *ast.Ident:
		return temps[e.Name]
	case *ast.BinaryExpr:
		return e.Op == token.ADD && isTemp(e.X, temps, names)
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		if sel.Sel.Name == "TempDir" && len(e.Args) == 0 {
			return true // t.TempDir(), b.TempDir(), os.TempDir()
		}
		if sel.Sel.Name == "Name" && len(e.Args) == 0 {
			return isTemp(sel.X, temps, names) // f.Name() of os.CreateTemp's file
		}
		if _, p, name := pkgSelector(sel, names); (p == "path/filepath" || p == "path") && (name == "Join" || name == "Dir") && len(e.Args) > 0 {
			return isTemp(e.Args[0], temps, names)
		}
	}
	return false
}
