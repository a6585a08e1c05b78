package main

import (
	"fmt"
	"github.com/spf13/pflag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/load"
)

// inputSizeFlag is --max-input-size: the cap on every input file's size.
type inputSizeFlag struct{}

func (inputSizeFlag) String() string { return "" }
func (inputSizeFlag) Type() string   { return "size" }

func (inputSizeFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a size such as 256Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("want a positive size that fits 64 bits, e.g. 256Mi")
	}
	load.SetMaxInputBytes(n)
	return nil
}

// registerInputFlags adds --max-input-size to a command that reads input
// files.
func registerInputFlags(fs *pflag.FlagSet) {
	fs.Var(inputSizeFlag{}, "max-input-size", fmt.Sprintf("refuse input files larger than this, e.g. 256Mi (default %dMi): decoding takes many times a file's size in memory", load.DefaultMaxInputBytes>>20))
}

// reloadOnSIGHUP runs r's reloads on every SIGHUP until stop is called.
// Without it SIGHUP would end the agent with no cleanup (exit 129).
func reloadOnSIGHUP(r *agent.Reloader) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				r.Reload()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
