package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	testVersion  = "v0.0.0-imagetest"
	testRevision = "feedbeef"
	versionPkg   = "github.com/fedfailover/fedfailover/internal/version"
)

// TestImage builds the manager image as `make image` does, stamped with a
// test version, into a temporary OCI layout; reads it back with
// go-containerregistry and checks what the chart and a registry rely on:
// one index with linux/amd64 and linux/arm64, user 65532, entrypoint
// /manager, the OCI labels, static binaries for the right machine, and the
// binary of this machine prints the stamped version. Writing it twice
// gives the same bytes.
func TestImage(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	o := options{
		repo: repo, pkg: "./cmd/manager", platforms: []string{"linux/amd64", "linux/arm64"},
		ldflags: "-X " + versionPkg + ".version=" + testVersion + " -X " + versionPkg + ".revision=" + testRevision,
		version: testVersion, revision: testRevision, source: "https://example.com/fedfailover", created: time.Unix(0, 0).UTC(),
	}
	bins, err := buildBinaries(o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := assemble(o, bins)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	if err := writeLayout(dir, idx, o.version); err != nil {
		t.Fatal(err)
	}

	t.Run("reproducible", func(t *testing.T) {
		again, err := assemble(o, bins)
		if err != nil {
			t.Fatal(err)
		}
		dir2 := filepath.Join(t.TempDir(), "image")
		if err := writeLayout(dir2, again, o.version); err != nil {
			t.Fatal(err)
		}
		a, errA := os.ReadFile(filepath.Join(dir, "index.json"))
		b, errB := os.ReadFile(filepath.Join(dir2, "index.json"))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("two builds from the same binaries differ:\n%s\n%s", a, b)
		}
	})

	t.Run("replaces only a layout", func(t *testing.T) {
		if err := writeLayout(dir, idx, o.version); err != nil {
			t.Errorf("rewriting a layout: %v", err)
		}
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "precious"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeLayout(other, idx, o.version); err == nil {
			t.Error("replaced a directory that is not an OCI layout")
		}
	})

	// Read it back as a registry client would.
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].MediaType != types.OCIImageIndex || rm.Manifests[0].Annotations[keyRefName] != testVersion {
		t.Fatalf("index.json %+v: want one image index named %s", rm.Manifests, testVersion)
	}
	multi, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations[keyVersion] != testVersion || im.Annotations[keyRevision] != testRevision {
		t.Errorf("index annotations %v", im.Annotations)
	}
	var platforms []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %s has no platform", m.Digest)
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, p)
		t.Run(p, func(t *testing.T) {
			img, err := multi.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img, m.Platform)
		})
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
}

func checkImage(t *testing.T, img v1.Image, p *v1.Platform) {
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s (%v), want %s", mt, err, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("config platform %s/%s, index says %s/%s", cf.OS, cf.Architecture, p.OS, p.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/manager"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/manager] and none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	for k, want := range map[string]string{keyVersion: testVersion, keyRevision: testRevision, keySource: "https://example.com/fedfailover"} {
		if cf.Config.Labels[k] != want {
			t.Errorf("label %s=%q, want %q", k, cf.Config.Labels[k], want)
		}
	}
	if !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("created %s, want the fixed epoch", cf.Created.Time)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}

	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimPrefix(h.Name, "/")
		files[name], headers[name] = b, h
	}
	if h := headers["/manager"]; h == nil || h.Mode&0o755 != 0o755 || h.Uid != 0 {
		t.Fatalf("/manager: %+v, want root-owned and executable by all", h)
	}
	if !strings.Contains(string(files["/etc/passwd"]), ":65532:65532:") {
		t.Errorf("/etc/passwd %q lacks the user 65532", files["/etc/passwd"])
	}

	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, files["/manager"], 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if f.Machine != wantMachine {
		t.Errorf("binary for %s, want %s", f.Machine, wantMachine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Error("binary has a dynamic loader (PT_INTERP): not static, would not run on an empty base")
		}
	}

	if runtime.GOOS != p.OS || runtime.GOARCH != p.Architecture {
		return
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", p.Architecture, err)
	}
	if want := "fedfailover-manager " + testVersion + " (revision " + testRevision + ", go"; !strings.HasPrefix(string(out), want) {
		t.Errorf("the image's manager prints %q, want %q...", out, want)
	}
}
