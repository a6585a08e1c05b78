package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// spec is a two-platform image of two small "binaries".
func spec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		f := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(f, []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = f
	}
	return Spec{Name: "registry.example.com/evictd:v0.1.0", Entrypoint: "/evictd", Created: time.Unix(1796190985, 0).UTC(),
		Platforms: bins, Labels: map[string]string{"org.opencontainers.image.version": "v0.1.0"}}
}

// The same inputs give the same archive byte for byte, and so the same
// digest: the release image can be rebuilt from the tree and checked.
func TestBuildReproducible(t *testing.T) {
	s := spec(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	da, err := Build(s, a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Build(s, b)
	if err != nil {
		t.Fatal(err)
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if da != db || !bytes.Equal(ba, bb) {
		t.Fatalf("two builds differ: %s %s (%d, %d bytes)", da, db, len(ba), len(bb))
	}
	s.Created = s.Created.Add(time.Second)
	dc, err := Build(s, filepath.Join(dir, "c.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if dc == da {
		t.Fatalf("another creation time, the same digest %s", dc)
	}
}

// A two-platform build is one index with an image per platform, each with
// its own binary at the entrypoint and its platform in its config, named
// for containerd's import.
func TestBuildMultiPlatform(t *testing.T) {
	s := spec(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	d, err := Build(s, out)
	if err != nil {
		t.Fatal(err)
	}
	idx, img, built, cleanup, err := open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if img != nil || idx == nil || built != s.Name {
		t.Fatalf("archive holds image %v index %v named %q", img, idx, built)
	}
	if got, _ := idx.Digest(); got != d {
		t.Fatalf("digest %s, Build said %s", got, d)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || m.Annotations["org.opencontainers.image.version"] != "v0.1.0" {
		t.Fatalf("index %+v", m)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"digest", out}, &stdout, &stderr); code != 0 || strings.TrimSpace(stdout.String()) != d.String() {
		t.Errorf("image digest: %d %q %s, want %s", code, stdout.String(), stderr.String(), d)
	}
	for _, desc := range m.Manifests {
		p := desc.Platform.OS + "/" + desc.Platform.Architecture
		im, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := im.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p || cf.Config.Entrypoint[0] != "/evictd" || !cf.Created.Time.Equal(s.Created) {
			t.Errorf("%s: config %s/%s entrypoint %v created %s", p, cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Created)
		}
		stdout.Reset()
		if code := run([]string{"digest", "-config", p, out}, &stdout, &stderr); code != 0 {
			t.Errorf("image digest -config %s: %d %s", p, code, stderr.String())
		} else if id, _ := im.ConfigName(); strings.TrimSpace(stdout.String()) != id.String() {
			t.Errorf("image digest -config %s: %q, want the image ID %s", p, stdout.String(), id)
		}
		files := layerFiles(t, im)
		if string(files["evictd"]) != "binary for "+p {
			t.Errorf("%s: /evictd is %q", p, files["evictd"])
		}
	}
}

// Pushing sends the index, every platform's image and the tag to a
// registry (go-containerregistry's own, on loopback), from which they come
// back with the same digests.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	s := spec(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	d, err := Build(s, out)
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/evictd:v0.1.0"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"push", out, ref}, &stdout, &stderr); code != 0 {
		t.Fatalf("push: %d %s", code, stderr.String())
	}
	if !strings.HasSuffix(strings.TrimSpace(stdout.String()), "@"+d.String()) {
		t.Errorf("push printed %q, want the digest %s", stdout.String(), d)
	}
	tag, _ := name.NewTag(ref)
	got, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if gd, _ := got.Digest(); gd != d {
		t.Fatalf("registry has %s, pushed %s", gd, d)
	}
	arm, err := remote.Image(tag, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))
	if err != nil {
		t.Fatal(err)
	}
	if string(layerFiles(t, arm)["evictd"]) != "binary for linux/arm64" {
		t.Errorf("the arm64 image pulled back lacks its binary")
	}
}

// A single-platform build (the node tier's pause and work images) is a
// plain image, with busybox and its applet links when asked.
func TestBuildSingleWithBusybox(t *testing.T) {
	dir := t.TempDir()
	bin, bb := filepath.Join(dir, "hog"), filepath.Join(dir, "busybox")
	os.WriteFile(bin, []byte("hog"), 0o755)
	os.WriteFile(bb, []byte("busybox"), 0o755)
	out := filepath.Join(dir, "work.tar")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"build", "-o", out, "-name", "evictd.local/work:node", "-entrypoint", "/hog",
		"-platform", "linux/amd64=" + bin, "-busybox", "linux/amd64=" + bb}, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s", code, stderr.String())
	}
	idx, img, built, cleanup, err := open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if idx != nil || img == nil || built != "evictd.local/work:node" {
		t.Fatalf("archive holds image %v index %v named %q", img, idx, built)
	}
	files := layerFiles(t, img)
	if string(files["hog"]) != "hog" || string(files["bin/busybox"]) != "busybox" || string(files["bin/sh"]) != "-> busybox" {
		t.Errorf("layer files %v", keys(files))
	}
}

// Bad input is refused with a message naming the flag.
func TestBuildRejects(t *testing.T) {
	for _, args := range [][]string{
		{"build", "-o", "x.tar", "-name", "evictd", "-entrypoint", "/e", "-platform", "linux/amd64=/bin/true"},
		{"build", "-o", "x.tar", "-name", "e:1", "-entrypoint", "e", "-platform", "linux/amd64=/bin/true"},
		{"build", "-o", "x.tar", "-name", "e:1", "-entrypoint", "/e", "-platform", "amd64=/bin/true"},
		{"build", "-o", "x.tar", "-name", "e:1", "-entrypoint", "/e"},
		{"push", "no-such.tar"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

// layerFiles reads an image's single layer: path → content ("-> target"
// for a symlink).
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers %v %v", ls, err)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			files[h.Name] = b
		case tar.TypeSymlink:
			files[h.Name] = []byte("-> " + h.Linkname)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
