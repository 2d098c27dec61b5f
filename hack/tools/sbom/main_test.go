package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	mainModule = "github.com/fedfailover/fedfailover"
	testVer    = "v0.0.0-sbomtest"
)

// buildPlugin builds the real kubectl plugin, stripped as the release
// builds it (-s -w: the build information must survive that).
func buildPlugin(t *testing.T) (repo, bin string) {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(t.TempDir(), "kubectl-failover")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", bin, "./cmd/kubectl-failover")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return repo, bin
}

// requiredVersion is the version of module the root go.mod requires.
func requiredVersion(t *testing.T, repo, module string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1]
		}
	}
	t.Fatalf("go.mod requires no %s", module)
	return ""
}

// writeSBOM runs the generator on an artifact as `make release` does and
// decodes what it wrote.
func writeSBOM(t *testing.T, artifact string) (*spdxDocument, []byte) {
	t.Helper()
	out := t.TempDir()
	o := options{out: out, version: testVer, namespace: "https://example.com/sbom", license: "Apache-2.0", created: time.Unix(0, 0).UTC()}
	if err := run(o, artifact); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, filepath.Base(artifact)+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("not valid JSON:\n%.2000s", b)
	}
	var doc spdxDocument
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return &doc, b
}

// TestPluginArchive: the SBOM of a plugin archive like hack/release.sh's
// (the real, stripped binary, its completion script and LICENSE) is a
// well-formed SPDX 2.3 document that lists the binary with its sha256,
// the main module, the standard library of this toolchain and
// k8s.io/client-go at the version go.mod requires, with its h1: hash.
func TestPluginArchive(t *testing.T) {
	repo, bin := buildPlugin(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "kubectl-failover_"+testVer+"_linux_amd64.tar.gz")
	writeTarGz(t, archive, map[string][]byte{
		"kubectl-failover":          data,
		"kubectl_complete-failover": []byte("#!/bin/sh\nexec kubectl failover __complete \"$@\"\n"),
		"LICENSE":                   []byte("Apache License\n"),
	})
	doc, raw := writeSBOM(t, archive)
	checkDocument(t, doc)

	byName := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		byName[p.Name] = p
	}
	if p := byName["kubectl-failover"]; len(p.Checksums) != 1 || p.Checksums[0].ChecksumValue != hexSHA256(data) || p.VersionInfo != testVer {
		t.Errorf("binary package %+v: want version %s and the binary's sha256", p, testVer)
	}
	if _, ok := byName["kubectl_complete-failover"]; ok {
		t.Error("the completion script is listed as a Go binary")
	}
	if p := byName[mainModule]; p.VersionInfo == "" || p.PrimaryPackagePurpose != "SOURCE" {
		t.Errorf("main module %+v: want it listed with a version", p)
	}
	wantClientGo := requiredVersion(t, repo, "k8s.io/client-go")
	cg, ok := byName["k8s.io/client-go"]
	if !ok || cg.VersionInfo != wantClientGo {
		t.Fatalf("k8s.io/client-go %+v: want version %s (go.mod)", cg, wantClientGo)
	}
	if refs := refsOf(cg); refs["purl"] != "pkg:golang/k8s.io/client-go@"+wantClientGo || !strings.HasPrefix(refs[refTypeGoSum], "h1:") {
		t.Errorf("k8s.io/client-go refs %v: want its purl and its h1: hash", refs)
	}
	if p := byName[stdlibName]; !strings.HasPrefix(runtime.Version(), p.VersionInfo) || p.VersionInfo == "" {
		t.Errorf("stdlib %+v: want this toolchain's %s", p, runtime.Version())
	}
	// Every module of the build is in the document.
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "dep" {
			deps++
			if p, ok := byName[f[1]]; !ok || p.VersionInfo != f[2] {
				t.Errorf("go version -m lists %s %s; the SBOM has %+v", f[1], f[2], p)
			}
		}
	}
	if deps < 20 {
		t.Errorf("go version -m shows only %d deps", deps)
	}

	t.Run("reproducible", func(t *testing.T) {
		if _, again := writeSBOM(t, archive); !bytes.Equal(raw, again) {
			t.Error("two SBOMs of the same archive differ")
		}
	})
	t.Run("no Go binary", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "docs.tar.gz")
		writeTarGz(t, empty, map[string][]byte{"LICENSE": []byte("x")})
		if _, err := load(empty); err == nil {
			t.Error("an archive without a Go binary gave an SBOM")
		}
	})
}

