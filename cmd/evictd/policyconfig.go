package main

import (
	"flag"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// policyConfig builds the engine's configuration the way the kubelet builds
// its own: the config file (if any), then the eviction flags over it, then
// defaulting and threshold parsing. source names where it came from, for
// error messages and reports ("kubelet defaults" without a file or flags).
// Errors are one line naming the file or flag, the field and the value.
//
// The config file is read as the kubelet reads it: unknown fields and
// duplicate keys are returned as warnings, not errors (an agent must not
// refuse a file its kubelet runs with); `evictd lint` reports them.
func policyConfig(configPath string, flags *load.EvictionFlags) (cfg policy.Config, source string, warnings []error, err error) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	source = "kubelet defaults"
	if configPath != "" {
		if kc, warnings, err = load.KubeletConfigFileLenient(configPath); err != nil {
			return policy.Config{}, "", nil, err
		}
		source = configPath
	}
	if err := flags.Apply(kc); err != nil {
		return policy.Config{}, "", nil, err
	}
	if set := flags.Set(); len(set) > 0 {
		source += " + --" + strings.Join(set, " --")
	}
	if cfg, err = policy.ConfigFromKubelet(kc); err != nil {
		return policy.Config{}, "", nil, &sourceError{source, err}
	}
	return cfg, source, warnings, nil
}

// sourceError prefixes a policy error with the config's source, so the line
// says which file or flags the field came from.
type sourceError struct {
	source string
	err    error
}

func (e *sourceError) Error() string { return e.source + ": " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// profileFlag is --profile: the policy profile (policy.ParseProfile).
type profileFlag struct{ p policy.Profile }

func (f *profileFlag) String() string { return f.p.String() }

func (f *profileFlag) Set(s string) error {
	p, err := policy.ParseProfile(s)
	if err != nil {
		return err
	}
	f.p = p
	return nil
}

// registerProfileFlag adds --profile to a command that runs the engine.
func registerProfileFlag(fs *flag.FlagSet) *profileFlag {
	f := &profileFlag{}
	fs.Var(f, "profile", "policy profile: \"kubelet\" (the default: every decision the kubelet v1.37.2's), \"extended\" "+
		"(every behaviour beyond the kubelet), or a comma-separated list of "+strings.Join(policy.ProfileBehaviours(), ", ")+
		" (docs/profile.md)")
	return f
}
