package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/version"
)

// `evictd version` and `evictd --version` print the same line: the version,
// and the kubelet release whose eviction semantics evictd implements.
func TestVersion(t *testing.T) {
	var a, b, errb bytes.Buffer
	if code := run([]string{"version"}, &a, &errb); code != cli.ExitOK {
		t.Fatalf("evictd version: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"--version"}, &b, &errb); code != cli.ExitOK {
		t.Fatalf("evictd --version: exit %d: %s", code, errb.String())
	}
	if a.String() != b.String() {
		t.Errorf("version %q, --version %q", a.String(), b.String())
	}
	if !strings.HasPrefix(a.String(), "evictd "+version.Version()+" (") || !strings.HasSuffix(a.String(), "; eviction semantics of kubelet "+version.Kubelet+"\n") {
		t.Errorf("version line %q", a.String())
	}
	if code := run([]string{"version", "extra"}, &a, &errb); code != cli.ExitError {
		t.Errorf("version with an argument: exit %d", code)
	}
}

// The version and commit stamped at link time, as make build and make
// image stamp them, are what evictd prints.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("links evictd (-short)")
	}
	bin := filepath.Join(t.TempDir(), "evictd")
	const v, rev = "v1.2.3-4-g0123456789ab-dirty", "0123456789abcdef0123456789abcdef01234567"
	ld := "-X github.com/evictd/evictd/internal/version.stamped=" + v + " -X github.com/evictd/evictd/internal/version.revision=" + rev
	// The flags of make image (static, -trimpath), so that the compiled
	// packages are shared with the image's build in Go's cache.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ld, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("evictd --version: %v\n%s", err, out)
	}
	want := "evictd " + v + " (commit 0123456789ab, " + version.GoVersion() + "); eviction semantics of kubelet " + version.Kubelet + "\n"
	if string(out) != want {
		t.Errorf("evictd --version:\n got %q\nwant %q", out, want)
	}
}
