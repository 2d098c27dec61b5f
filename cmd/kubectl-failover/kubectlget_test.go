package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fedfailover/fedfailover/test/paths"
)

// testKubectlGet lists the seeded NodeRecovery records and RecoveryGuard
// with the real kubectl: the printer columns of the API types show a
// finished recovery with its evidence and timings, and the storm state
// (the output docs/cli.md shows).
func testKubectlGet(t *testing.T, h *host) {
	kubectl, err := paths.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	get := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig=" + h.admin, "get"}, args...)...).Output()
		if err != nil {
			t.Fatalf("kubectl get %s: %v", strings.Join(args, " "), err)
		}
		t.Logf("kubectl get %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	out := get("noderecoveries")
	wantLines(t, out, "NAME                         CLUSTER   NODE        PHASE       METHOD              EVIDENCE                       ACTED   RECOVERED   AGE")
	wantFields(t, out, "member1.m1-node-2.returned", "member1", "m1-node-2", "Finished", "ForceDelete", "MachineInfrastructureDeleted", "3h")
	wantFields(t, out, "member1.m1-node-2.active", "member1", "m1-node-2", "Recovered", "OutOfServiceTaint", "MachineInfrastructureDeleted", "19m", "18m")
	wide := get("nrec", "-o", "wide")
	wantLines(t, wide, "DRYRUN", "MESSAGE")
	wantFields(t, wide, "member1.m1-node-3.dry-run", "Finished", "true", "the node's kubelet reported again")
	wantFields(t, get("recoveryguards", "-o", "wide"), "member2", "true", "member2: 3 of 3 nodes lost")
	// Both kinds are in the fedfailover category.
	wantLines(t, get("fedfailover"), "noderecovery.failover.fedfailover.io/member1.m1-node-2.active", "recoveryguard.failover.fedfailover.io/member2")
}

// wantFields checks that one line of out has these fields in this order.
func wantFields(t *testing.T, out string, fields ...string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, f := range fields {
			i := strings.Index(rest, f)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(f):]
		}
		if ok {
			return
		}
	}
	t.Errorf("no line with %q in order:\n%s", fields, out)
}
