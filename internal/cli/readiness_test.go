package cli

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// planRow is the scenario's row of RSP ns/name.
func planRow(t *testing.T, v PlanView, ns, name string) PlanRow {
	t.Helper()
	i := slices.IndexFunc(v.RSPs, func(r PlanRow) bool { return r.Namespace == ns && r.Name == name })
	if i < 0 {
		t.Fatalf("no %s/%s in %+v", ns, name, v.RSPs)
	}
	return v.RSPs[i]
}

// `plan --fail MEMBER` reports, per RSP, the shortfall the manager
// published for that member: the CLI recomputes it from the published room
// with the manager's own function, and the two agree.
func TestPlanFailShowsThePublishedShortfall(t *testing.T) {
	s := fixture()
	published := s.Policies[0].Status.FailoverReadiness[0]
	for _, m := range published.Members {
		v, err := BuildPlan(s, Scenario{Cluster: m.Name})
		if err != nil {
			t.Fatal(err)
		}
		r := planRow(t, v, "demo", "web")
		if r.Shortfall == nil || *r.Shortfall != int64(*m.Shortfall) {
			t.Errorf("plan --fail %s: shortfall %v (%s), the manager published %d", m.Name, r.Shortfall, r.ShortfallNote, *m.Shortfall)
		}
		if e := planRow(t, v, "edge", "cache"); e.Shortfall != nil || e.ShortfallNote != noteNotPublished {
			t.Errorf("plan --fail %s: edge/cache, never assessed, shortfall %v (%q)", m.Name, e.Shortfall, e.ShortfallNote)
		}
	}
	if v, err := BuildPlan(s, Scenario{Cluster: "member3", Full: true}); err != nil || planRow(t, v, "demo", "web").Shortfall != nil {
		t.Errorf("plan --full: %v, %+v: want no failure figure", err, v.RSPs)
	}

	// The published room, not the published shortfall, is what counts:
	// member3 with room for every replica absorbs member1's failure.
	s.Policies[0].Status.FailoverReadiness[0].Members[2].Room = 6
	if r := planRow(t, mustPlan(t, s, "member1"), "demo", "web"); r.Shortfall == nil || *r.Shortfall != 0 {
		t.Errorf("member3 with room for 6: shortfall %v, want 0", r.Shortfall)
	}

	// A member whose room is unknown makes every other member's figure
	// unknown, not its own.
	s = fixture()
	s.Policies[0].Status.FailoverReadiness[0].Members[2].Unobserved = true
	if r := planRow(t, mustPlan(t, s, "member1"), "demo", "web"); r.Shortfall != nil || r.ShortfallNote != noteUnobserved {
		t.Errorf("member3 unobserved, member1 fails: shortfall %v (%q), want not known", r.Shortfall, r.ShortfallNote)
	}
	if r := planRow(t, mustPlan(t, s, "member3"), "demo", "web"); r.Shortfall == nil || *r.Shortfall != 2 {
		t.Errorf("member3 unobserved fails: shortfall %v (%q), want 2", r.Shortfall, r.ShortfallNote)
	}
}

func mustPlan(t *testing.T, s *Snapshot, member string) PlanView {
	t.Helper()
	v, err := BuildPlan(s, Scenario{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The N+1 column of `kubectl failover status`.
func TestFailoverReadinessColumn(t *testing.T) {
	readyCond := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionFailoverReady, Status: s}}
	}
	web := func(members ...v1alpha1.MemberReadiness) []v1alpha1.RSPReadiness {
		return []v1alpha1.RSPReadiness{{Namespace: "demo", Name: "web", TotalReplicas: 6, Members: members}}
	}
	member := func(name string, replicas, room int32) v1alpha1.MemberReadiness {
		return v1alpha1.MemberReadiness{Name: name, Replicas: replicas, Room: room}
	}
	cases := []struct {
		name  string
		conds []metav1.Condition
		list  []v1alpha1.RSPReadiness
		off   bool
		want  string
	}{
		{name: "rebalancing off", off: true, list: web(member("a", 3, 3), member("b", 3, 3)), want: "-"},
		{name: "nothing published", want: "-"},
		{name: "room to spare", conds: readyCond(metav1.ConditionTrue), list: web(member("a", 3, 6), member("b", 3, 6)), want: "ok"},
		{name: "the worst member", conds: readyCond(metav1.ConditionFalse),
			list: append(web(member("a", 3, 6), member("b", 3, 5)),
				v1alpha1.RSPReadiness{Namespace: "shop", Name: "api", TotalReplicas: 4, Members: []v1alpha1.MemberReadiness{member("a", 2, 1), member("b", 2, 2)}}),
			want: "b: 3 short"}, // shop/api: b fails, a has room for 1 of 4
		{name: "a member's room unknown", conds: readyCond(metav1.ConditionUnknown),
			list: web(member("a", 3, 6), v1alpha1.MemberReadiness{Name: "b", Replicas: 3, Room: 3, Unobserved: true}), want: "unknown"},
		{name: "a known shortfall beats an unknown figure",
			list: web(member("a", 3, 2), v1alpha1.MemberReadiness{Name: "b", Replicas: 3, Room: 3, Unobserved: true}), want: "b: 4 short"},
		{name: "an RSP held (the condition says Unknown)", conds: readyCond(metav1.ConditionUnknown), want: "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := dryPolicy()
			p.Status.Conditions, p.Status.FailoverReadiness = c.conds, c.list
			if c.off {
				p.Spec.Rebalance.Enabled = ptr.To(false)
			}
			if got := failoverReadiness(&p); got != c.want {
				t.Errorf("N+1 %q, want %q", got, c.want)
			}
		})
	}
}
