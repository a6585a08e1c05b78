package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/evictd/evictd/test/vm/initramfs"
)

const (
	defaultQemu   = "qemu-system-x86_64"
	defaultMemory = "512M"
	defaultSMP    = "1"
	// bootSlack is added to the test's own -test.timeout for the VM's limit:
	// booting under TCG takes 2-4 s, more on a busy machine. It stays below
	// the one minute that `go test` waits past -timeout before killing us, so
	// the kernel console tail still gets printed.
	bootSlack = 45 * time.Second
	// defaultVMTimeout applies when the test has no -test.timeout.
	defaultVMTimeout = 10 * time.Minute
	// bootSpeedups skip boot work that is slow under emulation and useless to
	// tests: the crypto self-tests and the SP800-108 KDF self-test (measured
	// with initcall_debug at 2-6 s of a loaded machine's boot), and loading
	// the module-signing certificates (the VM loads no modules). About 8%
	// less CPU per VM.
	bootSpeedups = "cryptomgr.notests initcall_blacklist=crypto_kdf108_init,load_system_certificate_list " +
		// On a loaded host the clocksource watchdog sees the emulated CPU
		// stall between two reads, declares the TSC unstable and switches to
		// HPET; a guest was then seen to end 20 s ahead of the host after
		// 100 s. Under TCG the guest TSC is the host's, so it is reliable.
		"tsc=reliable"
	// consoleTailLines of the kernel console are shown when a VM fails.
	consoleTailLines = 40
	// maxClockSkew plus maxClockDrift of the VM's run time is how far the
	// guest's wall clock may end from the host's before vmexec warns: the
	// RTC gives the guest whole seconds at boot, and on a loaded machine the
	// guest clock was seen to lose ~3 s in 40 s. A clock running at a wrong
	// rate (a bad TSC calibration) shows as far more.
	maxClockSkew  = 5 * time.Second
	maxClockDrift = 0.2
)

// passEnv lists host environment variables (or prefixes ending in "_") given
// to the test in the guest. Everything else stays on the host.
var passEnv = []string{"EVICTD_", "GODEBUG", "GOTRACEBACK", "GOMAXPROCS", "GOFLAGS"}

func hostMain(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	code, err := runHost(args[0], args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
	}
	return code
}

const usage = `vmexec runs a Go test binary in a throwaway qemu VM with a pure cgroup v2
hierarchy (memory, pids, cpu, io enabled) and returns its output and exit code.

Usage:
  vmexec TEST-BINARY [ARGS...]
  go test -exec /abs/path/to/vmexec -p 1 -count=1 ./pkg/   (with CGO_ENABLED=0)

Both vmexec and the test binary must be static (CGO_ENABLED=0).
scripts/test-vm.sh builds vmexec into .cache/vm/ beside the kernel.

Environment: EVICTD_VM_KERNEL, EVICTD_VM_QEMU, EVICTD_VM_MEM (512M),
EVICTD_VM_SMP (1), EVICTD_VM_TIMEOUT (test timeout + 45s), EVICTD_VM_APPEND,
EVICTD_VM_DEBUG=1 (kernel console live on stderr, keep the work directory),
EVICTD_VM_OUTDIR (receives files the test wrote to $EVICTD_VM_OUTDIR),
EVICTD_VM_STATS (append one line of timings per VM), EVICTD_VM_BUSYBOX (a
static busybox for the guest's /bin; default: busybox beside vmexec),
EVICTD_VM_MODULES (kernel modules and their "order" file for /init to load;
default: modules/ beside vmexec).

Example:
  CGO_ENABLED=0 go test -c -o /tmp/smoke.test ./test/v2smoke
  cd test/v2smoke && EVICTD_VM_DEBUG=1 ../../.cache/vm/vmexec /tmp/smoke.test -test.v -test.run TestKill
`

