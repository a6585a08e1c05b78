package main

// What the host and the guest halves agree on.

const (
	// jobPath is the JSON job description inside the initramfs.
	jobPath = "/vm/job.json"
	// guestBinDir holds the test binary inside the guest.
	guestBinDir = "/vm/bin"
	// guestOutDir is $EVICTD_VM_OUTDIR inside the guest: files a test writes
	// there are sent back to the host over the control port.
	guestOutDir = "/vm/out"
	// guestModulesDir holds kernel modules and "order", the file names to
	// load one per line.
	guestModulesDir = "/vm/modules"

	// Serial ports, in the order of qemu's -serial options.
	ttyConsole = "/dev/ttyS0" // kernel console and /init's own log
	ttyOutput  = "/dev/ttyS1" // the test's stdout and stderr, raw
	ttyControl = "/dev/ttyS2" // control lines below, raw

	// Control lines, each ending in '\n'. The exit marker is mandatory: a VM
	// that ends without it has crashed, hung or been killed.
	ctlExit  = "EVICTD-VM-EXIT"  // EVICTD-VM-EXIT <code>
	ctlError = "EVICTD-VM-ERROR" // EVICTD-VM-ERROR <message>: /init could not run the test
	ctlTimes = "EVICTD-VM-TIMES" // EVICTD-VM-TIMES <uptime at /init start, s> <test run, s> <guest wall clock, Unix s> <clock source>
	ctlFile  = "EVICTD-VM-FILE"  // EVICTD-VM-FILE <size> <relative path>, then <size> bytes
	ctlEnd   = "EVICTD-VM-END"   // nothing follows

	// Exit codes of the host half when the test could not report its own.
	exitHarness = 125 // the harness failed (bad setup, qemu failed, no marker)
	exitTimeout = 124 // the VM ran past its time limit (as timeout(1))
)

// job tells /init what to run.
type job struct {
	Path string   // test binary inside the guest
	Args []string // argv, Args[0] included
	Dir  string   // working directory: the package directory, as on the host
	Env  []string // extra environment, KEY=VALUE
	// Collect: the host wants the files the test leaves in guestOutDir
	// ($EVICTD_VM_OUTDIR is set on the host). Only then is the variable set
	// in the guest and the files sent back.
	Collect bool
}
