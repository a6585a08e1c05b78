package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// cleanupSignals are the signals that end a Go program and can be caught:
// SIGHUP, SIGINT and SIGTERM (exit), SIGQUIT, SIGABRT, SIGTRAP, SIGSYS and
// SIGSTKFLT (exit with a stack dump), SIGPIPE (a write to a closed standard
// output), and SIGXCPU (the CPU limit's warning before the kernel's
// SIGKILL). A command that builds something it must take down again —
// selftest's and demo's sandbox cgroups and workloads, selftest's pod —
// stops on any of them and takes it down: a dropped ssh session (SIGHUP) or
// a closed pipe must not leave a sandbox behind. (Signals the Go runtime
// takes no action on, SIGUSR1 for one, are left alone.)
var cleanupSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT,
	syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGSTKFLT, syscall.SIGPIPE, syscall.SIGXCPU,
}

// cleanupContext is a context that ends on any of cleanupSignals.
func cleanupContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), cleanupSignals...)
}
