package main

import (
	"bytes"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fedfailover/fedfailover/internal/version"
)

// TestVersion: `kubectl failover version` and `kubectl failover --version`
// print the build's version line and need no kubeconfig. (release_test
// checks the version hack/release.sh stamps into the released plugin.)
func TestVersion(t *testing.T) {
	want := "kubectl-failover " + version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		cmd := NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append(args, "--kubeconfig=/nonexistent"))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut.String())
		}
		if out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}
}
