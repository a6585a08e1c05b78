package host

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseCmdlineArgs(t *testing.T) {
	for in, want := range map[string][]string{
		"kubelet\x00--config\x00/var/lib/kubelet/config.yaml\x00": {"kubelet", "--config", "/var/lib/kubelet/config.yaml"},
		"a b\x00\x00c\x00": {"a b", "", "c"},
		"no-terminator":    {"no-terminator"},
		"":                 nil,
	} {
		got, err := parseCmdlineArgs(strings.NewReader(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
}

// The real /proc: this test's own process, found by its comm, with its
// arguments intact (spaces and all).
func TestProcessesNamedAndArgsOnThisMachine(t *testing.T) {
	args, err := ReadCmdlineArgs("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(args, os.Args) {
		t.Errorf("args %q, want %q", args, os.Args)
	}
	comm, err := ReadComm("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if base := filepath.Base(os.Args[0]); !strings.HasPrefix(base, comm) || len(comm) > 15 {
		t.Errorf("comm %q for %s", comm, base)
	}
	pids, err := ProcessesNamed("/proc", comm)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pids {
		found = found || p == os.Getpid()
	}
	if !found {
		t.Errorf("pid %d not among the processes named %q: %v", os.Getpid(), comm, pids)
	}
}

func FuzzParseCmdlineArgs(f *testing.F) {
	f.Add([]byte("kubelet\x00--config=/x\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		args, err := parseCmdlineArgs(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if joined := strings.Join(args, "\x00"); joined != strings.TrimSuffix(string(b), "\x00") {
			t.Fatalf("lost bytes: %q from %q", joined, b)
		}
	})
}
