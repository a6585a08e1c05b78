// Command image builds evictd's OCI images and pushes them to a registry,
// with go-containerregistry (the library behind crane and ko). It is the
// project's one way of making images: `make image` builds the release image
// (evictd for linux/amd64 and linux/arm64, one index), and the node tier
// builds its pause and work images and imports `make image`'s the same way.
//
//	image build -o evictd.tar -name registry.example.com/evictd:v0.1.0 \
//	      -entrypoint /evictd -created 1796190985 \
//	      -platform linux/amd64=bin/linux-amd64/evictd -platform linux/arm64=bin/linux-arm64/evictd \
//	      -label org.opencontainers.image.version=v0.1.0
//	image push evictd.tar registry.example.com/evictd:v0.1.0
//	image digest evictd.tar                     # the index's digest (push prints it too)
//	image digest -config linux/amd64 evictd.tar # that platform's image ID
//
// A build is an OCI image layout in a tar (oci-layout, index.json, blobs/),
// for `ctr images import` and for push. Its index.json names the image
// (io.containerd.image.name, org.opencontainers.image.ref.name). Everything
// in it is a function of its inputs: files sorted, owned by root, times set
// to -created (a commit's time), so the same tree gives the same digest.
//
// push sends the image (the multi-platform index and every platform's
// image) and its tag with the credentials of the Docker configuration
// (~/.docker/config.json, $DOCKER_CONFIG: docker login, crane auth login),
// over HTTPS (plain HTTP for localhost and 127.0.0.0/8, or -insecure).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// busyboxApplets are the commands an image with -busybox links to busybox.
var busyboxApplets = []string{"sh", "cat", "echo", "env", "grep", "head", "ls", "mkdir", "nc", "ping", "ps", "rm", "sleep", "tail", "true", "false", "wget", "yes", "dd"}

// Annotations of index.json's entry, by which containerd's import names the
// image.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: image build|push|digest … (see the package comment of tools/image)")
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = cmdBuild(args[1:], stdout, stderr)
	case "push":
		err = cmdPush(args[1:], stdout, stderr)
	case "digest":
		err = cmdDigest(args[1:], stdout, stderr)
	default:
		err = fmt.Errorf("unknown command %q: want build, push or digest", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 1
	}
	return 0
}

// Spec is one image to build.
type Spec struct {
	Name       string            // e.g. registry.example.com/evictd:v0.1.0
	Entrypoint string            // a path in the image
	Created    time.Time         // every time in the image
	Platforms  map[string]string // "linux/amd64" → the binary put at Entrypoint
	Files      []string          // SRC:DST, the same on every platform
	Busybox    map[string]string // platform → a static busybox (optional)
	Labels     map[string]string // config labels and manifest annotations (org.opencontainers.image.*)
}

