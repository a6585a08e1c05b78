// Command mkimage writes a single-layer OCI image archive (an OCI image
// layout in a tar: oci-layout, index.json, blobs/sha256/...) from files on
// this machine, for `ctr images import`: the node tier's images need no
// registry and no network. The index's manifest carries the annotation
// io.containerd.image.name, which names the image on import.
//
//	mkimage -o work.tar -name evictd.local/work:node -entrypoint /hog \
//	        -busybox /path/to/busybox -file ./hog:/hog
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// busyboxApplets are the commands the work image links to busybox.
var busyboxApplets = []string{"sh", "cat", "echo", "env", "grep", "head", "ls", "mkdir", "nc", "ping", "ps", "rm", "sleep", "tail", "true", "false", "wget", "yes", "dd"}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(s string) error { *f = append(*f, s); return nil }

func main() {
	out := flag.String("o", "", "the archive to write")
	name := flag.String("name", "", "the image name (e.g. evictd.local/work:node)")
	entry := flag.String("entrypoint", "", "the image's entrypoint (a path in the image)")
	busybox := flag.String("busybox", "", "a static busybox to put at /bin/busybox, with /bin links for common applets")
	var files fileList
	flag.Var(&files, "file", "SRC:DST, a file to put in the image at DST, mode 0755 (repeatable)")
	flag.Parse()
	if *out == "" || *name == "" || *entry == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -o FILE.tar -name NAME -entrypoint PATH [-busybox FILE] [-file SRC:DST]...")
		os.Exit(2)
	}
	if err := run(*out, *name, *entry, *busybox, files); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// entry is one file of the layer.
type entry struct {
	path, link string
	data       []byte
}

func run(out, name, entrypoint, busybox string, files []string) error {
	var es []entry
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok || !path.IsAbs(dst) {
			return fmt.Errorf("-file %q: want SRC:/ABSOLUTE/DST", f)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("-file %q: %w", f, err)
		}
		es = append(es, entry{path: dst, data: b})
	}
	if busybox != "" {
		b, err := os.ReadFile(busybox)
		if err != nil {
			return fmt.Errorf("-busybox: %w", err)
		}
		es = append(es, entry{path: "/bin/busybox", data: b})
		for _, a := range busyboxApplets {
			es = append(es, entry{path: "/bin/" + a, link: "busybox"})
		}
	}
	layer, err := layerTar(es)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": []string{entrypoint},
			"Env":        []string{"PATH=/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config, nil),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer, nil)},
	})
	if err != nil {
		return err
	}
	md := descriptor("application/vnd.oci.image.manifest.v1+json", manifest, map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": name[strings.LastIndex(name, ":")+1:],
	})
	md["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{md},
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(n string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, f := range []struct {
		n string
		b []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer), layer},
	} {
		if err := add(f.n, f.b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return writeAtomic(out, buf.Bytes())
}

// layerTar makes the layer: the files with their parent directories, in a
// fixed order and with fixed times, so the same inputs give the same digest.
func layerTar(es []entry) ([]byte, error) {
	dirs := map[string]bool{}
	for _, e := range es {
		for d := path.Dir(e.path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.path] {
			return nil, fmt.Errorf("%s is in the image twice", e.path)
		}
		seen[e.path] = true
		h := &tar.Header{Name: strings.TrimPrefix(e.path, "/"), Mode: 0o755, ModTime: time.Unix(0, 0)}
		if e.link != "" {
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blobPath(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

func descriptor(mediaType string, b []byte, annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}

func writeAtomic(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
