package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// registerConfigDirFlag adds --config-dir, the kubelet's drop-in directory,
// to a command that reads a kubelet configuration with --config.
func registerConfigDirFlag(fs *pflag.FlagSet) *string {
	return fs.String("config-dir", "", "the kubelet's --config-dir: its drop-ins (*.conf, subdirectories too) merged over --config in lexical order, as the kubelet merges them (docs/kubelet-config.md)")
}

// policyConfig builds the engine's configuration the way the kubelet builds
// its own: the config file (or /configz dump) and its drop-ins, read as the
// kubelet reads them (kubeletconfig.Read: unknown fields and duplicate keys
// of the file are warnings in the returned Config, not errors, since an
// agent must not refuse a file its kubelet runs with; `evictd lint` reports
// them), then the eviction flags over them, then defaulting and threshold
// parsing. Errors are one line naming the file or flag, the field and the
// value. The returned Config says where it all came from (Describe).
func policyConfig(src kubeletconfig.Source, flags *load.EvictionFlags) (policy.Config, *kubeletconfig.Config, error) {
	c, err := kubeletconfig.Read(src)
	if err != nil {
		return policy.Config{}, nil, err
	}
	if err := c.ApplyFlags(flags, ""); err != nil {
		return policy.Config{}, nil, err
	}
	cfg, err := c.Policy()
	if err != nil {
		return policy.Config{}, nil, err
	}
	return cfg, c, nil
}

// warnKubeletConfig prints one line per thing the configuration's reading
// accepted without a word, as the kubelet accepts it (unknown fields,
// duplicate keys, drop-in quirks), for the commands that print rather than
// log.
func warnKubeletConfig(stderr io.Writer, command string, c *kubeletconfig.Config) {
	for _, w := range c.Warnings {
		fmt.Fprintf(stderr, "evictd %s: warning: %v (accepted, as the kubelet accepts it; see evictd lint)\n", command, w)
	}
}