func cmdBuild(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the archive to write (an OCI image layout in a tar)")
	nm := fs.String("name", "", "the image's name, with its tag")
	entry := fs.String("entrypoint", "", "the image's entrypoint, where each platform's binary goes")
	created := fs.Int64("created", 0, "Unix time of every timestamp in the image (reproducible: a commit's time)")
	var platforms, files, busybox, labels multi
	fs.Var(&platforms, "platform", "OS/ARCH=BINARY: a platform and its binary, put at the entrypoint (repeatable; two or more make a multi-platform index)")
	fs.Var(&files, "file", "SRC:DST: a file for every platform at DST, mode 0755 (repeatable)")
	fs.Var(&busybox, "busybox", "OS/ARCH=BUSYBOX: a static busybox at /bin/busybox with /bin links for common applets")
	fs.Var(&labels, "label", "KEY=VALUE: a config label and manifest annotation (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *nm == "" || *entry == "" || len(platforms) == 0 || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("build needs -o, -name, -entrypoint and at least one -platform")
	}
	s := Spec{Name: *nm, Entrypoint: *entry, Created: time.Unix(*created, 0).UTC(), Platforms: map[string]string{},
		Files: files, Busybox: map[string]string{}, Labels: map[string]string{}}
	for _, kv := range []struct {
		flag string
		list multi
		into map[string]string
	}{{"-platform", platforms, s.Platforms}, {"-busybox", busybox, s.Busybox}, {"-label", labels, s.Labels}} {
		for _, v := range kv.list {
			k, val, ok := strings.Cut(v, "=")
			if !ok || k == "" || val == "" {
				return fmt.Errorf("%s %q: want KEY=VALUE", kv.flag, v)
			}
			kv.into[k] = val
		}
	}
	d, err := Build(s, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s\n", s.Name, d)
	return nil
}

// platformOf parses OS/ARCH.
func platformOf(p string) (v1.Platform, error) {
	os, arch, ok := strings.Cut(p, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return v1.Platform{}, fmt.Errorf("platform %q: want OS/ARCH, e.g. linux/arm64", p)
	}
	return v1.Platform{OS: os, Architecture: arch}, nil
}

// Build writes the image of s to out and returns its digest: the
// multi-platform index's with two or more platforms, else the image's.
func Build(s Spec, out string) (v1.Hash, error) {
	if _, err := name.NewTag(s.Name); err != nil || !strings.Contains(s.Name[strings.LastIndex(s.Name, "/")+1:], ":") {
		return v1.Hash{}, fmt.Errorf("-name %q: want REPOSITORY:TAG (%v)", s.Name, err)
	}
	if !path.IsAbs(s.Entrypoint) {
		return v1.Hash{}, fmt.Errorf("-entrypoint %q: want an absolute path", s.Entrypoint)
	}
	var plats []string
	for p := range s.Platforms {
		plats = append(plats, p)
	}
	sort.Strings(plats)
	for p := range s.Busybox {
		if _, ok := s.Platforms[p]; !ok {
			return v1.Hash{}, fmt.Errorf("-busybox %s: no -platform %s", p, p)
		}
	}
	var images []mutate.IndexAddendum
	for _, p := range plats {
		pl, err := platformOf(p)
		if err != nil {
			return v1.Hash{}, err
		}
		img, err := s.image(pl, s.Platforms[p], s.Busybox[p])
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", p, err)
		}
		images = append(images, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	tag := s.Name[strings.LastIndex(s.Name, ":")+1:]
	ann := map[string]string{annotationContainerdName: s.Name, annotationRefName: tag}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	var d v1.Hash
	if len(images) == 1 {
		img := images[0].Add.(v1.Image)
		if d, err = img.Digest(); err != nil {
			return v1.Hash{}, err
		}
		err = l.AppendImage(img, layout.WithAnnotations(ann), layout.WithPlatform(*images[0].Descriptor.Platform))
	} else {
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), images...)
		if len(s.Labels) > 0 {
			idx = mutate.Annotations(idx, s.Labels).(v1.ImageIndex)
		}
		if d, err = idx.Digest(); err != nil {
			return v1.Hash{}, err
		}
		err = l.AppendIndex(idx, layout.WithAnnotations(ann))
	}
	if err != nil {
		return v1.Hash{}, err
	}
	b, err := tarDir(dir, s.Created)
	if err != nil {
		return v1.Hash{}, err
	}
	return d, writeAtomic(out, b)
}

// image is one platform's image: one layer with the binary at the
// entrypoint, the files and busybox.
func (s Spec) image(pl v1.Platform, bin, busybox string) (v1.Image, error) {
	var es []entry
	add := func(src, dst string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		es = append(es, entry{path: dst, data: b})
		return nil
	}
	if err := add(bin, s.Entrypoint); err != nil {
		return nil, err
	}
	for _, f := range s.Files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("-file %q: want SRC:/ABSOLUTE/DST", f)
		}
		if err := add(src, dst); err != nil {
			return nil, fmt.Errorf("-file %q: %w", f, err)
		}
	}
	if busybox != "" {
		if err := add(busybox, "/bin/busybox"); err != nil {
			return nil, fmt.Errorf("-busybox: %w", err)
		}
		for _, a := range busyboxApplets {
			es = append(es, entry{path: "/bin/" + a, link: "busybox"})
		}
	}
	raw, err := layerTar(es, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "tools/image"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = pl.OS, pl.Architecture, pl.Variant
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.Entrypoint = []string{s.Entrypoint}
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Labels = s.Labels
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	if len(s.Labels) > 0 {
		img = mutate.Annotations(img, s.Labels).(v1.Image)
	}
	return img, nil
}

