// Command collect-bench measures what evictd's collector costs on real cgroup
// v1 memory cgroups, against opencontainers/cgroups (the library behind
// runc and cAdvisor, and so behind the kubelet's numbers) on the same tree in
// the same run, and prints a table with the ratio.
//
// It builds its own tree under the v1 memory controller (root required):
// 100 pods × 3 containers in a cgroupfs-driver kubepods layout plus 100 plain
// workload cgroups — 500 cgroups whose memory is read — runs a few hogs so
// the counters are not all zero, and removes everything when done (also on
// SIGINT/SIGTERM).
//
// It lives in its own Go module so that opencontainers/cgroups and its
// dependencies (dbus, systemd, logrus) stay out of evictd's main module.
//
// Usage: bench/collect.sh [-rounds N] [-benchtime D]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	occgroups "github.com/opencontainers/cgroups"
	ocfs "github.com/opencontainers/cgroups/fs"

	"github.com/evictd/evictd/internal/cgroup"
	v1 "github.com/evictd/evictd/internal/cgroup/v1"
	"github.com/evictd/evictd/internal/collect"
)

const (
	memRoot     = "/sys/fs/cgroup/memory"
	cpuacctRoot = "/sys/fs/cgroup/cpuacct" // the kubelet creates each pod cgroup in every v1 hierarchy
)

const (
	pods          = 100
	containersPer = 3
	plain         = 100
	hogMiB        = 8
	hogs          = 8
)

