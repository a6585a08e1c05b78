package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/evictd/evictd/internal/version"
)

func init() {
	Register(Command{
		Name:    "version",
		Summary: "print the version and the kubelet release whose eviction policy evictd implements",
		Run: func(args []string, stdout, stderr io.Writer) int {
			fs := NewFlagSet("version", "", strings.ReplaceAll(`Print evictd's version (stamped from git by "make build" and "make image"),
the commit it was built from, the Go release that built it, and the kubelet
release whose eviction decisions it reproduces. "evictd --version" prints the
same.`, "evictd", Name), stdout, stderr)
			if done, code := ParseFlags(fs, args, stdout); done {
				return code
			}
			if fs.NArg() > 0 {
				fmt.Fprintf(stderr, "%s version: unexpected argument %q\n", Name, fs.Arg(0))
				return ExitError
			}
			printVersion(stdout)
			return ExitOK
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
	fmt.Fprintf(w, "%s %s (%s); eviction semantics of kubelet %s\n", Name, version.Version(), build, version.Kubelet)
}
