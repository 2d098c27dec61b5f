package version

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	i := Get()
	if i.Version != DevVersion {
		t.Errorf("version %q without -ldflags, want %q", i.Version, DevVersion)
	}
	if i.GoVersion != runtime.Version() {
		t.Errorf("go version %q, want %q", i.GoVersion, runtime.Version())
	}
	if i.Revision == "" {
		t.Error("empty revision, want a VCS revision or unknown")
	}
	if want := "prog " + i.Version + " (revision " + i.Revision + ", " + runtime.Version() + ")"; Line("prog") != want {
		t.Errorf("Line: %q, want %q", Line("prog"), want)
	}
}

func TestRevisionFallsBackToTheVCSStamp(t *testing.T) {
	info := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: settings}, true }
	}
	for _, tc := range []struct {
		name, stamped string
		read          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"stamped wins", "abc", info(debug.BuildSetting{Key: "vcs.revision", Value: "def"}), "abc"},
		{"vcs revision", "", info(debug.BuildSetting{Key: "vcs.revision", Value: "def"}), "def"},
		{"modified tree", "", info(debug.BuildSetting{Key: "vcs.revision", Value: "def"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "def-dirty"},
		{"no vcs stamp", "", info(), UnknownRevision},
		{"no build info", "", func() (*debug.BuildInfo, bool) { return nil, false }, UnknownRevision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveRevision(tc.stamped, tc.read); got != tc.want {
				t.Errorf("revision %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLdflagsStampTheVersion links a program printing Line with the -X
// flags the Makefile and hack/release.sh pass.
func TestLdflagsStampTheVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	const p = "github.com/fedfailover/fedfailover/internal/version"
	build := exec.Command("go", "build", "-ldflags", "-X "+p+".version=v9.8.7 -X "+p+".revision=0123abc", "-o", bin, "./testdata/stamp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "prog v9.8.7 (revision 0123abc, "; !strings.HasPrefix(string(out), want) {
		t.Errorf("stamped program printed %q, want it to start with %q", out, want)
	}
}
