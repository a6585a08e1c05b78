package protect

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/test/vm/vmtest"
)

const mib = 1 << 20

// readyLimit guards the helpers' start against a hang (the guest is
// emulated and may run several times slower on a busy machine).
const readyLimit = 60 * time.Second

func factor(f float64) *float64 { return &f }

// v2Root is a workload root on real cgroup v2 (VM tier; skips on the host).
func v2Root(t *testing.T, children ...string) string {
	t.Helper()
	vmtest.Cgroup2(t, "memory")
	root, v2 := newRoot(t, children...)
	if !v2 {
		t.Fatal("newRoot in the VM is not on cgroup v2")
	}
	return root
}

// TestMemoryFilesKept (cgroup v2): the workload files and the root's
// aggregates hold the kubelet's TieredReservation values; a second Apply
// reads nothing but cgroup.procs; a changed workloads file (a reload) moves
// the values, resetting what the old class had; a value changed behind
// evictd's back is restored at the next verification.
func TestMemoryFilesKept(t *testing.T) {
	root := v2Root(t, "web", "db", "batch")
	for _, c := range []string{"web", "db", "batch"} {
		vmtest.StartHelper(t, filepath.Join(root, c), "sleep")
	}
	now := time.Unix(1000, 0)
	var logs bytes.Buffer
	p := newProtector(t, settings(true, memqos.ReservationTiered, factor(0.5)), root, false, &logs, func() time.Time { return now })
	ws := discover(t, workloadsYAML, root)
	p.Apply(ws)
	want := map[string]string{
		"web/memory.min": "0", "web/memory.low": fmt.Sprint(1 * gib), "web/memory.high": fmt.Sprint(gib + gib/2),
		"db/memory.min": fmt.Sprint(2 * gib), "db/memory.low": "0", "db/memory.high": "max",
		// BestEffort: no protection, memory.high = 0.5 × allocatable (8Gi).
		"batch/memory.min": "0", "batch/memory.low": "0", "batch/memory.high": fmt.Sprint(4 * gib),
		// kubepods: memory.min = Guaranteed + Burstable requests, memory.low = Burstable.
		"memory.min": fmt.Sprint(3 * gib), "memory.low": fmt.Sprint(1 * gib),
	}
	checkFiles(t, root, want)

	before := p.Stats
	p.Apply(ws)
	if r, w := p.Stats.Reads-before.Reads, p.Stats.Writes-before.Writes; r != 3 || w != 0 {
		t.Errorf("quiet Apply: %d reads, %d writes; want 3 reads (cgroup.procs), 0 writes", r, w)
	}

	// The workloads file changes: web becomes Guaranteed, db goes away
	// (BestEffort now).
	ws = discover(t, `
workloads:
- name: web
  cgroup: web
  requests: {memory: 1Gi, cpu: "1"}
  limits: {memory: 1Gi, cpu: "1"}
`, root)
	p.Apply(ws)
	want["web/memory.min"], want["web/memory.low"], want["web/memory.high"] = fmt.Sprint(gib), "0", "max"
	want["db/memory.min"], want["db/memory.high"] = "0", fmt.Sprint(4*gib)
	want["memory.min"], want["memory.low"] = fmt.Sprint(gib), "0"
	checkFiles(t, root, want)

	// qos --live agrees.
	s := settings(true, memqos.ReservationTiered, factor(0.5))
	if rows := differing(Observe(s, root, "", ws)); len(rows) != 0 {
		t.Errorf("Observe after Apply: differences %+v", rows)
	}

	// Someone else writes web's memory.min: restored at the next
	// verification (a minute later), not before; Observe shows it meanwhile.
	vmtest.WriteFile(t, filepath.Join(root, "web"), "memory.min", "0")
	if rows := differing(Observe(s, root, "", ws)); len(rows) != 1 || rows[0].File != "memory.min" || rows[0].Now != "0" || rows[0].Want != fmt.Sprint(gib) {
		t.Errorf("Observe after a hand-written memory.min: differences %+v, want web's memory.min 0 != %d", rows, gib)
	}
	p.Apply(ws)
	if got := readFile(t, root, "web", "memory.min"); got != "0" {
		t.Errorf("memory.min rewritten before the verification: %s", got)
	}
	now = now.Add(DefaultVerifyEvery)
	p.Apply(ws)
	checkFiles(t, root, want)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warnings:\n%s", logs.String())
	}
}

