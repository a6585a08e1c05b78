package main

import (
	"fmt"
	"io"

	"github.com/evictd/evictd/internal/version"
)

func init() {
	register(command{
		name:    "version",
		summary: "print the version and the kubelet release whose eviction policy evictd implements",
		run: func(args []string, stdout, stderr io.Writer) int {
			fs := newFlagSet("version", "", `Print evictd's version (stamped from git by "make build" and "make image"),
the commit it was built from, the Go release that built it, and the kubelet
release whose eviction decisions it reproduces. "evictd --version" prints the
same.`, stdout, stderr)
			if done, code := parseFlags(fs, args, stdout); done {
				return code
			}
			if fs.NArg() > 0 {
				fmt.Fprintf(stderr, "evictd version: unexpected argument %q\n", fs.Arg(0))
				return exitError
			}
			printVersion(stdout)
			return exitOK
		},
	})
}

// printVersion prints one line, e.g.
// "evictd v0.1.0 (commit 1a2b3c4d5e6f, go1.26.8); eviction semantics of kubelet v1.37.2".
func printVersion(w io.Writer) {
	build := version.GoVersion()
	if r := version.Revision(); r != "" {
		if len(r) > 12 {
			r = r[:12]
		}
		build = "commit " + r + ", " + build
	}
	fmt.Fprintf(w, "evictd %s (%s); eviction semantics of kubelet %s\n", version.Version(), build, version.Kubelet)
}