func runHost(testBin string, testArgs []string) (int, error) {
	started := time.Now()
	self, err := os.Executable()
	if err != nil {
		return exitHarness, err
	}
	kernel := os.Getenv("EVICTD_VM_KERNEL")
	if kernel == "" {
		// Prefer the uncompressed image (PVH boot, no BIOS, no decompression).
		kernel = filepath.Join(filepath.Dir(self), "vmlinux")
		if _, err := os.Stat(kernel); err != nil {
			kernel = filepath.Join(filepath.Dir(self), "vmlinuz")
		}
	}
	if _, err := os.Stat(kernel); err != nil {
		return exitHarness, fmt.Errorf("kernel image: %w (run scripts/vm-deps.sh, or set EVICTD_VM_KERNEL)", err)
	}
	testBin, err = filepath.Abs(testBin)
	if err != nil {
		return exitHarness, err
	}
	for _, b := range []string{self, testBin} {
		if err := checkStatic(b); err != nil {
			return exitHarness, err
		}
	}
	debug := os.Getenv("EVICTD_VM_DEBUG") == "1"

	work, err := os.MkdirTemp("", "evictd-vm-")
	if err != nil {
		return exitHarness, err
	}
	if debug {
		fmt.Fprintf(os.Stderr, "vmexec: work directory %s (kept)\n", work)
	} else {
		defer os.RemoveAll(work)
	}

	cwd, err := os.Getwd()
	if err != nil {
		return exitHarness, err
	}
	initrd := filepath.Join(work, "initrd.gz")
	busybox := os.Getenv("EVICTD_VM_BUSYBOX")
	if busybox == "" {
		busybox = filepath.Join(filepath.Dir(self), "busybox")
	}
	if _, err := os.Stat(busybox); err != nil {
		if debug {
			fmt.Fprintf(os.Stderr, "vmexec: no busybox (%v): the guest has no /bin/sh\n", err)
		}
		busybox = ""
	}
	modules := os.Getenv("EVICTD_VM_MODULES")
	if modules == "" {
		modules = filepath.Join(filepath.Dir(self), "modules")
	}
	if _, err := os.Stat(filepath.Join(modules, "order")); err != nil {
		modules = ""
	}
	if err := writeInitramfs(initrd, self, testBin, testArgs, cwd, busybox, modules); err != nil {
		return exitHarness, err
	}
	packed := time.Now()

	limit := vmTimeout(testArgs)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()

	consoleLog := filepath.Join(work, "console.log")
	controlLog := filepath.Join(work, "control")
	appendLine := "console=ttyS0 panic=-1 quiet loglevel=3 " + bootSpeedups
	if debug {
		appendLine = "console=ttyS0 panic=-1 loglevel=7 " + bootSpeedups
	}
	if extra := os.Getenv("EVICTD_VM_APPEND"); extra != "" {
		appendLine += " " + extra
	}
	qemu := envOr("EVICTD_VM_QEMU", defaultQemu)
	qargs := []string{
		"-nodefaults", "-display", "none", "-no-reboot",
		"-accel", "tcg", "-cpu", "max",
		"-m", envOr("EVICTD_VM_MEM", defaultMemory),
		"-smp", envOr("EVICTD_VM_SMP", defaultSMP),
		"-kernel", kernel, "-initrd", initrd, "-append", appendLine,
		"-serial", "file:" + consoleLog, // ttyS0
		"-serial", "stdio", // ttyS1: the test's output, straight to ours
		"-serial", "file:" + controlLog, // ttyS2
	}
	cmd := exec.CommandContext(ctx, qemu, qargs...)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = os.Stdout
	var qemuErr bytes.Buffer
	cmd.Stderr = &qemuErr
	// qemu dies with us: `go test` kills the wrapper on its own timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if debug {
		fmt.Fprintf(os.Stderr, "vmexec: %s %s\n", qemu, strings.Join(qargs, " "))
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	var stoppedBy os.Signal
	go func() {
		if s, ok := <-sigs; ok {
			stoppedBy = s
			cancel()
		}
	}()

	stopTail := func() {}
	if debug {
		stopTail = tailFile(consoleLog, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		return exitHarness, fmt.Errorf("starting %s: %w (run scripts/vm-deps.sh)", qemu, err)
	}
	waitErr := cmd.Wait()
	stopTail()
	ended := time.Now()
	skew := 0.0

	ctl, parseErr := readControl(controlLog)
	if ctl.guestClock > 0 {
		skew = ctl.guestClock - float64(ended.UnixNano())/1e9
		if math.Abs(skew) > maxClockSkew.Seconds()+maxClockDrift*ended.Sub(packed).Seconds() {
			fmt.Fprintf(os.Stderr, "vmexec: warning: the guest clock (%s) ended %.1fs away from the host's after %s: "+
				"time inside the VM ran at the wrong speed, so the test's own time limits were off too\n",
				ctl.clocksource, skew, ended.Sub(packed).Round(time.Second))
		}
	}
	if ctl.haveExit && len(ctl.files) > 0 {
		if err := writeOutputs(ctl.files); err != nil {
			return exitHarness, err
		}
	}
	var qemuCPU time.Duration // user+system: what the VM cost, whatever the machine's load
	if cmd.ProcessState != nil {
		qemuCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	recordStats(testBin, packed.Sub(started), ended.Sub(packed), qemuCPU, skew, ctl)

	switch {
	case stoppedBy != nil:
		showConsole(consoleLog, qemuErr.Bytes())
		return exitHarness, fmt.Errorf("stopped by %v after %s; VM killed", stoppedBy, ended.Sub(started).Round(time.Millisecond))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		showConsole(consoleLog, qemuErr.Bytes())
		return exitTimeout, fmt.Errorf("the VM ran past its limit of %s and was killed (EVICTD_VM_TIMEOUT; the kernel console is above)", limit)
	case ctl.errMsg != "":
		showConsole(consoleLog, qemuErr.Bytes())
		return exitHarness, fmt.Errorf("/init could not run the test: %s", ctl.errMsg)
	case !ctl.haveExit:
		showConsole(consoleLog, qemuErr.Bytes())
		why := "qemu exited"
		if waitErr != nil {
			why = "qemu: " + waitErr.Error()
		}
		if parseErr != nil {
			why += "; control port: " + parseErr.Error()
		}
		return exitHarness, fmt.Errorf("the VM ended without reporting the test's exit code (%s); the kernel console is above", why)
	}
	return ctl.exit, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// checkStatic refuses a dynamically linked binary: the initramfs has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// vmTimeout is EVICTD_VM_TIMEOUT, or the test's -test.timeout plus bootSlack.
func vmTimeout(testArgs []string) time.Duration {
	if v := os.Getenv("EVICTD_VM_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "vmexec: EVICTD_VM_TIMEOUT=%q is not a duration such as 90s; using the default\n", v)
	}
	for _, a := range testArgs {
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				return d + bootSlack
			}
		}
	}
	return defaultVMTimeout
}

// writeInitramfs packs /init (this binary), the test binary, the job and the
// package's testdata/ at the same absolute path as on the host.
func writeInitramfs(dst, self, testBin string, testArgs []string, cwd, busybox, modules string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	// BestSpeed: the archive is written once and read once; level 1 costs a
	// fraction of the default's time for a few percent more bytes.
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	w := initramfs.NewWriter(zw)
	guestBin := guestBinDir + "/" + filepath.Base(testBin)
	j := job{Path: guestBin, Args: append([]string{guestBin}, testArgs...), Dir: cwd, Collect: os.Getenv("EVICTD_VM_OUTDIR") != ""}
	for _, kv := range os.Environ() {
		for _, p := range passEnv {
			if strings.HasPrefix(kv, p) && !strings.HasPrefix(kv, "EVICTD_VM_") && !strings.HasPrefix(kv, "EVICTD_TEST_VM=") {
				j.Env = append(j.Env, kv)
				break
			}
		}
	}
	jb, err := json.Marshal(j)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return w.CharDev("/dev/console", 0o600, 5, 1) },
		func() error { return w.CopyFile("/init", self) },
		func() error { return w.CopyFile(guestBin, testBin) },
		func() error { return w.File(jobPath, 0o644, jb) },
		func() error { return w.Dir(cwd, 0o755) },
	}
	if busybox != "" {
		steps = append(steps, func() error { return addBusybox(w, busybox) })
	}
	if modules != "" {
		// The kernel modules /init loads (zram for swap), with their order.
		steps = append(steps, func() error { return w.Tree(guestModulesDir, modules) })
	}
	// Only testdata/ is copied: a tmpfs must not be mounted over it, and the
	// rest of the source tree is not needed by tests that follow Go's rules.
	if st, err := os.Stat(filepath.Join(cwd, "testdata")); err == nil && st.IsDir() {
		steps = append(steps, func() error { return w.Tree(filepath.Join(cwd, "testdata"), filepath.Join(cwd, "testdata")) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// addBusybox installs a static busybox as the guest's userland: /bin/busybox
// and a link for each applet where busybox says it belongs (bin/sh,
// usr/bin/env, ...), so that tests can run ordinary commands.
func addBusybox(w *initramfs.Writer, busybox string) error {
	const target = "/bin/busybox"
	if err := checkStatic(busybox); err != nil {
		return err
	}
	list, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	if err := w.CopyFile(target, busybox); err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		// linuxrc and sbin/init would be other inits; ours is /init.
		if !strings.Contains(applet, "/") || applet == "sbin/init" || "/"+applet == target {
			continue
		}
		if err := w.Symlink("/"+applet, target); err != nil {
			return err
		}
	}
	return nil
}

type outFile struct {
	name string
	data []byte
}

type control struct {
	haveExit bool
	exit     int
	errMsg   string
	boot     float64 // guest uptime when /init started, seconds
	ran      float64 // /init start to end, seconds
	// guestClock is the guest's wall clock (Unix seconds) when it reported;
	// the kernel set it from the emulated RTC at boot, so a large difference
	// from the host's clock means the guest clock ran at the wrong speed.
	guestClock  float64
	clocksource string
	files       []outFile
}

// readControl parses the control port's log. Bytes from the guest may be
// cut short if the VM died; what was read is returned with the error.
func readControl(path string) (control, error) {
	var c control
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			if line != "" {
				return c, fmt.Errorf("truncated line %q", line)
			}
			return c, nil
		}
		if err != nil {
			return c, err
		}
		line = strings.TrimSuffix(line, "\n")
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case ctlExit:
			n, err := strconv.Atoi(rest)
			if err != nil {
				return c, fmt.Errorf("bad exit marker %q", line)
			}
			c.haveExit, c.exit = true, n
		case ctlError:
			c.errMsg = rest
		case ctlTimes:
			fmt.Sscanf(rest, "%g %g %g %s", &c.boot, &c.ran, &c.guestClock, &c.clocksource)
		case ctlFile:
			sizeStr, name, _ := strings.Cut(rest, " ")
			size, err := strconv.Atoi(sizeStr)
			if err != nil || name == "" {
				return c, fmt.Errorf("bad file header %q", line)
			}
			data := make([]byte, size)
			if _, err := io.ReadFull(r, data); err != nil {
				return c, fmt.Errorf("file %s: %w", name, err)
			}
			c.files = append(c.files, outFile{name, data})
		case ctlEnd:
			return c, nil
		default:
			return c, fmt.Errorf("unexpected control line %q", line)
		}
	}
}