// TestUnwritableFileLoggedOnce: a workload cgroup without the memory
// controller has no memory.* files: one line per file, not one per Apply,
// and the oom_score_adj part still works.
func TestUnwritableFileLoggedOnce(t *testing.T) {
	root := v2Root(t)
	// A child of a child whose subtree_control lacks memory: no memory files.
	mid := filepath.Join(root, "web")
	if err := cgroup.Mkdir(mid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cgroup.RemoveAll([]string{mid}, time.Second) })
	vmtest.WriteFile(t, root, "cgroup.subtree_control", "-memory")
	h := vmtest.StartHelper(t, mid, "sleep")
	var logs bytes.Buffer
	p := newProtector(t, settings(true, memqos.ReservationTiered, nil), root, false, &logs, nil)
	ws := discover(t, workloadsYAML, root)
	p.Apply(ws)
	p.Apply(ws)
	if n := strings.Count(logs.String(), "cannot read a memory file"); n != 3 {
		t.Errorf("%d lines for web's 3 missing memory files after two Applies, want 3:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "subtree_control") {
		t.Errorf("no hint about the memory controller:\n%s", logs.String())
	}
	if got := oomOf(t, h.Pid()); got != 875 {
		t.Errorf("web's oom_score_adj %d, want 875", got)
	}
}

func differing(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Differs {
			out = append(out, r)
		}
	}
	return out
}

func checkFiles(t *testing.T, root string, want map[string]string) {
	t.Helper()
	for rel, v := range want {
		if got := readFile(t, root, rel); got != v {
			t.Errorf("%s = %s, want %s", rel, got, v)
		}
	}
}

// runIn runs argv inside cgroup dir (clone3 with CLONE_INTO_CGROUP) and
// waits for it.
func runIn(t *testing.T, dir string, argv ...string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // stdout: /dev/null (cat's output is not kept)
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v in %s: %v: %s", argv, dir, err, stderr.String())
	}
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", argv, err, out)
	}
}

// diskFS mounts an ext2-layout file system on the VM's zram block device, so that
// files have clean, reclaimable page cache (the initramfs's files are
// shmem, which needs swap to be reclaimed). The device keeps zero pages
// for free, so files of zeros cost the guest no memory until read.
func diskFS(t *testing.T) string {
	t.Helper()
	vmtest.Need(t, vmtest.InVM(), "the VM's zram block device (never a host's disk)")
	sys := "/sys/block/zram0"
	_, err := os.Stat(sys)
	vmtest.Need(t, err == nil, "zram (%s: %v)", sys, err)
	vmtest.WriteFile(t, sys, "disksize", "256M")
	t.Cleanup(func() { vmtest.WriteFile(t, sys, "reset", "1") })
	run(t, "mke2fs", "-q", "-b", "4096", "/dev/zram0") // zram has 4 KiB logical blocks
	mnt := t.TempDir()
	// The ext4 driver mounts the ext2 layout busybox's mke2fs makes (this
	// kernel has no separate ext2 driver).
	if out, err := exec.Command("mount", "-t", "ext4", "/dev/zram0", mnt).CombinedOutput(); err != nil {
		dmesg, _ := exec.Command("dmesg").CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(dmesg)), "\n")
		t.Fatalf("mount: %v: %s\nkernel log:\n%s", err, out, strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	t.Cleanup(func() { run(t, "umount", mnt) })
	return mnt
}

// fileCache is the page cache charged to cgroup dir.
func fileCache(t *testing.T, dir string) uint64 {
	t.Helper()
	return vmtest.ReadKeyed(t, dir, "memory.stat")["file"]
}

