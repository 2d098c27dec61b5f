// Package version is what every fedfailover binary says about its build:
// the release version and the source revision, stamped at link time, and
// the Go version it was built with.
//
// The Makefile (`make build`, `make image`) and hack/release.sh set them:
//
//	go build -ldflags "-X github.com/fedfailover/fedfailover/internal/version.version=v0.2.0 \
//	  -X github.com/fedfailover/fedfailover/internal/version.revision=$(git rev-parse HEAD)"
//
// A plain `go build` leaves version "dev" and takes the revision from the
// VCS stamp Go records (vcs.revision, with "-dirty" for a modified tree),
// else "unknown".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X; see the package comment.
var (
	version  = "dev"
	revision = ""
)

// Unset values.
const (
	DevVersion      = "dev"
	UnknownRevision = "unknown"
)

// Info describes a build.
type Info struct {
	// Version is the release version, e.g. v0.2.0, or "dev".
	Version string
	// Revision is the source revision (a git commit), or "unknown".
	Revision string
	// GoVersion is the Go toolchain the binary was built with.
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	return Info{Version: orDefault(version, DevVersion), Revision: resolveRevision(revision, debug.ReadBuildInfo), GoVersion: runtime.Version()}
}

// String is the version line without the program name, e.g.
// "v0.2.0 (revision 1a2b3c, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Line is what a program prints for --version: its name and String.
func Line(program string) string {
	return program + " " + Get().String()
}

// resolveRevision is the stamped revision, else the VCS revision Go
// recorded in the build (not recorded with -buildvcs=false, nor by
// `go run` or `go test`), else "unknown".
func resolveRevision(stamped string, readBuildInfo func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	bi, ok := readBuildInfo()
	if !ok {
		return UnknownRevision
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return UnknownRevision
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