// writeOutputs stores the guest's files under $EVICTD_VM_OUTDIR, refusing
// paths that would leave it.
func writeOutputs(files []outFile) error {
	dir := os.Getenv("EVICTD_VM_OUTDIR")
	if dir == "" {
		return fmt.Errorf("the guest sent %d file(s) that were not asked for", len(files))
	}
	for _, f := range files {
		if !filepath.IsLocal(f.name) {
			return fmt.Errorf("the guest sent a file with a non-local path %q", f.name)
		}
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// recordStats appends "<binary> pack=<s> vm=<s> boot=<s> run=<s> cpu=<s>" to
// $EVICTD_VM_STATS, for the tier's timing table.
func recordStats(testBin string, pack, vm, cpu time.Duration, skew float64, c control) {
	path := os.Getenv("EVICTD_VM_STATS")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s pack=%.2f vm=%.2f boot=%.2f run=%.2f cpu=%.2f skew=%.1f clock=%s\n",
		filepath.Base(testBin), pack.Seconds(), vm.Seconds(), c.boot, c.ran, cpu.Seconds(), skew, c.clocksource)
}

// showConsole prints qemu's own messages and the kernel console's last lines.
func showConsole(consoleLog string, qemuErr []byte) {
	if len(bytes.TrimSpace(qemuErr)) > 0 {
		fmt.Fprintf(os.Stderr, "vmexec: qemu said:\n%s\n", bytes.TrimSpace(qemuErr))
	}
	b, err := os.ReadFile(consoleLog)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: no kernel console: %v\n", err)
		return
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n"), "\n")
	if len(lines) > consoleTailLines {
		lines = lines[len(lines)-consoleTailLines:]
	}
	fmt.Fprintf(os.Stderr, "vmexec: last %d lines of the kernel console:\n", len(lines))
	for _, l := range lines {
		fmt.Fprintf(os.Stderr, "  | %s\n", l)
	}
}

// tailFile copies what is appended to path to w until the returned stop is
// called; qemu writes the console to a file, this makes it live.
func tailFile(path string, w io.Writer) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	var off int64
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(off, io.SeekStart); err == nil {
			n, _ := io.Copy(w, f)
			off += n
		}
	}
	go func() {
		defer close(finished)
		for {
			copyNew()
			select {
			case <-done:
				copyNew() // what came after the last tick
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
