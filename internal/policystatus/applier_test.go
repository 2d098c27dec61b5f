package policystatus

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestApplierSendsOnlyNews: on a real API server, an Applier sends a
// status it already applied to the policy as it is now no more (a resync
// without news is no request), and sends it again once anything else wrote
// to the policy, a stale read of the policy included; a changed status is
// always sent.
func TestApplierSendsOnlyNews(t *testing.T) {
	cfg := testenv.Start(t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "10s",
			Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}}}
	if err := c.Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	read := func() *v1alpha1.FailoverPolicy {
		t.Helper()
		got := &v1alpha1.FailoverPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pol), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	members := func(n int32) *v1alpha1.FailoverPolicyStatus {
		return &v1alpha1.FailoverPolicyStatus{ConnectedMembers: n}
	}
	var a Applier
	step := func(what string, p *v1alpha1.FailoverPolicy, st *v1alpha1.FailoverPolicyStatus, wantSent bool) {
		t.Helper()
		sent, err := a.Apply(ctx, c, p, "test-owner", st)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if sent != wantSent {
			t.Errorf("%s: sent %t, want %t", what, sent, wantSent)
		}
	}
	stale := read()
	step("first apply", stale, members(1), true)
	if got := read().Status.ConnectedMembers; got != 1 {
		t.Fatalf("connectedMembers %d after the apply, want 1", got)
	}
	step("the same status, policy unchanged since", read(), members(1), false)
	step("the same status on a read from before the apply", stale, members(1), true)
	step("again, policy unchanged", read(), members(1), false)
	step("a changed status", read(), members(2), true)

	// Another writer's fields: the policy changed but still holds ours as
	// applied, so nothing is sent (no echo of each writer's apply).
	if err := Apply(ctx, c, pol.Name, "other-owner", &v1alpha1.FailoverPolicyStatus{ObservedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	step("after another writer's fields", read(), members(2), false)
	if got := read().Status; got.ConnectedMembers != 2 || got.ObservedGeneration != 1 {
		t.Errorf("status %+v: want both writers' fields", got)
	}

	// Conditions are shared by type: another writer's condition is no news,
	// one of ours changed by someone else is.
	ours := func(reason string) *v1alpha1.FailoverPolicyStatus {
		return &v1alpha1.FailoverPolicyStatus{ConnectedMembers: 2, Conditions: []metav1.Condition{{Type: "Ours", Status: metav1.ConditionTrue,
			Reason: reason, Message: "m", LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))}}}
	}
	step("our condition", read(), ours("Mine"), true)
	if err := Apply(ctx, c, pol.Name, "other-owner", &v1alpha1.FailoverPolicyStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{
		Type: "Theirs", Status: metav1.ConditionFalse, Reason: "Other", LastTransitionTime: metav1.Now()}}}); err != nil {
		t.Fatal(err)
	}
	step("after another writer's condition", read(), ours("Mine"), false)
	if err := Apply(ctx, c, pol.Name, "other-owner", &v1alpha1.FailoverPolicyStatus{ConnectedMembers: 5}); err != nil {
		t.Fatal(err)
	}
	step("after another writer changed a field of ours", read(), ours("Mine"), true)
	if got := read().Status.ConnectedMembers; got != 2 {
		t.Errorf("connectedMembers %d after the apply, want ours (2) back", got)
	}
	step("then unchanged", read(), ours("Mine"), false)

	// The decision log is one atomic list every writer merges into: another
	// writer's decision is no news to this one, a decision of its own is.
	at := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)
	theirs := v1alpha1.Decision{Time: metav1.NewTime(at), Cluster: "member1", Object: "rsp/web", Action: "Shifted", Reason: "CapacityExhausted"}
	if err := Apply(ctx, c, pol.Name, "other-owner", &v1alpha1.FailoverPolicyStatus{ObservedGeneration: 1, RecentDecisions: []v1alpha1.Decision{theirs}}); err != nil {
		t.Fatal(err)
	}
	withLog := func(p *v1alpha1.FailoverPolicy, mine ...v1alpha1.Decision) *v1alpha1.FailoverPolicyStatus {
		st := ours("Mine")
		st.RecentDecisions = MergeDecisions(mine, p.Status.RecentDecisions)
		return st
	}
	cur := read()
	step("after another writer's decision", cur, withLog(cur), false)
	mine := v1alpha1.Decision{Time: metav1.NewTime(at.Add(time.Minute)), Cluster: "member2", Object: "node/n1", Action: "Tainted", Reason: "NodeLost"}
	cur = read()
	step("a decision of ours", cur, withLog(cur, mine), true)
	if got := read().Status.RecentDecisions; len(got) != 2 {
		t.Errorf("recentDecisions %+v, want both writers' decisions", got)
	}
	cur = read()
	step("then unchanged, with ours in the log", cur, withLog(cur, mine), false)

	// A policy deleted: nothing is remembered of it.
	if err := c.Delete(ctx, pol); err != nil {
		t.Fatal(err)
	}
	a.Forget(pol.Name)
	if len(a.last) != 0 {
		t.Errorf("remembered %v after Forget", a.last)
	}
}
