package main

import (
	"fmt"
	"io"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/lint"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

func init() {
	cli.Register(cli.Command{
		Name:    "lint",
		Summary: "check an eviction configuration: the kubelet's own errors plus the pitfalls it accepts silently",
		Run:     runLint,
	})
}

const lintHelp = `
Checks a kubelet eviction configuration before it reaches a node: a
KubeletConfiguration file (with the drop-ins of a --config-dir, merged as
the kubelet merges them) or a node's /configz dump, the kubelet's eviction
flags, or both (the flags are laid over the file as the kubelet does).
Without --config, lint checks a kubelet started with these flags alone —
which gets no default thresholds.

Errors are the kubelet v1.37.2's own, with its wording: what makes it refuse
to start (unknown signal, bad quantity or percentage, soft threshold without
grace period, negative grace or reclaim, MemoryQoS settings, missing kind).
Warnings are settings it accepts without a word that do something else than
they seem: an unknown field or duplicate key (the kubelet decodes leniently;
the other checks still run), quantities below one byte (500m is half a
byte) or byte thresholds below 1Mi ("100" is 100 bytes), drop-in quirks, a
partial evictionHard dropping the other defaults, "0%"/"100%"
silently disabling a signal ("0.0%" does not), a soft threshold with 0s grace
(a hard one) or not above the hard one, containerfs thresholds the kubelet
overwrites, evictionMaxPodGracePeriod 0 or negative with soft thresholds, a
minimum reclaim larger than its threshold, evictionPressureTransitionPeriod
0s (= 5m; an info in a file serialized from defaults, as kubeadm's is), a
memory reservation not covering the hard threshold, kernelMemcgNotification
on cgroup v2, imagefs thresholds on a single filesystem,
localStorageCapacityIsolation off. Infos are worth knowing.

With --kubelet-config (the node's kubelet configuration, read as leniently as
the kubelet reads it), lint also checks evictd beside that kubelet: each of
the kubelet's thresholds must be matched by one of evictd's that is met no
later (at least the same value; hard, or soft with no longer a grace period),
otherwise the kubelet evicts first.

Each finding has a severity, the field (or flag), the value, what it does,
why it matters and the fix. Exit status: 0 clean (infos only), 1 warnings,
2 errors or unreadable input.

Examples:
  evictd lint --config /var/lib/kubelet/config.yaml
  evictd lint --config configz.json
  evictd lint --config /etc/kubernetes/kubelet/config.json --config-dir /etc/kubernetes/kubelet/config.json.d
  evictd lint --eviction-hard 'memory.available<500Mi,nodefs.available<10%' \
      --eviction-soft 'memory.available<1Gi' --eviction-soft-grace-period 'memory.available=1m'
  evictd lint --config config.yaml --cgroup-version 2 --filesystems single -o json
  evictd lint --config evictd.yaml --kubelet-config /var/lib/kubelet/config.yaml
`

func runLint(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("lint", "[--config FILE [--config-dir DIR]] [kubelet eviction flags] [-o table|json]", lintHelp, stdout, stderr)
	cli.RegisterInputFlags(fs)
	configPath := fs.String("config", "", "KubeletConfiguration file (YAML or JSON), or a /configz dump")
	configDir := registerConfigDirFlag(fs)
	cgroupVersion := fs.Int("cgroup-version", 0, "the nodes' cgroup version (1 or 2), for version-specific checks; 0 = unknown")
	layout := fs.String("filesystems", "", "the nodes' filesystem layout, for layout-specific checks: single, imagefs or split")
	out := fs.StringP("output", "o", "table", "output format: table or json")
	kubeletConfig := fs.String("kubelet-config", "", "the node's own kubelet configuration file (or /configz dump): check that evictd's thresholds (--config and flags) are met no later than the kubelet's (Kubernetes mode)")
	kubeletConfigDir := fs.String("kubelet-config-dir", "", "the node's kubelet --config-dir, merged over --kubelet-config as the kubelet merges it")
	evFlags := load.RegisterEvictionFlags(fs)
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd lint: "+format+"\n", a...)
		return cli.ExitError
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case *out != "table" && *out != "json":
		return fail("-o %q: want table or json", *out)
	case *cgroupVersion != 0 && *cgroupVersion != 1 && *cgroupVersion != 2:
		return fail("--cgroup-version %d: want 1 or 2", *cgroupVersion)
	}
	l := lint.Layout(*layout)
	switch l {
	case lint.LayoutUnknown, lint.LayoutSingle, lint.LayoutImageFs, lint.LayoutSplit:
	default:
		return fail("--filesystems %q: want single, imagefs or split", *layout)
	}
	if *configPath == "" && *configDir == "" && len(evFlags.Set()) == 0 {
		return fail("nothing to lint: give --config FILE, --config-dir DIR and/or kubelet eviction flags (see --help)")
	}
	if *kubeletConfigDir != "" && *kubeletConfig == "" {
		return fail("--kubelet-config-dir goes with --kubelet-config")
	}

	c, err := kubeletconfig.Read(kubeletconfig.Source{File: *configPath, DropInDir: *configDir})
	if err != nil {
		return fail("%v", err)
	}
	if err := c.ApplyFlags(evFlags, ""); err != nil {
		return fail("%v", err)
	}
	in := lint.Input{Config: c.Kubelet, ConfigFile: *configPath, Present: c.Present, Configz: c.Configz,
		Reading: c.Warnings, Skipped: c.Skipped, FlagsSet: evFlags.Set(), CgroupVersion: *cgroupVersion, Layout: l}
	findings := lint.Check(in)
	if *kubeletConfig != "" {
		more, err := coexistenceFindings(c.Kubelet, kubeletconfig.Source{File: *kubeletConfig, DropInDir: *kubeletConfigDir})
		if err != nil {
			return fail("--kubelet-config: %v", err)
		}
		findings = append(findings, more...)
	}
	rep := lint.NewReport(c.Describe(), findings)
	if *out == "json" {
		if err := lint.WriteJSON(stdout, rep); err != nil {
			return fail("%v", err)
		}
	} else {
		lint.WriteTable(stdout, rep)
	}
	return lint.ExitCode(findings)
}

// coexistenceFindings compares evictd's thresholds (kc) with the kubelet's
// (its config file, read leniently). When evictd's own configuration does
// not parse, the other rules already say why and there is nothing to compare.
func coexistenceFindings(kc *kubeletconfigv1beta1.KubeletConfiguration, src kubeletconfig.Source) ([]lint.Finding, error) {
	kk, err := kubeletconfig.Read(src)
	if err != nil {
		return nil, err
	}
	kcfg, err := kk.Policy()
	if err != nil {
		return nil, err
	}
	ecfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		return nil, nil
	}
	return lint.Coexistence(ecfg.Thresholds, kcfg.Thresholds, kk.Describe()), nil
}