// TestPageCacheProtection (cgroup v2, no swap): three workloads in a root
// limited to 56 MiB fill page cache by reading files from a disk file
// system: a Guaranteed db (request 20Mi) and a Burstable web (request 20Mi)
// 16 MiB each, then a BestEffort batch streams 128 MiB through. With
// TieredReservation db's cache, under its memory.min, and web's, under its
// memory.low (honoured while batch has memory to give), stay resident; with
// policy None the same run reclaims them too. Clean page cache is dropped,
// not swapped: no swap is needed.
func TestPageCacheProtection(t *testing.T) {
	mnt := diskFS(t)
	files := map[string]string{"db": filepath.Join(mnt, "db"), "web": filepath.Join(mnt, "web"), "batch": filepath.Join(mnt, "batch")}
	run(t, "dd", "if=/dev/zero", "of="+files["db"], "bs=1M", "count=16")
	run(t, "dd", "if=/dev/zero", "of="+files["web"], "bs=1M", "count=16")
	run(t, "dd", "if=/dev/zero", "of="+files["batch"], "bs=1M", "count=64")
	const yaml = `
workloads:
- name: db
  cgroup: db
  requests: {memory: 20Mi, cpu: "1"}
  limits: {memory: 20Mi, cpu: "1"}
- name: web
  cgroup: web
  requests: {memory: 20Mi}
  limits: {memory: 64Mi}
`
	for _, policy := range []memqos.ReservationPolicy{memqos.ReservationTiered, memqos.ReservationNone} {
		t.Run(string(policy), func(t *testing.T) {
			root := v2Root(t, "db", "web", "batch")
			vmtest.WriteFile(t, root, "memory.max", "56M")
			var logs bytes.Buffer
			p := newProtector(t, settings(true, policy, nil), root, false, &logs, nil)
			p.Apply(discover(t, yaml, root))
			run(t, "sync")
			vmtest.WriteFile(t, "/proc/sys/vm", "drop_caches", "3")

			kept := map[string]uint64{}
			for _, w := range []string{"db", "web"} {
				dir := filepath.Join(root, w)
				runIn(t, dir, "cat", files[w])
				if kept[w] = fileCache(t, dir); kept[w] < 15*mib {
					t.Fatalf("%s read 16 MiB but has %.1f MiB of page cache", w, float64(kept[w])/mib)
				}
			}
			for i := 0; i < 2; i++ {
				runIn(t, filepath.Join(root, "batch"), "cat", files["batch"])
			}
			now := map[string]uint64{}
			for _, w := range []string{"db", "web", "batch"} {
				now[w] = fileCache(t, filepath.Join(root, w))
			}
			t.Logf("%s: page cache kept by db (Guaranteed) %.1f of %.1f MiB, web (Burstable) %.1f of %.1f MiB; batch (BestEffort, 64 MiB read twice) holds %.1f MiB; db memory.min=%s web memory.low=%s, root memory.min=%s memory.low=%s",
				policy, float64(now["db"])/mib, float64(kept["db"])/mib, float64(now["web"])/mib, float64(kept["web"])/mib, float64(now["batch"])/mib,
				readFile(t, root, "db", "memory.min"), readFile(t, root, "web", "memory.low"), readFile(t, root, "memory.min"), readFile(t, root, "memory.low"))
			for _, w := range []string{"db", "web"} {
				if policy == memqos.ReservationTiered {
					if now[w] < kept[w]-2*mib {
						t.Errorf("TieredReservation: %s's protected page cache fell from %.1f to %.1f MiB", w, float64(kept[w])/mib, float64(now[w])/mib)
					}
				} else if now[w] > kept[w]/2 {
					t.Errorf("policy None: %s kept %.1f of %.1f MiB of page cache; want it reclaimed like batch's (under half)", w, float64(now[w])/mib, float64(kept[w])/mib)
				}
			}
		})
	}
}

