package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// edgePackages are where kernel files (/sys/fs/cgroup, /proc) are opened and
// parsed: one reader per file, typed errors, fuzzed parsers. Everything else
// calls them (docs/architecture.md).
var edgePackages = map[string]bool{
	module + "/internal/cgroup":    true,
	module + "/internal/cgroup/v1": true,
	module + "/internal/cgroup/v2": true,
	module + "/internal/host":      true,
}

// testHelperPackages are linked only into tests; they set up and inspect
// real cgroups and processes the plain way on purpose.
var testHelperPackages = map[string]string{
	module + "/internal/cgroup/cgrouptest":            "real-cgroup test helpers",
	module + "/internal/workload/sandbox/sandboxtest": "sandbox test helpers (counts the test's own fds in /proc/self/fd)",
	module + "/internal/kube/kubetest":                "starts kube-apiserver and etcd for tests (writes their keys and tokens, reads their logs)",
}

// openCalls are the functions that open or read a file or directory by path.
// Outside the edges a package may call them only where openAllowed says so.
var openCalls = map[string][]string{
	"os":                    {"Open", "OpenFile", "ReadFile", "ReadDir", "DirFS", "OpenRoot", "OpenInRoot"},
	"io/ioutil":             {"ReadFile", "ReadDir"},
	"syscall":               {"Open", "Openat"},
	"golang.org/x/sys/unix": {"Open", "Openat", "Openat2"},
	"path/filepath":         {"Walk", "WalkDir"},
}

// openAllowed lists, by package (relative to the module) and function, the
// calls of openCalls outside the edges, each with why it is not a kernel-file
// read. A new one is a decision made here, in review. An entry that no
// longer matches a call fails the test, so the list stays true.
var openAllowed = map[string]string{
	"internal/load.ReadFile":                         "the kubelet config, Summary, pods, scenario and workloads files the user names",
	"internal/agent.openRegular":                     "evictd's own decision log (append), state file and growth stops file (read), regular files only",
	"internal/kubeletconfig.Config.mergeDropIns":     "walks the kubelet's --config-dir drop-in directory (as the kubelet does, filepath.WalkDir), not kernel files; each file is read through internal/load.ReadFile",
	"cmd/evictd-tools.runReport":                     "the decision log the user names, streamed (too large for internal/load.ReadFile)",
	"internal/agent.writeFileAtomic":                 "evictd's state directory, opened to fsync the rename (state file, growth stops file)",
	"internal/hostmode.lockWorkloadRoot":             "opens the workload root and its ancestors to flock(2) them; reads nothing",
	"internal/collect.Collector.addEphemeralStorage": "the kubelet's pod volume and log directories (ephemeral storage), not kernel files",
	"internal/collect.Collector.podLogDirs":          "the kubelet's pod log root, not kernel files",
	"internal/collect.du":                            "walks pod volume and log directories for their usage, not kernel files",
	"internal/workload/hog.cacheFile":                "the test hog's own data file, written and read to make page cache; not a kernel file",
}

// TestKernelReadsStayInTheEdges fails when a package of the agent (cmd/...,
// internal/...) outside the edge packages opens or reads a file or directory
// by path, unless openAllowed lists the call: every /sys/fs/cgroup and /proc
// read goes through the readers in internal/cgroup and internal/host.
func TestKernelReadsStayInTheEdges(t *testing.T) {
	used := map[string]bool{}
	scanned := 0
	for _, p := range agentPackages(t, testHelperPackages) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		for _, name := range p.GoFiles {
			scanned++
			path := filepath.Join(p.Dir, name)
			for _, c := range openCallsIn(t, path) {
				key := rel + "." + c.fn
				if _, ok := openAllowed[key]; ok {
					used[key] = true
					continue
				}
				t.Errorf("%s: %s calls %s outside the edge packages: read kernel files through internal/cgroup or internal/host, "+
					"or (for a file that is not a kernel file) add %q to openAllowed with the reason", c.pos, c.fn, c.call, key)
			}
		}
	}
	if scanned == 0 {
		t.Fatal("scanned no file")
	}
	var stale []string
	for k := range openAllowed {
		if !used[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("openAllowed lists %s, which makes no such call any more: remove the entry", k)
	}
}

// agentPackages lists the agent's packages (cmd/..., internal/...) but the
// edge packages and those in skip; it fails when it does not find every
// edge package (they moved, and the rule would check the wrong ones).
func agentPackages(t *testing.T, skip map[string]string) []listedPackage {
	t.Helper()
	var out []listedPackage
	edges := 0
	for _, p := range goList(t, module+"/cmd/...", module+"/internal/...") {
		if edgePackages[p.ImportPath] {
			edges++
			continue
		}
		if _, ok := skip[p.ImportPath]; !ok {
			out = append(out, p)
		}
	}
	if edges != len(edgePackages) || len(out) == 0 {
		t.Fatalf("found %d of %d edge packages and %d others: update edgePackages when the edges move", edges, len(edgePackages), len(out))
	}
	return out
}

type openCall struct {
	pos, fn, call string
}

// openCallsIn returns the uses (calls or function values) of openCalls in
// the Go file at path, with the function or method they are in.
func openCallsIn(t *testing.T, path string) []openCall {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	names := importNames(f, func(p string) bool { _, ok := openCalls[p]; return ok })
	if len(names) == 0 {
		return nil
	}
	var out []openCall
	for _, d := range f.Decls {
		fn := declName(d)
		ast.Inspect(d, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := names[id.Name]
			if !ok {
				return true
			}
			for _, c := range openCalls[p] {
				if sel.Sel.Name == c {
					out = append(out, openCall{pos: fset.Position(sel.Pos()).String(), fn: fn, call: p + "." + c})
				}
			}
			return true
		})
	}
	return out
}

// importNames maps the local names of f's imports that want accepts to
// their import paths.
func importNames(f *ast.File, want func(path string) bool) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !want(p) {
			continue
		}
		n := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			n = imp.Name.Name
		}
		names[n] = p
	}
	return names
}

// declName names a declaration as the allowlists do: "F", "T.M", or
// "(package level)".
func declName(d ast.Decl) string {
	fd, ok := d.(*ast.FuncDecl)
	if !ok {
		return "(package level)"
	}
	if fd.Recv != nil && len(fd.Recv.List) == 1 {
		return recvName(fd.Recv.List[0].Type) + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// recvName is the type name of a method receiver (T, *T, T[P]).
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}