// entry is one file of the layer.
type entry struct {
	path, link string
	data       []byte
}

// layerTar makes a layer: the files with their parent directories, in a
// fixed order, owned by root, with one time, so the same inputs give the
// same digest.
func layerTar(es []entry, t time.Time) ([]byte, error) {
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
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: t, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.path] {
			return nil, fmt.Errorf("%s is in the image twice", e.path)
		}
		seen[e.path] = true
		h := &tar.Header{Name: strings.TrimPrefix(e.path, "/"), Mode: 0o755, ModTime: t, Format: tar.FormatPAX}
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

// tarDir packs an OCI layout directory, files sorted, with one time.
func tarDir(dir string, t time.Time) ([]byte, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dir, f)
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), ModTime: t, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

// open unpacks an archive Build wrote and returns its one entry: an index
// or an image, and the name it was built with.
func open(archive string) (idx v1.ImageIndex, img v1.Image, built string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "evictd-image-")
	if err != nil {
		return nil, nil, "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if err = untar(archive, dir); err != nil {
		return nil, nil, "", nil, err
	}
	l, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, "", nil, fmt.Errorf("%s: not an OCI layout: %w", archive, err)
	}
	root, err := l.ImageIndex()
	if err != nil {
		return nil, nil, "", nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, nil, "", nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, nil, "", nil, fmt.Errorf("%s: %d entries in index.json, want the one image tools/image writes", archive, len(m.Manifests))
	}
	desc := m.Manifests[0]
	built = desc.Annotations[annotationContainerdName]
	if desc.MediaType.IsIndex() {
		idx, err = root.ImageIndex(desc.Digest)
	} else {
		img, err = root.Image(desc.Digest)
	}
	return idx, img, built, cleanup, err
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s: unexpected entry %q", archive, h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		w, err := os.Create(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

func cmdDigest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image digest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "OS/ARCH: print that platform's image ID (its config's digest, which the container runtime reports for a running container) instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: image digest [-config OS/ARCH] ARCHIVE")
	}
	idx, img, _, cleanup, err := open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer cleanup()
	var d v1.Hash
	switch {
	case *config != "":
		pl, err := platformOf(*config)
		if err != nil {
			return err
		}
		if idx != nil {
			if img, err = platformImage(idx, pl); err != nil {
				return err
			}
		}
		d, err = img.ConfigName()
		if err != nil {
			return err
		}
	case idx != nil:
		d, err = idx.Digest()
	default:
		d, err = img.Digest()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, d)
	return nil
}

// platformImage is the image of idx for platform pl.
func platformImage(idx v1.ImageIndex, pl v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == pl.OS && d.Platform.Architecture == pl.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s in the index", pl.OS, pl.Architecture)
}

func cmdPush(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	insecure := fs.Bool("insecure", false, "allow plain HTTP and unverified TLS to the registry (localhost and 127.0.0.0/8 are plain HTTP anyway)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: image push [-insecure] ARCHIVE REGISTRY/REPOSITORY:TAG")
	}
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewTag(fs.Arg(1), opts...)
	if err != nil {
		return fmt.Errorf("%q: %w", fs.Arg(1), err)
	}
	idx, img, _, cleanup, err := open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	var d v1.Hash
	if idx != nil {
		err = remote.WriteIndex(ref, idx, ro...)
		if err == nil {
			d, err = idx.Digest()
		}
	} else {
		err = remote.Write(ref, img, ro...)
		if err == nil {
			d, err = img.Digest()
		}
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	fmt.Fprintf(stdout, "%s@%s\n", ref.Context().Name(), d)
	return nil
}
