package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The archive is an OCI layout whose blobs match their digests, whose index
// names the image for containerd, and whose layer holds the files (and the
// busybox links) at their paths.
func TestArchive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("#!prog"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	if err := run(out, "evictd.local/x:node", "/x", src, []string{src + ":/x"}); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, mustRead(t, out))
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != "evictd.local/x:node" {
		t.Fatalf("index: %s", files["index.json"])
	}
	blob := func(d string) []byte {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		if !ok || digest(b) != d {
			t.Fatalf("blob %s missing or not matching its digest", d)
		}
		return b
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	layer := blob(manifest.Layers[0].Digest)
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != digest(layer) || config.Config.Entrypoint[0] != "/x" {
		t.Fatalf("config: %+v", config)
	}
	l := readTar(t, layer)
	if string(l["x"]) != "#!prog" || string(l["bin/busybox"]) != "#!prog" || l["bin/sh"] == nil {
		t.Fatalf("layer holds %v", keys(l))
	}
}

func TestBadFile(t *testing.T) {
	err := run(filepath.Join(t.TempDir(), "o.tar"), "n:t", "/x", "", []string{"relative"})
	if err == nil || !strings.Contains(err.Error(), `-file "relative": want SRC:/ABSOLUTE/DST`) {
		t.Fatalf("got %v", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readTar maps names to contents; a symlink maps to "-> target".
func readTar(t *testing.T, b []byte) map[string][]byte {
	m := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return m
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			c = []byte("-> " + h.Linkname)
		}
		m[h.Name] = c
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
