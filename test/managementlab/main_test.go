//go:build e2e

// Package managementlab runs node recovery on a lab whose Cluster API
// objects live in a third control plane, the management cluster, not in
// the kubefed host (lab.Options.ManagementCluster). Run with:
//
//	go test -tags e2e -timeout 20m -v ./test/managementlab/...
package managementlab

import (
	"os"
	"testing"

	"github.com/fedfailover/fedfailover/test/lab"
)

var theLab *lab.Lab

func TestMain(m *testing.M) {
	os.Exit(lab.RunTestMain(m, lab.MainOptions{
		Name: "managementlab", Lab: lab.Options{Members: 1, Nodes: 3, ManagementCluster: true},
		Setup: func(l *lab.Lab, _ string) error { theLab = l; return nil },
	}))
}
