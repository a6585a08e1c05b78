package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// cleanupSignals are the signals whose default action ends the process and
// that a program can catch, but those that report a crash (SIGABRT,
// SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGSYS, SIGTRAP) and SIGPROF (the Go
// profiler's). A command that builds something it must take down again —
// selftest's and demo's sandbox cgroups and workloads, selftest's pod —
// stops on any of them and takes it down: a dropped ssh session (SIGHUP), a
// closed pipe (SIGPIPE), a CPU or file-size limit (SIGXCPU, SIGXFSZ), a
// stray SIGUSR1 must not leave a sandbox behind.
var cleanupSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGSTKFLT, syscall.SIGPWR, syscall.SIGIO,
}

// cleanupContext is a context that ends on any of cleanupSignals.
func cleanupContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), cleanupSignals...)
}
