package rebalance

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// No false failover: fedfailover alone cannot reach member2 (its own
// network path, credentials, network policy) while kubefed's own health
// check keeps reporting it Ready. Before, clusterFailedAfter later its
// replicas were moved (make before break: member1 raised, totalReplicas
// raised). Now nothing is shifted: the RSP keeps the user's spec, and the
// RebalanceSuspended condition (reason MemberFailureUnconfirmed), its gauge
// and one event say why. Once kubefed too reports member2 offline, the
// member-failure path moves its replicas at once: the wait counted from
// fedfailover's own first sighting has long passed.
func TestMemberFailedToFedfailoverAloneMovesNothing(t *testing.T) {
	const unconfirmed = "MemberFailureUnconfirmed" // the condition reason users see
	pol := rebalancing("unconfirmed", nil)         // clusterFailedAfter 10s
	r, c, rec, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns)
	key := client.ObjectKeyFromObject(rsp)
	user := specPlacement(rsp)
	fm := noMembers(t)
	fm.add(t, "member1", webOn(ns, "member1", 3)...)
	fm.add(t, "member2", webOn(ns, "member2", 3)...)
	fm.clock = func() time.Time { return r.now() } // kubefed keeps probing
	r.members, r.opts = fm, Options{}.withDefaults()
	untouched := func(when string) {
		t.Helper()
		got := specOf(t, c, key)
		if p := specPlacement(got); !p.Equal(user) {
			t.Fatalf("%s: spec %+v (totalReplicas %d), want the user's %+v untouched", when, p.Clusters, got.Spec.TotalReplicas, user.Clusters)
		}
	}
	gauge := func() float64 {
		return testutil.ToFloat64(metrics.RebalanceSuspended.WithLabelValues(pol.Name, unconfirmed))
	}

	passAt(t, r, key, t0) // 3/3, Running and Ready
	untouched("both members healthy")
	fm.down["member2"] = true // fedfailover's own view only
	for _, at := range []time.Duration{time.Second, 6 * time.Second, 12 * time.Second, 30 * time.Second, 5 * time.Minute} {
		passAt(t, r, key, t0.Add(at))
		untouched("member2 unreachable to fedfailover for " + at.String() + ", kubefed Ready")
	}
	cond := suspendedOf(t, r, pol)
	if cond.Status != metav1.ConditionTrue || cond.Reason != unconfirmed || !strings.Contains(cond.Message, "member2 (3 replicas)") ||
		!strings.Contains(cond.Message, "kubefed reports it Ready") || !strings.Contains(cond.Message, "until kubefed agrees") {
		t.Errorf("condition %+v, want True %s naming member2 and kubefed's Ready", cond, unconfirmed)
	}
	if gauge() != 1 {
		t.Errorf("fedfailover_rebalance_suspended{reason=%q} = %v, want 1", unconfirmed, gauge())
	}
	evs := drain(rec.Events)
	if n := countPrefix(evs, "Warning "+unconfirmed+" "); n != 2 { // on the RSP and the policy, once
		t.Errorf("%d %s events, want 2 (one on the RSP, one on the policy): %v", n, unconfirmed, evs)
	}
	for _, ev := range evs {
		if strings.Contains(ev, planner.ReasonMemberUnreachable) || strings.Contains(ev, ActionShift) {
			t.Errorf("event %q: nothing may be shifted", ev)
		}
	}

	// kubefed's health check now reports member2 offline: the second view.
	fm.kubefedDown["member2"] = true
	passAt(t, r, key, t0.Add(5*time.Minute+10*time.Second))
	got := specOf(t, c, key)
	if p := specPlacement(got); p.Equal(user) || got.Spec.TotalReplicas != 6 ||
		p.Clusters["member2"].MaxReplicas == nil || *p.Clusters["member2"].MaxReplicas != 0 {
		t.Fatalf("kubefed agrees: spec %+v (totalReplicas %d), want member2 pinned to 0 and 6 replicas", p.Clusters, got.Spec.TotalReplicas)
	}
	if evs := drain(rec.Events); countPrefix(evs, "Warning "+planner.ReasonMemberFailed+" ") != 2 {
		t.Errorf("want the shift reported as %s: %v", planner.ReasonMemberFailed, evs)
	}
	if cond := suspendedOf(t, r, pol); cond.Reason == unconfirmed {
		t.Errorf("condition %+v still says the failure is unconfirmed", cond)
	}
	if gauge() != 0 {
		t.Errorf("fedfailover_rebalance_suspended{reason=%q} = %v after kubefed agreed, want 0", unconfirmed, gauge())
	}
}
