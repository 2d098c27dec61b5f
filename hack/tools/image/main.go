// Command image builds the fedfailover manager's container image without a
// container daemon (`make image`): for each platform a static manager
// binary (CGO_ENABLED=0, -trimpath) in a single layer on an empty base,
// with an /etc/passwd naming the non-root user 65532 it runs as, gathered
// into one multi-platform OCI image index and written as an OCI image
// layout (index.json, blobs/). Push it with any OCI tool, e.g.
//
//	crane push _output/image registry.example.com/fedfailover:v0.2.0
//	skopeo copy --all oci:_output/image:v0.2.0 docker://registry.example.com/fedfailover:v0.2.0
//
// The same inputs give the same bytes: files and config carry a fixed time
// (SOURCE_DATE_EPOCH, else the Unix epoch) and no host user names.
//
// It lives in a tools module of its own, like every other tool under
// hack/tools/: go-containerregistry and its dependencies are needed to
// build images, not by the operator, so they stay out of the root go.mod
// that the manager and the plugin are built from (and out of its `go mod
// tidy -e`). Its test (run by `make test-unit`) builds the image and checks
// it from this module for the same reason.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image runs, as which user (distroless' "nonroot"; the chart's
// securityContext uses the same numbers).
const (
	binaryPath = "manager"
	entrypoint = "/manager"
	uid        = 65532
	user       = "65532:65532"
)

// OCI annotation and label keys.
const (
	keyVersion  = "org.opencontainers.image.version"
	keyRevision = "org.opencontainers.image.revision"
	keySource   = "org.opencontainers.image.source"
	keyTitle    = "org.opencontainers.image.title"
	keyLicenses = "org.opencontainers.image.licenses"
	keyCreated  = "org.opencontainers.image.created"
	keyRefName  = "org.opencontainers.image.ref.name"
)

type options struct {
	repo      string   // repository root, where `go build` runs
	pkg       string   // the manager's package
	platforms []string // os/arch
	ldflags   string   // extra linker flags (the version stamp)
	out       string   // OCI layout directory
	version   string
	revision  string
	source    string
	created   time.Time
}

func main() {
	var o options
	var platforms string
	flag.StringVar(&o.repo, "repo", ".", "repository root")
	flag.StringVar(&o.pkg, "package", "./cmd/manager", "package of the manager, relative to --repo")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.StringVar(&o.ldflags, "ldflags", "", "extra -ldflags for go build, e.g. the -X version stamp")
	flag.StringVar(&o.out, "out", "_output/image", "OCI image layout directory to write (replaced)")
	flag.StringVar(&o.version, "version", "dev", "image version (label, annotation and the layout's ref name)")
	flag.StringVar(&o.revision, "revision", "unknown", "source revision (label and annotation)")
	flag.StringVar(&o.source, "source", "https://github.com/fedfailover/fedfailover", "source repository URL (label and annotation)")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	var err error
	if o.created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// sourceDateEpoch is the time stamped into the image: SOURCE_DATE_EPOCH
// (reproducible-builds.org), else the Unix epoch.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func run(o options) error {
	work, err := os.MkdirTemp("", "fedfailover-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	bins, err := buildBinaries(o, work)
	if err != nil {
		return err
	}
	idx, err := assemble(o, bins)
	if err != nil {
		return err
	}
	if err := writeLayout(o.out, idx, o.version); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (%s, %s)\n", o.out, strings.Join(o.platforms, ", "), d)
	return nil
}

// buildBinaries builds a static manager per platform into dir and returns
// their paths by platform.
func buildBinaries(o options, dir string) (map[string]string, error) {
	bins := map[string]string{}
	for _, p := range o.platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("platform %q: want os/arch", p)
		}
		bin := filepath.Join(dir, goos+"_"+goarch, binaryPath)
		fmt.Fprintf(os.Stderr, "image: building %s for %s\n", o.pkg, p)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+o.ldflags), "-o", bin, o.pkg)
		cmd.Dir = o.repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build for %s: %w", p, err)
		}
		bins[p] = bin
	}
	return bins, nil
}

// assemble makes the multi-platform index of one image per platform, in
// the order of o.platforms.
func assemble(o options, bins map[string]string) (v1.ImageIndex, error) {
	meta := map[string]string{
		keyVersion:  o.version,
		keyRevision: o.revision,
		keySource:   o.source,
		keyTitle:    "fedfailover",
		keyLicenses: "Apache-2.0",
		keyCreated:  o.created.Format(time.RFC3339),
	}
	var idx v1.ImageIndex = empty.Index
	for _, p := range o.platforms {
		bin, ok := bins[p]
		if !ok {
			return nil, fmt.Errorf("no binary for %s", p)
		}
		img, platform, err := image(o, p, bin, meta)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform}})
	}
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	ann, ok := mutate.Annotations(idx, meta).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index")
	}
	return ann, nil
}

// image is one platform's image: the binary's layer on an empty base.
func image(o options, p, bin string, labels map[string]string) (v1.Image, *v1.Platform, error) {
	platform, err := v1.ParsePlatform(p)
	if err != nil {
		return nil, nil, err
	}
	if platform.Architecture == "arm64" && platform.Variant == "" {
		platform.Variant = "v8" // as registries and runtimes name arm64
	}
	data, err := layerTar(bin, o.created)
	if err != nil {
		return nil, nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "fedfailover hack/tools/image: " + o.pkg, Comment: "static manager binary, /etc/passwd"}})
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{entrypoint},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, err
	}
	return img, platform, nil
}

// layerTar is the image's only layer: /manager (root-owned, 0755), the
// user 65532 in /etc/passwd and /etc/group, its home, and /tmp.
func layerTar(bin string, mtime time.Time) ([]byte, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		mode int64
		uid  int
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: uid, dir: true},
		{name: binaryPath, mode: 0o755, data: binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
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

// writeLayout replaces dir with an OCI image layout whose index.json names
// the multi-platform index by its version (the ref name skopeo's
// oci:DIR:VERSION reads; crane push takes the single entry). It refuses to
// replace a directory that is neither empty nor such a layout.
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("%s exists and is not an OCI image layout: not replacing it", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return l.AppendIndex(idx, layout.WithAnnotations(map[string]string{keyRefName: version}))
}
