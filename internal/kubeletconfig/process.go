package kubeletconfig

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/load"
)

// kubeletComm is the kubelet's command name in /proc/PID/comm;
// hyperkubeComm runs it as "hyperkube kubelet ..." (OpenShift's
// kubelet.service).
const (
	kubeletComm   = "kubelet"
	hyperkubeComm = "hyperkube"
)

// ErrSeveralKubelets: more than one kubelet process with different command
// lines is visible (kind's nodes on one host seen from the host), so none
// of them is this node's for sure.
var ErrSeveralKubelets = errors.New("several kubelet processes with different command lines")

// KubeletProcess is the kubelet's command line as its process shows it: the
// settings that decide which configuration it reads and the eviction flags
// it lays over it.
type KubeletProcess struct {
	PID  int
	Args []string // without argv[0]
	// ConfigFile and ConfigDir are its --config and --config-dir ("" when
	// not given), as paths in the kubelet's mount namespace.
	ConfigFile, ConfigDir string
	// HostnameOverride is its --hostname-override: the node it is.
	HostnameOverride string
	// Eviction holds its eviction flags (EvictionFlags.Set lists them);
	// EvictionArgs are the same as --name=value, for messages.
	Eviction     *load.EvictionFlags
	EvictionArgs []string
}

// FindKubelet finds the kubelet process under procRoot (the host's /proc
// when evictd shares the host's PID namespace, as the DaemonSet does) and
// parses its command line. It returns nil and no error when there is none
// (k3s runs its kubelet inside the k3s process: its flags are not visible),
// and ErrSeveralKubelets when more than one with different command lines
// runs.
func FindKubelet(procRoot string) (*KubeletProcess, error) {
	type candidate struct {
		pid       int
		hyperkube bool
	}
	var cands []candidate
	for _, comm := range []string{kubeletComm, hyperkubeComm} {
		pids, err := host.ProcessesNamed(procRoot, comm)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			cands = append(cands, candidate{pid, comm == hyperkubeComm})
		}
	}
	var found *KubeletProcess
	for _, c := range cands {
		pid := c.pid
		args, err := host.ReadCmdlineArgs(procRoot, pid)
		if err != nil || len(args) == 0 {
			continue // ended, or a zombie
		}
		args = args[1:]
		if c.hyperkube {
			if len(args) == 0 || args[0] != kubeletComm {
				continue // another of hyperkube's components
			}
			args = args[1:]
		}
		p, err := ParseKubeletArgs(args)
		if err != nil {
			return nil, fmt.Errorf("the kubelet's command line (pid %d): %w", pid, err)
		}
		p.PID = pid
		if found != nil && strings.Join(found.Args, "\x00") != strings.Join(p.Args, "\x00") {
			return nil, fmt.Errorf("%w (pids %d and %d)", ErrSeveralKubelets, found.PID, pid)
		}
		if found == nil {
			found = p
		}
	}
	return found, nil
}

// ParseKubeletArgs parses a kubelet command line (without argv[0]) the way
// the kubelet's pflag flag set does: --name=value or --name value, "_" and
// "-" alike in names (cliflag.WordSepNormalizeFunc), the last of a repeated
// scalar flag winning and the kubelet's own map flag types. Flags other than
// --config, --config-dir, --hostname-override and the eviction flags are
// skipped with their values.
func ParseKubeletArgs(args []string) (*KubeletProcess, error) {
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	p := &KubeletProcess{Args: args}
	fs.StringVar(&p.ConfigFile, "config", "", "")
	fs.StringVar(&p.ConfigDir, "config-dir", "", "")
	fs.StringVar(&p.HostnameOverride, "hostname-override", "", "")
	p.Eviction = load.RegisterEvictionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, name := range p.Eviction.Set() {
		p.EvictionArgs = append(p.EvictionArgs, "--"+name+"="+fs.Lookup(name).Value.String())
	}
	return p, nil
}
