package kubeletconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The kubelet's command line, parsed as its pflag flag set parses it.
func TestParseKubeletArgs(t *testing.T) {
	p, err := ParseKubeletArgs([]string{
		"--kubeconfig", "/etc/kubernetes/kubelet.conf", "--fail-swap-on", "--v=2",
		"--config=/var/lib/kubelet/config.yaml", "--config_dir", "/etc/kubernetes/kubelet.conf.d",
		"--eviction-hard", "memory.available<500Mi", "--eviction-hard=nodefs.available<10%",
		"--eviction_soft=memory.available<1Gi", "--eviction-soft-grace-period", "memory.available=1m",
		"--node-ip", "10.0.0.1", "--eviction-max-pod-grace-period=30",
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.ConfigFile != "/var/lib/kubelet/config.yaml" || p.ConfigDir != "/etc/kubernetes/kubelet.conf.d" {
		t.Errorf("config %q, config-dir %q", p.ConfigFile, p.ConfigDir)
	}
	want := []string{
		"--eviction-hard=memory.available<500Mi,nodefs.available<10%",
		"--eviction-max-pod-grace-period=30",
		"--eviction-soft=memory.available<1Gi",
		"--eviction-soft-grace-period=memory.available=1m",
	}
	if !reflect.DeepEqual(p.EvictionArgs, want) {
		t.Errorf("eviction args %q, want %q", p.EvictionArgs, want)
	}
	if _, err := ParseKubeletArgs([]string{"--eviction-hard", "memory.available"}); err == nil {
		t.Error("a malformed --eviction-hard parsed")
	}
}

func TestFindKubelet(t *testing.T) {
	kubelet := "/usr/bin/kubelet\x00--config\x00/etc/k/config.yaml\x00--eviction-hard=memory.available<1Gi\x00"
	proc := write(t, map[string]string{
		"1/comm": "systemd\n", "1/cmdline": "/sbin/init\x00",
		"42/comm": "kubelet\n", "42/cmdline": kubelet,
		"43/comm": "kubelet\n", "43/cmdline": "", // a zombie: no arguments
		"self/comm": "evictd\n",
	})
	p, err := FindKubelet(proc)
	if err != nil || p == nil {
		t.Fatalf("%v %v", p, err)
	}
	if p.PID != 42 || p.ConfigFile != "/etc/k/config.yaml" || strings.Join(p.EvictionArgs, " ") != "--eviction-hard=memory.available<1Gi" {
		t.Errorf("%+v", p)
	}
	// OpenShift's kubelet.service runs "hyperkube kubelet ...".
	hk := write(t, map[string]string{"9/comm": "hyperkube\n", "9/cmdline": "/usr/bin/hyperkube\x00kubelet\x00--config=/etc/kubernetes/kubelet.conf\x00",
		"8/comm": "hyperkube\n", "8/cmdline": "/usr/bin/hyperkube\x00kube-proxy\x00--config=/x\x00"})
	if p, err := FindKubelet(hk); err != nil || p == nil || p.PID != 9 || p.ConfigFile != "/etc/kubernetes/kubelet.conf" {
		t.Errorf("hyperkube kubelet: %+v %v", p, err)
	}
	if p, err := FindKubelet(write(t, map[string]string{"7/comm": "k3s-server\n", "7/cmdline": "k3s\x00server\x00"})); p != nil || err != nil {
		t.Errorf("no kubelet: %v %v", p, err)
	}
	two := write(t, map[string]string{"42/comm": "kubelet\n", "42/cmdline": kubelet, "50/comm": "kubelet\n", "50/cmdline": "kubelet\x00--config=/other\x00"})
	if _, err := FindKubelet(two); !errors.Is(err, ErrSeveralKubelets) {
		t.Errorf("two kubelets: %v", err)
	}
}

func TestCheckKubeletVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v1.37.2": true, "v1.37.0": true, "v1.37.9-eks-1a2b3c": true, "v1.37.2+k3s1": true, "1.37.2": true,
		"v1.36.4": false, "v1.38.0": false, "v2.37.2": false, "unknown": false, "": false,
	} {
		err := CheckKubeletVersion(v)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", v, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "v1.37.2") {
			t.Errorf("%q: the message does not name the implemented release: %v", v, err)
		}
	}
}
