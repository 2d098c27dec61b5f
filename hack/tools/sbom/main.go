// Command sbom writes the software bills of materials of a fedfailover
// release (`make release`): for each artifact an SPDX 2.3 JSON document
// listing, for every Go binary in the artifact, the module graph the
// binary was built from as the binary itself records it (debug/buildinfo):
// the main module, each dependency module with its version and go.sum hash
// (h1:), and the Go toolchain that built it (the standard library).
//
//	go run . --out DIR --version v0.2.0 ARTIFACT...
//
// An ARTIFACT is
//   - a .tar.gz or .tgz archive (the kubectl plugin's): the Go binaries in it;
//   - a .tar of an OCI image layout (an oci-archive), or a layout
//     directory: the Go binaries in the layers of each image of the index,
//     by platform; every blob read is checked against its digest;
//   - any other file: a Go binary.
//
// What ships is read, not go.mod: a module the linker left out is not
// listed, and a replaced module is listed as it was built. Each document
// is written to DIR/<artifact's file name>.spdx.json. The same artifact
// gives the same bytes: the creation time is SOURCE_DATE_EPOCH, else the
// Unix epoch (as for the image), and the document namespace is derived
// from the artifact's sha256.
//
// It lives in a tools module of its own, like every other tool under
// hack/tools/, and uses only the standard library. Its test (run by
// `make test-unit`) builds the real kubectl plugin and checks the SBOM.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

type options struct {
	out       string    // directory of the SBOMs ("" = next to each artifact)
	version   string    // release version: the artifact's and its binaries' version
	download  string    // URL the artifacts are downloaded from ("" = NOASSERTION)
	namespace string    // base of each document's namespace URI
	license   string    // SPDX license of fedfailover's own packages
	created   time.Time // the documents' creation time
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "directory to write <artifact>.spdx.json into (default: next to each artifact)")
	flag.StringVar(&o.version, "version", "dev", "release version, the version of the artifacts and of fedfailover's binaries")
	flag.StringVar(&o.download, "download-url", "", "URL the artifacts are downloaded from (<url>/<artifact>); empty: NOASSERTION")
	flag.StringVar(&o.namespace, "namespace", "https://github.com/fedfailover/fedfailover/sbom", "base URI of the documents' namespaces")
	flag.StringVar(&o.license, "license", "Apache-2.0", "SPDX license identifier of fedfailover's own packages")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: sbom [flags] ARTIFACT...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if o.created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	for _, p := range flag.Args() {
		if err := run(o, p); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sbom:", err)
	os.Exit(1)
}

// sourceDateEpoch is the documents' creation time: SOURCE_DATE_EPOCH
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

// run writes the SBOM of one artifact.
func run(o options, artifactPath string) error {
	a, err := load(artifactPath)
	if err != nil {
		return err
	}
	doc := newDocument(a, o)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	dir := o.out
	if dir == "" {
		dir = filepath.Dir(artifactPath)
	}
	out := filepath.Join(dir, a.name+".spdx.json")
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sbom: wrote %s (%d Go binaries, %d packages)\n", out, len(a.binaries), len(doc.Packages))
	return nil
}

// kind is what an artifact is.
type kind int

const (
	kindArchive kind = iota // a tar archive of files
	kindImage               // an OCI image layout, or a tar of one
	kindBinary              // a Go binary
)

// artifact is one released file and the Go binaries it holds.
type artifact struct {
	name     string // file (or directory) name
	sha256   string // hex sha256 of the file; "" for a directory
	kind     kind
	digest   string // the image's digest (the one entry of index.json), images only
	refName  string // its org.opencontainers.image.ref.name, images only
	binaries []goBinary
}

// goBinary is a Go binary in an artifact.
type goBinary struct {
	path     string // inside the artifact ("/manager" in an image)
	platform string // os/arch[/variant]
	sha256   string
	info     *debug.BuildInfo
}

// load reads an artifact and the build information of its Go binaries.
func load(p string) (*artifact, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	a := &artifact{name: filepath.Base(p)}
	if fi.IsDir() {
		a.kind = kindImage
		err = a.readLayout(func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(p, filepath.FromSlash(name))) })
	} else {
		var data []byte
		if data, err = os.ReadFile(p); err != nil {
			return nil, err
		}
		a.sha256 = hexSHA256(data)
		switch {
		case strings.HasSuffix(a.name, ".tar.gz"), strings.HasSuffix(a.name, ".tgz"), strings.HasSuffix(a.name, ".tar"):
			var files map[string][]byte
			if files, err = untar(data); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if _, ok := files["oci-layout"]; ok {
				a.kind = kindImage
				err = a.readLayout(func(name string) ([]byte, error) {
					if b, ok := files[name]; ok {
						return b, nil
					}
					return nil, fmt.Errorf("%s: %w", name, os.ErrNotExist)
				})
			} else {
				a.kind = kindArchive
				a.addBinaries(files, "/", "")
			}
		default:
			a.kind = kindBinary
			a.addBinaries(map[string][]byte{a.name: data}, "", "")
			if len(a.binaries) == 0 {
				return nil, fmt.Errorf("%s: not a Go binary with build information", p)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(a.binaries) == 0 {
		return nil, fmt.Errorf("%s: no Go binary with build information in it", p)
	}
	return a, nil
}

// addBinaries adds the Go binaries among files (in name order); files
// without Go build information are not binaries of ours and are skipped.
func (a *artifact) addBinaries(files map[string][]byte, prefix, platform string) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		data := files[n]
		info, err := buildinfo.Read(bytes.NewReader(data))
		if err != nil {
			continue
		}
		p := platform
		if p == "" {
			p = setting(info, "GOOS") + "/" + setting(info, "GOARCH")
		}
		a.binaries = append(a.binaries, goBinary{path: prefix + n, platform: p, sha256: hexSHA256(data), info: info})
	}
}

