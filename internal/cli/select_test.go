package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var invalidSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}

// The CLI names the policy node recovery itself uses: the oldest, not the
// first by name.
func TestExplainNamesTheGoverningPolicy(t *testing.T) {
	s := fixture()
	young := defaultPolicy()
	young.Name, young.CreationTimestamp, young.Status = "a-young", *ago(time.Minute), v1alpha1.FailoverPolicyStatus{}
	s.Policies = append([]v1alpha1.FailoverPolicy{young}, s.Policies...)
	e, err := BuildExplanation(s, "member1", "m1-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Policy != "default" {
		t.Fatalf("policy %q, want the older default", e.Policy)
	}
}

func TestInvalidSelectorAnswers(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.FailoverPolicy)
		field  string
	}{
		{"clusterSelector", func(p *v1alpha1.FailoverPolicy) { p.Spec.ClusterSelector = invalidSelector }, "spec.clusterSelector"},
		{"RSP selector", func(p *v1alpha1.FailoverPolicy) {
			p.Spec.Rebalance.ReplicaSchedulingPreferences.Selector = invalidSelector
		},
			"spec.rebalance.replicaSchedulingPreferences.selector"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fixture()
			c.mutate(&s.Policies[0]) // default, which manages demo/web

			// demo/web is held, not released nor planned.
			v := BuildStatus(s)
			web := v.RSPs[0]
			if web.Name != "web" || web.Policy != "default" || web.Reason != v1alpha1.ReasonInvalidSelector ||
				!strings.HasPrefix(web.Held, c.field+": ") || !web.Shifted {
				t.Errorf("demo/web row %+v", web)
			}
			plan, err := BuildPlan(s, Scenario{Cluster: "member1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Held) != 1 || plan.Held[0].RSP != "demo/web" || plan.Held[0].Policy != "default" {
				t.Errorf("held %+v", plan.Held)
			}
			for _, r := range plan.RSPs {
				if r.Name == "web" {
					t.Errorf("held RSP planned: %+v", r)
				}
			}
		})
	}

	s := fixture()
	s.Policies[0].Spec.ClusterSelector = invalidSelector
	if got := policyRow(s, &s.Policies[0]).Members; got != 0 {
		t.Errorf("invalid clusterSelector selects %d members", got)
	}
	s.Policies[0].Status.Recoveries = nil
	e, err := BuildExplanation(s, "member3", "m3-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Verdict != "Not covered" || len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "default") || !strings.Contains(e.Notes[0], "spec.clusterSelector: ") {
		t.Errorf("explanation %+v", e)
	}
}

// A member's lost, fenced and storm columns come from the recoveries node
// recovery writes.
func TestMemberRowsCountRecoveries(t *testing.T) {
	s := fixture()
	s.Policies[0].Status.Recoveries = append(s.Policies[0].Status.Recoveries,
		v1alpha1.NodeRecoveryStatus{Cluster: "member3", Node: "m3-node-2", Phase: v1alpha1.RecoveryPhaseSuspended})
	rows := BuildStatus(s).Members
	want := map[string][3]any{"member1": {int32(1), int32(1), false}, "member2": {int32(0), int32(0), false}, "member3": {int32(2), int32(0), true}}
	for _, r := range rows {
		if got := [3]any{r.LostNodes, r.FencedNodes, r.StormActive}; got != want[r.Name] {
			t.Errorf("%s: lost, fenced, storm = %v, want %v", r.Name, got, want[r.Name])
		}
	}
}