func main() {
	if os.Getenv("EVICTD_BENCH_HOG") != "" {
		runHog()
		return
	}
	rounds := flag.Int("rounds", 3, "alternating rounds per measurement; the table shows the median")
	benchtime := flag.Duration("benchtime", time.Second, "minimum time per measurement")
	parallelism := flag.Int("parallelism", 0, "collect.Config.Parallelism for the Summary (0: its default)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of 50 Summaries to this file and stop")
	evictionProfile := flag.Bool("eviction-only", false, "with -cpuprofile: profile the agent's eviction-only Summary instead of the full one")
	flag.Parse()
	testing.Init()
	_ = flag.Set("test.benchtime", benchtime.String())

	if os.Geteuid() != 0 {
		fail("needs root to create cgroups under " + memRoot)
	}
	if _, err := os.Stat(memRoot + "/memory.stat"); err != nil {
		fail("needs the cgroup v1 memory controller at " + memRoot + ": " + err.Error())
	}
	base := fmt.Sprintf("evictd-bench-%d", os.Getpid())
	tree := &tree{}
	active = tree
	defer tree.cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; tree.cleanup(); os.Exit(130) }()

	var dirs []string
	for p := range pods {
		pod := fmt.Sprintf("%s/kubepods/burstable/pod%08x-0000-4000-8000-%012x", base, p, p)
		dirs = append(dirs, tree.mkdir(pod))
		for c := range containersPer {
			dirs = append(dirs, tree.mkdir(fmt.Sprintf("%s/%064x", pod, p*containersPer+c+1)))
		}
	}
	for w := range plain {
		dirs = append(dirs, tree.mkdir(fmt.Sprintf("%s/plain/w%03d", base, w)))
	}
	for i := range hogs {
		tree.hog(dirs[1+i*4*(pods/hogs)]) // a container of every 12th pod
	}

	ocRead := func(d string) {
		st := occgroups.NewStats()
		if err := (&ocfs.MemoryGroup{}).GetStats(d, st); err != nil {
			fail(err.Error())
		}
		u := st.MemoryStats.Usage.Usage
		in := st.MemoryStats.Stats["total_inactive_file"]
		_ = u - min(u, in)
	}
	ourRead := func(d string) {
		u, err := v1.ReadMemoryUsageInBytes(d)
		if err != nil {
			fail(err.Error())
		}
		s, err := v1.ReadMemoryStat(d)
		if err != nil {
			fail(err.Error())
		}
		_ = v1.WorkingSet(u, &s)
	}
	perTree := func(read func(string)) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, d := range dirs {
					read(d)
				}
			}
		}
	}
	col, err := collect.New(collect.Config{PodsCgroup: "/" + base + "/kubepods", KubeletRoot: os.TempDir(), PodLogsRoot: os.TempDir(), Parallelism: *parallelism})
	if err != nil {
		fail(err.Error())
	}
	if s, err := col.Summary(context.Background()); err != nil || len(s.Pods) != pods {
		fail(fmt.Sprintf("summary check: %v pods, %v", len(s.Pods), err))
	}
	// The agent's Summary: only what eviction reads (collect.Config.EvictionOnly).
	colEv, err := collect.New(collect.Config{PodsCgroup: "/" + base + "/kubepods", KubeletRoot: os.TempDir(), PodLogsRoot: os.TempDir(), Parallelism: *parallelism, EvictionOnly: true})
	if err != nil {
		fail(err.Error())
	}
	if s, err := colEv.Summary(context.Background()); err != nil || len(s.Pods) != pods {
		fail(fmt.Sprintf("eviction-only summary check: %v pods, %v", len(s.Pods), err))
	}
	summaryOf := func(col *collect.Collector) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := col.Summary(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	summary, summaryEv := summaryOf(col), summaryOf(colEv)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err.Error())
		}
		pc := col
		if *evictionProfile {
			pc = colEv
		}
		_ = pprof.StartCPUProfile(f)
		for range 50 {
			if _, err := pc.Summary(context.Background()); err != nil {
				fail(err.Error())
			}
		}
		pprof.StopCPUProfile()
		f.Close()
		return
	}

	type sample struct{ ns, allocs, bytes float64 }
	var ours, oc, sum, sumEv []sample
	for r := range *rounds {
		fmt.Fprintf(os.Stderr, "round %d/%d …\n", r+1, *rounds)
		for _, m := range []struct {
			f   func(*testing.B)
			dst *[]sample
			div float64
		}{{perTree(ourRead), &ours, float64(len(dirs))}, {perTree(ocRead), &oc, float64(len(dirs))}, {summary, &sum, 1}, {summaryEv, &sumEv, 1}} {
			res := testing.Benchmark(m.f)
			*m.dst = append(*m.dst, sample{
				ns:     float64(res.NsPerOp()) / m.div,
				allocs: float64(res.AllocsPerOp()) / m.div,
				bytes:  float64(res.AllocedBytesPerOp()) / m.div,
			})
		}
	}
	// Where a Summary's time goes: each file it reads, over the same tree
	// (cpuacct.usage from the cpuacct mirror).
	type fileCost struct {
		name string
		ns   float64
	}
	var files []fileCost
	for _, f := range []string{"memory.usage_in_bytes", "memory.stat", "memory.limit_in_bytes", "cgroup.procs", "cpuacct.usage"} {
		ds := dirs
		if f == "cpuacct.usage" {
			ds = make([]string, len(dirs))
			for i, d := range dirs {
				ds[i] = strings.Replace(d, memRoot, cpuacctRoot, 1)
			}
		}
		res := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				for _, d := range ds {
					if _, err := cgroup.ReadFile(d, f, "", rawBytes); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		files = append(files, fileCost{f, float64(res.NsPerOp()) / float64(len(ds))})
	}

	// CPU time per Summary (user + system, all threads), which shared-machine
	// load inflates less than wall time.
	cpuPer := func(col *collect.Collector) time.Duration {
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		const cpuRuns = 20
		for range cpuRuns {
			if _, err := col.Summary(context.Background()); err != nil {
				fail(err.Error())
			}
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := func(r syscall.Rusage) time.Duration {
			return time.Duration(r.Utime.Nano() + r.Stime.Nano())
		}
		return (cpu(ru1) - cpu(ru0)) / cpuRuns
	}
	cpuPerSummary, cpuPerEvSummary := cpuPer(col), cpuPer(colEv)

	med := func(ss []sample) sample {
		sort.Slice(ss, func(i, j int) bool { return ss[i].ns < ss[j].ns })
		return ss[len(ss)/2]
	}
	o, c, s, se := med(ours), med(oc), med(sum), med(sumEv)

	host, _ := os.Hostname()
	fmt.Printf("evictd collector benchmark — %s, %s, GOMAXPROCS=%d, load average %s, %d cgroups (v1 memory), median of %d rounds\n\n",
		host, kernel(), runtime.GOMAXPROCS(0), loadavg(), len(dirs), *rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tper\ttime\tallocs\tbytes\t")
	fmt.Fprintf(tw, "evictd v1: usage_in_bytes + memory.stat\tcgroup\t%.1f µs\t%.1f\t%.0f\t\n", o.ns/1e3, o.allocs, o.bytes)
	fmt.Fprintf(tw, "opencontainers/cgroups v1 MemoryGroup.GetStats\tcgroup\t%.1f µs\t%.1f\t%.0f\t\n", c.ns/1e3, c.allocs, c.bytes)
	fmt.Fprintf(tw, "evictd Summary, %d pods × %d containers\tSummary\t%.2f ms\t%.0f\t%.0f\t\n", pods, containersPer, s.ns/1e6, s.allocs, s.bytes)
	fmt.Fprintf(tw, "evictd eviction-only Summary (the agent's)\tSummary\t%.2f ms\t%.0f\t%.0f\t\n", se.ns/1e6, se.allocs, se.bytes)
	tw.Flush()
	// The platform's floor: the same syscalls on a 4-byte tmpfs file.
	shm, err := os.MkdirTemp("/dev/shm", "evictd-bench-")
	if err == nil {
		defer os.RemoveAll(shm)
		if err := os.WriteFile(filepath.Join(shm, "f"), []byte("123\n"), 0o644); err == nil {
			res := testing.Benchmark(func(b *testing.B) {
				for b.Loop() {
					if _, err := cgroup.ReadFile(shm, "f", "", rawBytes); err != nil {
						b.Fatal(err)
					}
				}
			})
			files = append(files, fileCost{"(a tmpfs file: floor)", float64(res.NsPerOp())})
		}
	}
	fmt.Println("\nopen + read + close of one file, per cgroup (no parsing):")
	for _, f := range files {
		fmt.Printf("  %-24s %6.1f µs\n", f.name, f.ns/1e3)
	}
	fmt.Printf("\nratio: opencontainers/cgroups / evictd = %.1f× per cgroup (target ≥ 4×)\n", c.ns/o.ns)
	fmt.Printf("Summary: %.2f ms wall, %.2f ms CPU (user+sys, all threads) for %d pods × %d containers (target < 20 ms)\n",
		s.ns/1e6, float64(cpuPerSummary.Microseconds())/1e3, pods, containersPer)
	fmt.Printf("eviction-only Summary: %.2f ms wall, %.2f ms CPU (target < 20 ms); load average now %s\n",
		se.ns/1e6, float64(cpuPerEvSummary.Microseconds())/1e3, loadavg())
}

type tree struct {
	dirs []string
	cmds []*exec.Cmd
	done bool
}

// mkdir creates rel in the memory hierarchy, and in cpuacct where mounted,
// and returns the memory directory.
func (t *tree) mkdir(rel string) string {
	var mem string
	for _, root := range []string{memRoot, cpuacctRoot} {
		if _, err := os.Stat(root); err != nil && root != memRoot {
			continue
		}
		p := root
		for _, part := range strings.Split(rel, "/") {
			p = filepath.Join(p, part)
			if err := os.Mkdir(p, 0o755); err == nil {
				t.dirs = append(t.dirs, p)
			} else if !os.IsExist(err) {
				fail(err.Error())
			}
		}
		if root == memRoot {
			mem = p
		}
	}
	return mem
}

func (t *tree) hog(dir string) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), "EVICTD_BENCH_HOG=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		fail(err.Error())
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail(err.Error())
	}
	if err := cmd.Start(); err != nil {
		fail(err.Error())
	}
	t.cmds = append(t.cmds, cmd)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		fail(err.Error())
	}
	if acct := strings.Replace(dir, memRoot, cpuacctRoot, 1); acct != dir {
		_ = os.WriteFile(filepath.Join(acct, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0)
	}
	_, _ = in.Write([]byte("go\n"))
	buf := make([]byte, 6)
	_, _ = out.Read(buf)
}

// runHog allocates and touches hogMiB after "go" on stdin, says ready, and
// waits to be killed.
func runHog() {
	b := make([]byte, 1)
	_, _ = os.Stdin.Read(b)
	mem := make([]byte, hogMiB<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	fmt.Println("ready")
	select {}
}

func (t *tree) cleanup() {
	if t.done {
		return
	}
	t.done = true
	for _, c := range t.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	// deepest first: created parents-first per hierarchy, so reverse order works
	for i := len(t.dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50; try++ {
			if err := os.Remove(t.dirs[i]); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func rawBytes(r io.Reader) (int, error) {
	b, err := cgroup.Bytes(r)
	return len(b), err
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "Linux ?"
	}
	return "Linux " + strings.TrimSpace(string(b))
}

// active is the tree to remove when the benchmark fails from any goroutine
// (testing.Benchmark runs the measured function on its own goroutine, where a
// panic would skip main's deferred cleanup).
var active *tree

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "collect-bench:", msg)
	if active != nil {
		active.cleanup()
	}
	os.Exit(1)
}
