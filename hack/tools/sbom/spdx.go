package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// The SPDX 2.3 JSON document, as much of it as the SBOMs use
// (https://spdx.github.io/spdx-spec/v2.3/).
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
		Comment  string   `json:"comment,omitempty"`
	}
	spdxPackage struct {
		SPDXID                string            `json:"SPDXID"`
		Name                  string            `json:"name"`
		VersionInfo           string            `json:"versionInfo,omitempty"`
		Supplier              string            `json:"supplier,omitempty"`
		DownloadLocation      string            `json:"downloadLocation"`
		FilesAnalyzed         bool              `json:"filesAnalyzed"`
		Checksums             []spdxChecksum    `json:"checksums,omitempty"`
		SourceInfo            string            `json:"sourceInfo,omitempty"`
		LicenseDeclared       string            `json:"licenseDeclared,omitempty"`
		PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
		ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
		Comment               string            `json:"comment,omitempty"`
	}
	spdxChecksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	}
)

const (
	spdxVersion     = "SPDX-2.3"
	noAssertion     = "NOASSERTION"
	documentID      = "SPDXRef-DOCUMENT"
	supplier        = "Organization: The fedfailover Authors"
	creatorTool     = "Tool: fedfailover-sbom"
	stdlibName      = "stdlib"
	develVersion    = "(devel)"
	refTypeGoSum    = "go-sum" // category OTHER: the module's go.sum hash
	creationComment = "Generated from the Go build information recorded in each binary (debug/buildinfo). " +
		"A module's go-sum reference is its go.sum hash (h1:, a SHA-256 over the module's file tree, " +
		"golang.org/x/mod/sumdb/dirhash), the value `go mod verify` and the checksum database check; " +
		"it is not a checksum of a downloadable file."
)

// newDocument is the SBOM of an artifact: the document DESCRIBES the
// artifact, which CONTAINS its Go binaries; each binary is GENERATED_FROM
// its main module and DEPENDS_ON the standard library and every module
// linked into it. Modules shared by several binaries (the image's
// platforms) are listed once.
func newDocument(a *artifact, o options) *spdxDocument {
	id := a.sha256
	if id == "" {
		id = strings.TrimPrefix(a.digest, digestPrefixSHA256)
	}
	doc := &spdxDocument{
		SPDXVersion:       spdxVersion,
		DataLicense:       "CC0-1.0",
		SPDXID:            documentID,
		Name:              a.name,
		DocumentNamespace: o.namespace + "/" + purlEscape(a.name) + "-" + id,
		CreationInfo: spdxCreationInfo{
			Created:  o.created.UTC().Format("2006-01-02T15:04:05Z"),
			Creators: []string{creatorTool, supplier},
			Comment:  creationComment,
		},
	}
	b := &builder{doc: doc, ids: map[string]int{}, modules: map[string]string{}}

	download := noAssertion
	if o.download != "" {
		download = strings.TrimSuffix(o.download, "/") + "/" + a.name
	}
	art := spdxPackage{
		SPDXID: b.id("SPDXRef-Artifact-" + a.name), Name: a.name, VersionInfo: o.version, Supplier: supplier,
		DownloadLocation: download, LicenseDeclared: o.license,
	}
	if a.sha256 != "" {
		art.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: a.sha256}}
	}
	switch a.kind {
	case kindArchive:
		art.PrimaryPackagePurpose = "ARCHIVE"
	case kindImage:
		art.PrimaryPackagePurpose = "CONTAINER"
		if a.digest != "" {
			art.ExternalRefs = []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:oci/fedfailover@" + purlEscape(a.digest)}}
			art.Comment = "OCI image index " + a.digest
			if a.refName != "" {
				art.Comment += ", ref name " + a.refName
			}
		}
	case kindBinary:
		art.PrimaryPackagePurpose = "APPLICATION"
	}
	b.add(art)
	b.relate(documentID, "DESCRIBES", art.SPDXID)

	for _, bin := range a.binaries {
		binID := art.SPDXID
		if a.kind != kindBinary {
			name := path2name(bin.path)
			p := spdxPackage{
				SPDXID: b.id("SPDXRef-Binary-" + name + "-" + bin.platform), Name: name, VersionInfo: o.version,
				Supplier: supplier, DownloadLocation: noAssertion, LicenseDeclared: o.license,
				Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: bin.sha256}},
				PrimaryPackagePurpose: "APPLICATION",
				Comment:               fmt.Sprintf("%s in %s, for %s", bin.path, a.name, bin.platform),
			}
			b.add(p)
			b.relate(art.SPDXID, "CONTAINS", p.SPDXID)
			binID = p.SPDXID
		}
		b.binary(binID, bin, o)
	}
	return doc
}

// builder assembles a document: unique SPDX ids, modules listed once.
type builder struct {
	doc     *spdxDocument
	ids     map[string]int    // ids handed out, by sanitized base
	modules map[string]string // SPDX id by module path@version
}

