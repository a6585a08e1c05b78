package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeControl(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "control")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadControl(t *testing.T) {
	p := writeControl(t, "EVICTD-VM-TIMES 2.500 1.250 1795969243.250 tsc\n"+
		"EVICTD-VM-FILE 5 a/b.txt\nhello"+
		"EVICTD-VM-FILE 0 empty\n"+
		"EVICTD-VM-FILE 3 nl\n\n\n\n"+
		"EVICTD-VM-EXIT 1\nEVICTD-VM-END\ngarbage after the end is ignored")
	c, err := readControl(p)
	if err != nil {
		t.Fatal(err)
	}
	if !c.haveExit || c.exit != 1 || c.boot != 2.5 || c.ran != 1.25 || c.guestClock != 1795969243.25 || c.clocksource != "tsc" || c.errMsg != "" {
		t.Errorf("got %+v", c)
	}
	want := []outFile{{"a/b.txt", []byte("hello")}, {"empty", []byte{}}, {"nl", []byte("\n\n\n")}}
	if len(c.files) != len(want) {
		t.Fatalf("files %+v, want %+v", c.files, want)
	}
	for i, f := range c.files {
		if f.name != want[i].name || string(f.data) != string(want[i].data) {
			t.Errorf("file %d: %q %q, want %q %q", i, f.name, f.data, want[i].name, want[i].data)
		}
	}
}

func TestReadControlFailures(t *testing.T) {
	for name, content := range map[string]string{
		"no marker (VM died)":      "EVICTD-VM-TIMES 1 1\n",
		"cut mid-line":             "EVICTD-VM-EX",
		"cut mid-file":             "EVICTD-VM-FILE 10 f\nabc",
		"bad exit code":            "EVICTD-VM-EXIT x\n",
		"unknown line":             "hello\nEVICTD-VM-EXIT 0\n",
		"file header without name": "EVICTD-VM-FILE 3\nabc",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := readControl(writeControl(t, content))
			if c.haveExit && err == nil {
				t.Errorf("%q: reported exit %d and no error; a damaged channel must not pass", content, c.exit)
			}
			if name != "no marker (VM died)" && err == nil {
				t.Errorf("%q: no error", content)
			}
		})
	}
	c, err := readControl(writeControl(t, "EVICTD-VM-ERROR mount -t cgroup2: EBUSY\nEVICTD-VM-EXIT 125\n"))
	if err != nil || c.errMsg != "mount -t cgroup2: EBUSY" {
		t.Errorf("error line: %+v, %v", c, err)
	}
	if _, err := readControl(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing control file: no error")
	}
}

func TestVMTimeout(t *testing.T) {
	t.Setenv("EVICTD_VM_TIMEOUT", "")
	if got := vmTimeout([]string{"-test.v", "-test.timeout=4m0s"}); got != 4*time.Minute+bootSlack {
		t.Errorf("from -test.timeout=4m0s: %s", got)
	}
	if got := vmTimeout([]string{"-test.timeout=0s"}); got != defaultVMTimeout {
		t.Errorf("-test.timeout=0s (none): %s, want the default", got)
	}
	if got := vmTimeout(nil); got != defaultVMTimeout {
		t.Errorf("no flag: %s", got)
	}
	t.Setenv("EVICTD_VM_TIMEOUT", "90s")
	if got := vmTimeout([]string{"-test.timeout=4m0s"}); got != 90*time.Second {
		t.Errorf("EVICTD_VM_TIMEOUT=90s: %s", got)
	}
}

func TestWriteOutputsStaysInside(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("EVICTD_VM_OUTDIR", dir)
	if err := writeOutputs([]outFile{{"s/f", []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "s", "f")); err != nil || string(b) != "x" {
		t.Errorf("s/f: %q, %v", b, err)
	}
	t.Setenv("EVICTD_VM_OUTDIR", "")
	if err := writeOutputs([]outFile{{"f", nil}}); err == nil {
		t.Error("files the host did not ask for: accepted")
	}
	t.Setenv("EVICTD_VM_OUTDIR", dir)
	for _, bad := range []string{"../escape", "/abs", ""} {
		if err := writeOutputs([]outFile{{bad, nil}}); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestCheckStatic(t *testing.T) {
	// This test binary is built by `go test` with the host's defaults; the
	// VM tier builds with CGO_ENABLED=0. Whatever it is, checkStatic must
	// agree with the ELF interpreter entry.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = checkStatic(self)
	b, _ := os.ReadFile(self)
	dynamic := strings.Contains(string(b[:min(len(b), 4096)]), "/lib64/ld-linux")
	if dynamic && err == nil {
		t.Error("a dynamically linked binary passed")
	}
	if !dynamic && err != nil {
		t.Errorf("a static binary refused: %v", err)
	}
	if err := checkStatic("/dev/null"); err == nil {
		t.Error("/dev/null accepted as an ELF binary")
	}
	if _, err := os.Stat("/bin/sh"); err == nil {
		if err := checkStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("/bin/sh (dynamic on Debian): %v, want a CGO_ENABLED=0 hint", err)
		}
	}
}
