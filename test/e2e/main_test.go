//go:build e2e

// Package e2e holds the baselines: what Kubernetes and kubefed do on their
// own, in the lab, with no fedfailover operator running. They are the
// "before" of every benchmark. Run with:
//
//	go test -tags e2e -timeout 30m -v ./test/e2e/...
package e2e

import (
	"os"
	"testing"

	"github.com/fedfailover/fedfailover/test/lab"
)

// theLab is shared by all baselines: starting it costs most of a minute.
var theLab *lab.Lab

func TestMain(m *testing.M) {
	os.Exit(lab.RunTestMain(m, lab.MainOptions{
		// The audit log lets a test read who wrote what to a member
		// (TestNodeRecoveryCoexistsWithAnotherRemediator).
		Name: "e2e", Lab: lab.Options{Members: 2, Nodes: 3, AuditLog: true},
		Setup: func(l *lab.Lab, _ string) error { theLab = l; return nil },
	}))
}