func (b *builder) add(p spdxPackage) { b.doc.Packages = append(b.doc.Packages, p) }

func (b *builder) relate(from, typ, to string) {
	b.doc.Relationships = append(b.doc.Relationships, spdxRelationship{SPDXElementID: from, RelationshipType: typ, RelatedSPDXElement: to})
}

// id is a unique SPDX id from base: only letters, digits, '.' and '-'
// (the SPDX idstring), a counter appended on repeats.
func (b *builder) id(base string) string {
	s := []byte(base)
	for i, c := range s {
		if !alnum(c) && c != '.' && c != '-' {
			s[i] = '-'
		}
	}
	id := string(s)
	b.ids[id]++
	if n := b.ids[id]; n > 1 {
		id = fmt.Sprintf("%s-%d", id, n)
	}
	return id
}

// binary lists what a binary was built from: its main module, the
// standard library of its Go toolchain and every dependency module.
func (b *builder) binary(binID string, bin goBinary, o options) {
	info := bin.info
	main := info.Main
	version := main.Version
	if version == "" || version == develVersion {
		version = o.version // no version control information in the build
	}
	mainID := b.module(debug.Module{Path: main.Path, Version: version, Sum: main.Sum}, "", func(p *spdxPackage) {
		p.Supplier, p.LicenseDeclared, p.PrimaryPackagePurpose = supplier, o.license, "SOURCE"
		p.SourceInfo = vcsInfo(info)
		p.Comment = "main module; main package " + info.Path
	})
	b.relate(binID, "GENERATED_FROM", mainID)

	goVersion, _, _ := strings.Cut(info.GoVersion, " ")
	stdID := b.module(debug.Module{Path: stdlibName, Version: goVersion}, "", func(p *spdxPackage) {
		p.ExternalRefs = []spdxExternalRef{purlRef(stdlibName, strings.TrimPrefix(goVersion, "go"))}
		p.Comment = "the Go standard library and runtime of the toolchain that built the binary"
	})
	b.relate(binID, "DEPENDS_ON", stdID)

	for _, d := range info.Deps {
		built, note := *d, ""
		if d.Replace != nil {
			built = *d.Replace
			note = fmt.Sprintf("replaces %s %s", d.Path, d.Version)
		}
		b.relate(binID, "DEPENDS_ON", b.module(built, note, nil))
	}
}

// module is the SPDX id of a module's package, added on first use.
func (b *builder) module(m debug.Module, note string, edit func(*spdxPackage)) string {
	key := m.Path + "@" + m.Version
	if id, ok := b.modules[key]; ok {
		return id
	}
	p := spdxPackage{
		SPDXID: b.id("SPDXRef-Module-" + m.Path + "-" + m.Version), Name: m.Path, VersionInfo: m.Version,
		DownloadLocation: noAssertion, PrimaryPackagePurpose: "LIBRARY", Comment: note,
	}
	if m.Version != "" && !strings.HasPrefix(m.Path, ".") && !strings.HasPrefix(m.Path, "/") {
		p.ExternalRefs = append(p.ExternalRefs, purlRef(m.Path, m.Version))
	}
	if m.Sum != "" {
		p.ExternalRefs = append(p.ExternalRefs, spdxExternalRef{ReferenceCategory: "OTHER", ReferenceType: refTypeGoSum, ReferenceLocator: m.Sum})
	}
	if edit != nil {
		edit(&p)
	}
	b.add(p)
	b.modules[key] = p.SPDXID
	return p.SPDXID
}

// vcsInfo is the source revision the build recorded ("" when none).
func vcsInfo(info *debug.BuildInfo) string {
	rev := setting(info, "vcs.revision")
	if rev == "" {
		return ""
	}
	s := "built from " + setting(info, "vcs") + " revision " + rev
	if t := setting(info, "vcs.time"); t != "" {
		s += " (" + t + ")"
	}
	if setting(info, "vcs.modified") == "true" {
		s += " with uncommitted changes"
	}
	return s
}

// purlRef is the package URL of a Go module
// (https://github.com/package-url/purl-spec, type golang):
// pkg:golang/<module path>@<version>. The path keeps its case: Go module
// paths are case-sensitive, and a lowercased one names another module.
func purlRef(modulePath, version string) spdxExternalRef {
	segs := strings.Split(modulePath, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	loc := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" {
		loc += "@" + purlEscape(version)
	}
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: loc}
}

// purlEscape percent-encodes everything but letters, digits and ".-_~"
// (so "+incompatible" becomes "%2Bincompatible", "sha256:" "sha256%3A").
func purlEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if alnum(c) || strings.IndexByte(".-_~", c) >= 0 {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// alnum: an ASCII letter or digit.
func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// path2name is a binary's file name.
func path2name(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
