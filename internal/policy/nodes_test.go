package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

func TestNodes(t *testing.T) {
	cp := labels.Set{ControlPlaneLabel: ""}
	worker := labels.Set{"node-role.kubernetes.io/worker": ""}
	for _, tc := range []struct {
		name          string
		sel           *metav1.LabelSelector
		wantCP, wantW bool
		wantErr       bool
	}{
		{name: "absent: every node but the control plane", wantW: true},
		{name: "empty: every node", sel: &metav1.LabelSelector{}, wantCP: true, wantW: true},
		{name: "workers only", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/worker": ""}}, wantW: true},
		{name: "invalid", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nr := &v1alpha1.NodeRecoverySpec{NodeSelector: tc.sel}
			s, err := Nodes(nr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				p := v1alpha1.FailoverPolicy{Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: nr}}
				if bad := Invalid(&p); len(bad) != 1 || bad[0].Field != FieldNodeSelector {
					t.Fatalf("Invalid = %v, want %s", bad, FieldNodeSelector)
				}
				return
			}
			if got := s.Matches(cp); got != tc.wantCP {
				t.Errorf("control-plane node selected = %v, want %v", got, tc.wantCP)
			}
			if got := s.Matches(worker); got != tc.wantW {
				t.Errorf("worker node selected = %v, want %v", got, tc.wantW)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	old := pol("old", time.Hour)                                    // every member
	young := pol("young", time.Minute)                              // every member, loses to old
	edge := pol("edge", time.Second, clusters(sel("tier", "edge"))) // only edge members
	off := pol("off", 2*time.Hour, noRecovery)                      // oldest, but node recovery off
	all := []v1alpha1.FailoverPolicy{old, young, edge, off}
	members := []Member{{Name: "m1", Labels: map[string]string{"tier": "core"}}, {Name: "m2", Labels: map[string]string{"tier": "edge"}}}
	cases := map[string][]string{
		"old":   nil,
		"young": {"m1: governed by old", "m2: governed by old"},
		"edge":  {"m2: governed by old"},
		"off":   nil,
	}
	for _, p := range all {
		got := Overlaps(&p, all, members)
		if strings.Join(got, ";") != strings.Join(cases[p.Name], ";") {
			t.Errorf("%s: overlaps %v, want %v", p.Name, got, cases[p.Name])
		}
	}
}