// setting is a build setting of a binary ("" when absent).
func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// untar reads a tar archive, gzip-compressed or not, into its regular
// files by cleaned name.
func untar(data []byte) (map[string][]byte, error) {
	var r io.Reader = bytes.NewReader(data)
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer func() { _ = zr.Close() }()
		r = zr
	}
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading tar entry %s: %w", h.Name, err)
		}
		files[strings.TrimPrefix(path.Clean("/"+h.Name), "/")] = b
	}
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The parts of the OCI image layout, index and manifest read here.
type (
	ociIndex struct {
		MediaType string          `json:"mediaType"`
		Manifests []ociDescriptor `json:"manifests"`
	}
	ociManifest struct {
		MediaType string          `json:"mediaType"`
		Layers    []ociDescriptor `json:"layers"`
	}
	ociDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Platform    *ociPlatform      `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	ociPlatform struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant,omitempty"`
	}
)

const (
	mediaOCIIndex      = "application/vnd.oci.image.index.v1+json"
	mediaOCIManifest   = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerList    = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaDockerImage   = "application/vnd.docker.distribution.manifest.v2+json"
	annotationRefName  = "org.opencontainers.image.ref.name"
	maxIndexNesting    = 4
	layoutIndexFile    = "index.json"
	layoutMarkerFile   = "oci-layout"
	layoutBlobsSHA256  = "blobs/sha256/"
	digestPrefixSHA256 = "sha256:"
)

// readLayout reads the Go binaries of every image of an OCI image layout,
// blob names the layout's files.
func (a *artifact) readLayout(blob func(name string) ([]byte, error)) error {
	if _, err := blob(layoutMarkerFile); err != nil {
		return fmt.Errorf("not an OCI image layout: %w", err)
	}
	b, err := blob(layoutIndexFile)
	if err != nil {
		return err
	}
	var idx ociIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("%s: %w", layoutIndexFile, err)
	}
	if len(idx.Manifests) == 1 {
		a.digest, a.refName = idx.Manifests[0].Digest, idx.Manifests[0].Annotations[annotationRefName]
	}
	return a.walk(blob, idx.Manifests, 0)
}

// walk reads the images the descriptors name, through nested indexes.
func (a *artifact) walk(blob func(string) ([]byte, error), descs []ociDescriptor, depth int) error {
	if depth > maxIndexNesting {
		return errors.New("image indexes nested too deep")
	}
	for _, d := range descs {
		switch d.MediaType {
		case mediaOCIIndex, mediaDockerList:
			b, err := readBlob(blob, d)
			if err != nil {
				return err
			}
			var idx ociIndex
			if err := json.Unmarshal(b, &idx); err != nil {
				return fmt.Errorf("index %s: %w", d.Digest, err)
			}
			if err := a.walk(blob, idx.Manifests, depth+1); err != nil {
				return err
			}
		case mediaOCIManifest, mediaDockerImage:
			if err := a.readImage(blob, d); err != nil {
				return err
			}
		}
		// Anything else (attestations, signatures) holds no binary.
	}
	return nil
}

// readImage reads the Go binaries in the layers of one image.
func (a *artifact) readImage(blob func(string) ([]byte, error), d ociDescriptor) error {
	b, err := readBlob(blob, d)
	if err != nil {
		return err
	}
	var m ociManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	platform := ""
	if p := d.Platform; p != nil {
		platform = p.OS + "/" + p.Architecture
		if p.Variant != "" {
			platform += "/" + p.Variant
		}
	}
	for _, l := range m.Layers {
		data, err := readBlob(blob, l)
		if err != nil {
			return err
		}
		files, err := untar(data)
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		a.addBinaries(files, "/", platform)
	}
	return nil
}

// readBlob reads the blob a descriptor names and checks its digest and size.
func readBlob(blob func(string) ([]byte, error), d ociDescriptor) ([]byte, error) {
	want, ok := strings.CutPrefix(d.Digest, digestPrefixSHA256)
	if !ok || len(want) != sha256.Size*2 {
		return nil, fmt.Errorf("digest %q: only sha256 digests are read", d.Digest)
	}
	b, err := blob(layoutBlobsSHA256 + want)
	if err != nil {
		return nil, err
	}
	if got := hexSHA256(b); got != want {
		return nil, fmt.Errorf("blob %s has digest sha256:%s: the layout is corrupt", d.Digest, got)
	}
	if d.Size > 0 && int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s has %d bytes, its descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b, nil
}
