// Command hog is the node tier's memory hog (the work image's entrypoint):
// internal/workload/hog's scripted hog as a program of its own. Its
// arguments are the script (EVICTD_HOG_SCRIPT, if set, wins), e.g.
//
//	hog ramp 1400Mi 100Mi ';' hold
//	hog alloc 32Mi ';' hold
//
// How it answers SIGTERM is set by HOG_ON_TERM: "die" (the default: the
// signal ends it, as it ends most programs), "exit0" (exits 0 at once, as a
// well-behaved server does), or "ignore" (only SIGKILL ends it; the same as
// the script step ignore-term).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/evictd/evictd/internal/workload/hog"
)

func main() {
	switch t := os.Getenv("HOG_ON_TERM"); t {
	case "", "die":
	case "exit0":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			<-c
			fmt.Fprintln(os.Stderr, "hog: SIGTERM: exiting 0")
			os.Exit(0)
		}()
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	default:
		fmt.Fprintf(os.Stderr, "hog: HOG_ON_TERM=%q: want die, exit0 or ignore\n", t)
		os.Exit(2)
	}
	if _, ok := os.LookupEnv(hog.EnvScript); !ok {
		if len(os.Args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: hog STEP [ARG...] [';' STEP...]   (steps: see internal/workload/hog)")
			os.Exit(2)
		}
		os.Setenv(hog.EnvScript, strings.Join(os.Args[1:], " "))
	}
	hog.MaybeRun()
}
