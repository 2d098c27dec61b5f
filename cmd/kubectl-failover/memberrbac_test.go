package main

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

// TestMemberRBAC: `kubectl failover member-rbac` prints the manifest of
// internal/memberrbac for the given names without a kubeconfig, and
// refuses names the API server would refuse.
func TestMemberRBAC(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append(append([]string{"member-rbac"}, args...), "--kubeconfig=/nonexistent"))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run()
	if err != nil {
		t.Fatal(err)
	}
	want, err := memberrbac.Manifest(memberrbac.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("default output differs from the manifest of config/member:\n%s", out)
	}
	out, err = run("-n", "ops", "--name", "ff", "--member", "member1", "--kubefed-namespace", "fed")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"name: ff\n  namespace: ops\n", "name: ff-token\n", "  namespace: default\n",
		"kubectl --context HOST -n fed annotate kubefedcluster member1 failover.fedfailover.io/credentials-secret=member1-fedfailover",
		"kubectl failover member-rbac -n ops --name ff --member member1 --kubefed-namespace fed | kubectl --context member1 apply -f -"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if _, err := run("-n", "Not_A_Namespace"); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("an invalid namespace: %v", err)
	}
}