// TestImageLayout: the SBOM of an OCI image layout (a directory, and the
// same as a tar, as `make release` ships it) finds the binary in each
// platform's layer through the nested index, names the index digest, and
// refuses a layout whose blob does not match its digest.
func TestImageLayout(t *testing.T) {
	_, bin := buildPlugin(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir, digest := writeLayout(t, data, []string{"linux/amd64", "linux/arm64"})
	for _, artifact := range []string{dir, tarDir(t, dir)} {
		doc, _ := writeSBOM(t, artifact)
		checkDocument(t, doc)
		var binaries []string
		for _, p := range doc.Packages {
			if p.PrimaryPackagePurpose == "APPLICATION" {
				binaries = append(binaries, p.Comment)
			}
			if p.PrimaryPackagePurpose == "CONTAINER" && refsOf(p)["purl"] != "pkg:oci/fedfailover@sha256%3A"+strings.TrimPrefix(digest, "sha256:") {
				t.Errorf("%s: image package %+v does not name the index %s", filepath.Base(artifact), p, digest)
			}
		}
		want := []string{"/manager in " + filepath.Base(artifact) + ", for linux/amd64", "/manager in " + filepath.Base(artifact) + ", for linux/arm64"}
		if strings.Join(binaries, "|") != strings.Join(want, "|") {
			t.Errorf("%s: binaries %q, want %q", filepath.Base(artifact), binaries, want)
		}
		mods := 0
		for _, p := range doc.Packages {
			if p.Name == "k8s.io/client-go" {
				mods++
			}
		}
		if mods != 1 {
			t.Errorf("%s: k8s.io/client-go listed %d times, want once for both platforms", filepath.Base(artifact), mods)
		}
	}

	t.Run("corrupt blob", func(t *testing.T) {
		blobs, err := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
		if err != nil || len(blobs) == 0 {
			t.Fatal(blobs, err)
		}
		for _, b := range blobs {
			if err := os.WriteFile(b, []byte("tampered"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := load(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("a tampered layout: %v, want a digest error", err)
		}
	})
}

// checkDocument checks what makes an SPDX 2.3 document well-formed for
// its consumers: the header, unique ids of the idstring form, every
// relationship between known elements, one DESCRIBES.
func checkDocument(t *testing.T, doc *spdxDocument) {
	t.Helper()
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" ||
		!strings.HasPrefix(doc.DocumentNamespace, "https://example.com/sbom/") || doc.CreationInfo.Created != "1970-01-01T00:00:00Z" {
		t.Errorf("document header %+v", doc)
	}
	ids := map[string]bool{doc.SPDXID: true}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("duplicate SPDXID %s", p.SPDXID)
		}
		ids[p.SPDXID] = true
		if !strings.HasPrefix(p.SPDXID, "SPDXRef-") || strings.Trim(strings.TrimPrefix(p.SPDXID, "SPDXRef-"),
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
			t.Errorf("SPDXID %q is not an SPDX idstring", p.SPDXID)
		}
		if p.Name == "" || p.DownloadLocation == "" {
			t.Errorf("package %s lacks a name or downloadLocation", p.SPDXID)
		}
	}
	describes := 0
	for _, r := range doc.Relationships {
		if !ids[r.SPDXElementID] || !ids[r.RelatedSPDXElement] {
			t.Errorf("relationship %+v names an unknown element", r)
		}
		if r.RelationshipType == "DESCRIBES" {
			describes++
		}
	}
	if describes != 1 {
		t.Errorf("%d DESCRIBES relationships, want 1", describes)
	}
}

func refsOf(p spdxPackage) map[string]string {
	out := map[string]string{}
	for _, r := range p.ExternalRefs {
		out[r.ReferenceType] = r.ReferenceLocator
	}
	return out
}

func tarBytes(t *testing.T, files map[string][]byte, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func writeTarGz(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	if err := os.WriteFile(path, tarBytes(t, files, true), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeLayout writes an OCI image layout as `make image` does: index.json
// names one image index, which names one image per platform, each with
// one gzip layer holding /manager. It returns the directory and the
// index's digest.
func writeLayout(t *testing.T, binary []byte, platforms []string) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "image")
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) ociDescriptor {
		sum := hexSHA256(b)
		if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", sum), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return ociDescriptor{Digest: "sha256:" + sum, Size: int64(len(b))}
	}
	putJSON := func(v any, mediaType string) ociDescriptor {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		d := put(b)
		d.MediaType = mediaType
		return d
	}
	var images []ociDescriptor
	for _, p := range platforms {
		layer := put(tarBytes(t, map[string][]byte{"etc/passwd": []byte("nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n"), "manager": binary}, true))
		layer.MediaType = "application/vnd.oci.image.layer.v1.tar+gzip"
		config := putJSON(map[string]string{"architecture": strings.Split(p, "/")[1], "os": "linux"}, "application/vnd.oci.image.config.v1+json")
		img := putJSON(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIManifest, "config": config, "layers": []ociDescriptor{layer}}, mediaOCIManifest)
		goos, goarch, _ := strings.Cut(p, "/")
		img.Platform = &ociPlatform{OS: goos, Architecture: goarch}
		images = append(images, img)
	}
	idx := putJSON(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIIndex, "manifests": images}, mediaOCIIndex)
	idx.Annotations = map[string]string{annotationRefName: testVer}
	top, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIIndex, "manifests": []ociDescriptor{idx}})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"index.json": top, "oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, idx.Digest
}

// tarDir packs a layout directory into DIR.oci.tar (an oci-archive).
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "fedfailover-image_"+testVer+".oci.tar")
	if err := os.WriteFile(out, tarBytes(t, files, false), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
