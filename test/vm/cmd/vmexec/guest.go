package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the guest mounts the unified hierarchy, as systemd does.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupMountOptions: nsdelegate as on systemd hosts; memory_recursiveprot so
// that memory.min/low protection propagates the way the kubelet's pod
// hierarchy expects.
const cgroupMountOptions = "nsdelegate,memory_recursiveprot"

// controllers are enabled for the root's children. The tests rely on all four;
// a kernel without one of them fails the run rather than skipping tests.
var controllers = []string{"memory", "pids", "cpu", "io"}

// guestMain is /init. It never returns: it powers the VM off.
func guestMain() {
	start := time.Now()
	ctl, code, collect := runGuest()
	if ctl != nil {
		ran := time.Since(start).Seconds()
		now := float64(time.Now().UnixNano()) / 1e9
		fmt.Fprintf(ctl, "%s %.3f %.3f %.3f %s\n", ctlTimes, uptimeSeconds()-ran, ran, now, clocksource())
		if collect {
			sendOutputs(ctl)
		}
		fmt.Fprintf(ctl, "%s %d\n", ctlExit, code)
		fmt.Fprintf(ctl, "%s\n", ctlEnd)
		drain(ctl)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		guestLog("reboot(POWER_OFF): %v", err)
	}
	select {} // PID 1 must not exit: that panics the kernel
}

// guestLog writes to the kernel console (ttyS0), which the host shows on
// failure.
func guestLog(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vmexec /init: "+format+"\n", args...)
}

// runGuest prepares the system, runs the test and returns the control port,
// the test's exit code and whether the host wants the test's output files. Errors before the test starts are reported on the
// control port (and the output port, so that `go test` shows them).
func runGuest() (*os.File, int, bool) {
	fail := func(out, ctl *os.File, err error) (*os.File, int, bool) {
		guestLog("%v", err)
		if out != nil {
			fmt.Fprintf(out, "vmexec /init: %v\n", err)
			drain(out)
		}
		if ctl != nil {
			fmt.Fprintf(ctl, "%s %s\n", ctlError, strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return ctl, exitHarness, false
	}
	if err := mountAll(); err != nil {
		return fail(nil, nil, err)
	}
	out, err := openRaw(ttyOutput)
	if err != nil {
		return fail(nil, nil, err)
	}
	ctl, err := openRaw(ttyControl)
	if err != nil {
		return fail(out, nil, err)
	}
	if err := enableControllers(); err != nil {
		return fail(out, ctl, err)
	}
	if err := loadModules(); err != nil {
		// Not fatal: only tests that need swap (vmtest.Swap) need them, and
		// they fail in the VM when /sys/block/zram0 is missing.
		guestLog("loading modules: %v", err)
	}
	if err := loopbackUp(); err != nil {
		// Not fatal: only tests that listen on 127.0.0.1 need it, and they
		// will say so.
		guestLog("bringing lo up: %v", err)
	}
	var j job
	b, err := os.ReadFile(jobPath)
	if err == nil {
		err = json.Unmarshal(b, &j)
	}
	if err != nil {
		return fail(out, ctl, fmt.Errorf("reading the job: %w", err))
	}
	code, err := runTest(j, out)
	if err != nil {
		return fail(out, ctl, err)
	}
	drain(out)
	return ctl, code, j.Collect
}

func mountAll() error {
	mounts := []struct{ src, dst, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", ""},
		{"cgroup2", cgroupRoot, "cgroup2", cgroupMountOptions},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, m.data); err != nil {
			return fmt.Errorf("mount -t %s -o %q %s: %w", m.fstype, m.data, m.dst, err)
		}
	}
	for _, d := range []string{"/tmp", guestOutDir} {
		if err := os.MkdirAll(d, 0o1777); err != nil {
			return err
		}
	}
	return nil
}

// enableControllers writes "+memory" etc. to the root's subtree_control one at
// a time, so that an error names the controller the kernel refused.
func enableControllers() error {
	ctlFile := filepath.Join(cgroupRoot, "cgroup.subtree_control")
	for _, c := range controllers {
		if err := os.WriteFile(ctlFile, []byte("+"+c), 0); err != nil {
			avail, _ := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
			return fmt.Errorf("enabling the %s controller (available: %q): %w", c, strings.TrimSpace(string(avail)), err)
		}
	}
	return nil
}

// openRaw opens a serial port with no output processing (no "\n" to "\r\n"),
// so that `go test -json` output arrives byte for byte.
func openRaw(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CBAUD
	t.Cflag |= unix.CS8 | unix.B115200
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// drain waits until the serial port has sent everything (tcdrain), so that
// powering off does not cut the output short.
func drain(f *os.File) {
	_ = unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
}

// loadModules loads the modules named in guestModulesDir/order, in order.
func loadModules() error {
	order, err := os.ReadFile(filepath.Join(guestModulesDir, "order"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // none packed
	}
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open(filepath.Join(guestModulesDir, name))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// runTest starts the test binary with its output on the output port and
// waits for it, reaping any other process that ends meanwhile (PID 1 inherits
// every orphan). The exit code follows the shell's convention for signals.
func runTest(j job, out *os.File) (int, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	env := append([]string{
		"PATH=" + guestBinDir + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"TMPDIR=/tmp",
		"EVICTD_TEST_VM=1",
	}, j.Env...)
	if j.Collect {
		env = append(env, "EVICTD_VM_OUTDIR="+guestOutDir)
	}
	p, err := os.StartProcess(j.Path, j.Args, &os.ProcAttr{
		Dir:   j.Dir,
		Env:   env,
		Files: []*os.File{null, out, out},
	})
	if err != nil {
		return 0, fmt.Errorf("starting the test: %w", err)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("waiting for the test: %w", err)
		}
		if pid != p.Pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus(), nil
		case ws.Signaled():
			fmt.Fprintf(out, "vmexec /init: the test binary was killed by signal %v\n", ws.Signal())
			return 128 + int(ws.Signal()), nil
		}
	}
}

// sendOutputs sends every regular file under guestOutDir over the control
// port, so that tests can hand files (e.g. captured kernel files) to the host.
func sendOutputs(ctl io.Writer) {
	_ = filepath.WalkDir(guestOutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			guestLog("reading %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(guestOutDir, p)
		fmt.Fprintf(ctl, "%s %d %s\n", ctlFile, len(b), rel)
		ctl.Write(b)
		return nil
	})
}

// clocksource names the kernel's clock source (tsc, hpet, ...), reported to
// the host with the times so that a guest clock that ran at the wrong speed
// can be explained.
func clocksource() string {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// uptimeSeconds is the guest's time since boot, 0 if unknown.
func uptimeSeconds() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
