// Command vmexec runs a Go test binary inside a throwaway qemu VM whose kernel
// has a pure cgroup v2 hierarchy, so that `go test` can exercise v2-only
// kernel paths (memory.events, PSI triggers, cgroup.kill, ...) for real:
//
//	CGO_ENABLED=0 go test -exec "$PWD/.cache/vm/vmexec" -p 1 -count=1 ./test/v2smoke/
//
// The same static binary plays both roles. On the host (any PID but 1) it
// packs itself as /init, the test binary, its arguments and the package's
// testdata/ (at the same absolute path) into an initramfs, boots Debian's
// cloud kernel under software emulation, streams the test's output to its own
// standard output and exits with the test's exit code. In the guest (PID 1)
// it mounts proc, sysfs, devtmpfs and cgroup2, enables the memory, pids, cpu
// and io controllers, runs the test with EVICTD_TEST_VM=1, reports the exit
// code and powers the VM off.
//
// The guest has three serial ports: ttyS0 is the kernel console (kept in a
// file, shown on failure or live with EVICTD_VM_DEBUG=1), ttyS1 carries the
// test's raw output, and ttyS2 is the control channel (exit-code marker and
// files the test left in $EVICTD_VM_OUTDIR).
//
// Environment on the host (all optional):
//
//	EVICTD_VM_KERNEL   kernel image (default: vmlinux, else vmlinuz, beside this binary,
//	                   where scripts/test-vm.sh puts it)
//	EVICTD_VM_QEMU     qemu binary (default qemu-system-x86_64)
//	EVICTD_VM_MEM      guest memory (default 512M)
//	EVICTD_VM_SMP      guest CPUs (default 1: TCG boots fastest with one)
//	EVICTD_VM_TIMEOUT  wall-clock limit for the VM (default: the test's
//	                   -test.timeout plus 60s, or 10m)
//	EVICTD_VM_APPEND   extra kernel command-line words
//	EVICTD_VM_DEBUG=1  stream the kernel console (loglevel 7) to stderr and
//	                   keep the work directory with the initramfs
//	EVICTD_VM_OUTDIR   host directory that receives the files the test wrote
//	                   to $EVICTD_VM_OUTDIR in the guest
//	EVICTD_VM_STATS    file to which one line of timings per VM is appended
//	EVICTD_VM_BUSYBOX  static busybox installed as the guest's /bin, /usr/bin
//	                   (default: busybox beside this binary; none if absent)
//	EVICTD_VM_MODULES  directory of kernel modules with an "order" file that
//	                   /init loads (default: modules/ beside this binary;
//	                   scripts/vm-deps.sh puts zram there for swap)
package main

import (
	"os"
)

func main() {
	if os.Getpid() == 1 {
		guestMain()
		return // not reached: guestMain powers off
	}
	os.Exit(hostMain(os.Args[1:]))
}
