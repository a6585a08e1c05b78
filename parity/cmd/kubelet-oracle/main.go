// Command kubelet-oracle runs scenario files through the real kubelet v1.37.2
// eviction manager and prints, or writes next to each scenario, every distinct
// outcome the kubelet produces for it.
//
// Build and run it through scripts/test-parity.sh (it needs that script's
// build overlay), e.g.
//
//	scripts/test-parity.sh oracle testdata/scenarios/memory-pressure-soft-then-hard.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/evictd/evictd/parity/internal/oracle"
	"github.com/evictd/evictd/parity/internal/scenario"
)

func main() {
	fs := flag.NewFlagSet("kubelet-oracle", flag.ContinueOnError)
	runs := fs.Int("runs", oracle.DefaultRuns, "fresh eviction managers driven through each scenario (the kubelet is not deterministic where it iterates maps)")
	write := fs.Bool("w", false, "write <scenario>.kubelet.json next to each scenario instead of printing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: kubelet-oracle [-runs N] [-w] SCENARIO...

Runs each evictd scenario file (testdata/scenarios/README.md) through the
upstream kubelet v1.37.2 eviction manager, configured exactly as the kubelet
configures it, N times with fresh managers, and prints the distinct outcomes as
{"outcomes":[...]} (each in the shape of "evictd simulate -o json").

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), `
Example:
  kubelet-oracle -w testdata/scenarios/*.yaml
`)
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() == 0 || *runs < 1 {
		fs.Usage()
		os.Exit(2)
	}
	for _, path := range fs.Args() {
		s, err := scenario.Load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
			os.Exit(2)
		}
		res, err := oracle.Run(s, *runs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
			os.Exit(2)
		}
		b, err := oracle.Encode(res)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
			os.Exit(2)
		}
		if !*write {
			os.Stdout.Write(b)
			continue
		}
		out := oracle.ResultPath(path)
		if err := os.WriteFile(out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
			os.Exit(2)
		}
		fmt.Printf("%s: %d outcome(s)\n", out, len(res.Outcomes))
	}
}