// TestThrottling (cgroup v2, no swap): with memoryThrottlingFactor 0.5, a
// Burstable workload (16 MiB of a 64 MiB limit) gets memory.high = 40 MiB;
// a hog growing to 56 MiB past it sees memory.events "high" rise and is held
// back — still not done long after an unthrottled twin finished — while it
// stays below its limit and is never OOM-killed. Without the factor the same
// hog finishes with no "high" event.
func TestThrottling(t *testing.T) {
	const yaml = `
workloads:
- name: web
  cgroup: web
  requests: {memory: 16Mi}
  limits: {memory: 64Mi}
`
	var unthrottled time.Duration
	for _, f := range []*float64{nil, factor(0.5)} {
		name := "factor unset"
		if f != nil {
			name = "factor 0.5"
		}
		t.Run(name, func(t *testing.T) {
			root := v2Root(t, "web")
			web := filepath.Join(root, "web")
			vmtest.WriteFile(t, web, "memory.max", "64M") // the limit, as a runtime sets it
			var logs bytes.Buffer
			p := newProtector(t, settings(true, memqos.ReservationTiered, f), root, false, &logs, nil)
			p.Apply(discover(t, yaml, root))
			high := readFile(t, web, "memory.high")
			start := time.Now()
			h := vmtest.StartHelper(t, web, "hog", "56", "4", "0")
			if f == nil {
				if high != "max" {
					t.Fatalf("memory.high = %s without a factor, want max", high)
				}
				h.Ready(t, readyLimit)
				unthrottled = time.Since(start)
				if ev := vmtest.ReadKeyed(t, web, "memory.events"); ev["high"] != 0 {
					t.Errorf("memory.events high = %d without memory.high", ev["high"])
				}
				return
			}
			if high != fmt.Sprint(40*mib) {
				t.Fatalf("memory.high = %s, want %d (16Mi + 0.5 × 48Mi)", high, 40*mib)
			}
			// Held back: still not done after 10× the unthrottled run (at
			// least 10 s), with "high" events rising.
			wait := max(10*unthrottled, 10*time.Second)
			time.Sleep(wait / 2)
			e1 := vmtest.ReadKeyed(t, web, "memory.events")
			time.Sleep(wait / 2)
			e2 := vmtest.ReadKeyed(t, web, "memory.events")
			cur := vmtest.ReadUint(t, web, "memory.current")
			t.Logf("after %s (unthrottled: %s): memory.current %.1f MiB, memory.events high %d → %d, max %d, oom_kill %d",
				wait, unthrottled, float64(cur)/mib, e1["high"], e2["high"], e2["max"], e2["oom_kill"])
			if h.Exited() {
				t.Fatal("the hog exited")
			}
			if cur >= 56*mib {
				t.Errorf("memory.current %.1f MiB: the hog got all its 56 MiB, it was not held back at memory.high", float64(cur)/mib)
			}
			if e1["high"] == 0 || e2["high"] <= e1["high"] {
				t.Errorf("memory.events high %d then %d: want it rising", e1["high"], e2["high"])
			}
			if cur >= 64*mib || e2["oom_kill"] != 0 {
				t.Errorf("memory.current %.1f MiB, oom_kill %d: want below the 64 MiB limit and no OOM kill", float64(cur)/mib, e2["oom_kill"])
			}
		})
	}
}

// TestOOMOrder (cgroup v2, no swap, no eviction: only the kernel acts): the
// root at its 96 MiB limit, the Guaranteed db holding 56 MiB and the
// BestEffort batch growing. With the kubelet's oom_score_adj (db −997,
// batch 1000) the kernel OOM killer kills batch; without it, it kills the
// bigger db.
func TestOOMOrder(t *testing.T) {
	const yaml = `
workloads:
- name: db
  cgroup: db
  requests: {memory: 64Mi, cpu: "1"}
  limits: {memory: 64Mi, cpu: "1"}
`
	for _, apply := range []bool{true, false} {
		name := "with oom_score_adj"
		if !apply {
			name = "without"
		}
		t.Run(name, func(t *testing.T) {
			root := v2Root(t, "db", "batch")
			vmtest.WriteFile(t, root, "memory.max", "96M")
			db, batch := filepath.Join(root, "db"), filepath.Join(root, "batch")
			var logs bytes.Buffer
			p := newProtector(t, settings(true, memqos.ReservationNone, nil), root, false, &logs, nil)
			dbHog := vmtest.StartHelper(t, db, "hog", "56")
			dbHog.Ready(t, readyLimit)
			batchHog := vmtest.StartHelper(t, batch, "hog", "80", "4", "100")
			if apply {
				p.Apply(discover(t, yaml, root))
				if got := oomOf(t, dbHog.Pid()); got != -997 {
					t.Fatalf("db's oom_score_adj %d, want -997 (the VM's init has CAP_SYS_RESOURCE)", got)
				}
				if got := oomOf(t, batchHog.Pid()); got != 1000 {
					t.Fatalf("batch's oom_score_adj %d, want 1000", got)
				}
			}
			victim, survivor, victimDir := batchHog, dbHog, batch
			if !apply {
				victim, survivor, victimDir = dbHog, batchHog, db
			}
			st := victim.Wait(t, readyLimit)
			if sig := vmtest.KilledBy(st); sig != syscall.SIGKILL {
				t.Fatalf("%s ended with %v, want killed by the OOM killer", victimDir, st)
			}
			if survivor.Exited() {
				t.Errorf("both were killed")
			}
			if ev := vmtest.ReadKeyed(t, victimDir, "memory.events"); ev["oom_kill"] != 1 {
				t.Errorf("%s memory.events oom_kill = %d, want 1", victimDir, ev["oom_kill"])
			}
		})
	}
}
