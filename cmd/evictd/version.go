package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/evictd/evictd/internal/policy"
)

// version is set at link time (-ldflags "-X main.version=…"); otherwise the
// module's build information is used.
var version = ""

func init() {
	register(command{
		name:    "version",
		summary: "print the version and the kubelet release whose eviction policy evictd matches",
		run: func(args []string, stdout, stderr io.Writer) int {
			fs := newFlagSet("version", "", "Print evictd's version and the kubelet release it matches.", stdout, stderr)
			if done, code := parseFlags(fs, args, stdout); done {
				return code
			}
			v := version
			if v == "" {
				if bi, ok := debug.ReadBuildInfo(); ok {
					v = bi.Main.Version
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" && len(s.Value) >= 12 {
							v += " (" + s.Value[:12] + ")"
						}
					}
				}
			}
			fmt.Fprintf(stdout, "evictd %s; eviction policy of kubelet %s\n", v, kubeletParityVersion)
			return exitOK
		},
	})
}

// kubeletParityVersion is the kubelet release whose eviction decisions evictd
// reproduces; docs/kubelet-parity.md lists the quirks that come with it.
const kubeletParityVersion = policy.KubeletVersion
