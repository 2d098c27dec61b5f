package noderecovery

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// applyMemberStatus writes status the way the member status controller
// does: server-side apply of its own fields under its own field manager.
func applyMemberStatus(t *testing.T, c client.Client, name string) {
	t.Helper()
	st := v1alpha1.FailoverPolicyStatus{
		ConnectedMembers: 1,
		Members:          []v1alpha1.MemberStatus{{Name: "member1", Connected: true, Reason: "Connected"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionMembersConnected, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonAllConnected, Message: "all 1 members connected", LastTransitionTime: metav1.Now()}},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"status": u}}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FailoverPolicy"))
	obj.SetName(name)
	if err := c.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(member.StatusFieldOwner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// TestStatusSharedWithMemberWriter checks, on a real API server, that the
// node recovery status fields and the member status fields are written by
// two field managers without either removing the other's.
func TestStatusSharedWithMemberWriter(t *testing.T) {
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
	applyMemberStatus(t, c, "p")

	st := newStore()
	r := statusWriter(st, time.Minute)
	r.Client = c
	lost := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	st.publish("member1", memberReport{Policy: "p", Storm: true, StormMessage: "member1: 2 of 3 nodes lost",
		Recoveries: []v1alpha1.NodeRecoveryStatus{{Cluster: "member1", Node: "n1", Phase: v1alpha1.RecoveryPhaseBlocked,
			LostSince: &lost, Message: "not fenced: Machine default/n1 is not being deleted"}}})
	st.decide("p", decision(time.Now(), "member1", "Node/n1", "Block", ReasonFencingBlocked, "not fenced", false))
	reconcile := func() *v1alpha1.FailoverPolicy {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "p"}}); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.FailoverPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: "p"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := reconcile()
	cond := func(p *v1alpha1.FailoverPolicy, typ string) metav1.ConditionStatus {
		if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
			if c.ObservedGeneration != p.Generation && typ != v1alpha1.ConditionMembersConnected {
				t.Errorf("%s observedGeneration %d, want %d", typ, c.ObservedGeneration, p.Generation)
			}
			return c.Status
		}
		return "absent"
	}
	if cond(got, v1alpha1.ConditionStormActive) != metav1.ConditionTrue || cond(got, v1alpha1.ConditionFencingBlocked) != metav1.ConditionTrue ||
		cond(got, v1alpha1.ConditionMembersConnected) != metav1.ConditionTrue || len(got.Status.Members) != 1 ||
		len(got.Status.Recoveries) != 1 || len(got.Status.RecentDecisions) != 1 {
		t.Fatalf("after our apply: %+v", got.Status)
	}

	// The member writer applies again: our fields stay.
	applyMemberStatus(t, c, "p")
	if err := c.Get(ctx, client.ObjectKey{Name: "p"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Recoveries) != 1 || cond(got, v1alpha1.ConditionFencingBlocked) != metav1.ConditionTrue {
		t.Fatalf("member writer removed node recovery status: %+v", got.Status)
	}

	// Recovery over: our fields clear, the member's stay, and the decision
	// log survives a restart (a new store).
	restarted := newStore()
	r.Store = restarted.reports
	restarted.publish("member1", memberReport{Policy: "p"})
	got = reconcile()
	if len(got.Status.Recoveries) != 0 || cond(got, v1alpha1.ConditionStormActive) != metav1.ConditionFalse ||
		cond(got, v1alpha1.ConditionFencingBlocked) != metav1.ConditionFalse {
		t.Fatalf("node recovery status not cleared: %+v", got.Status)
	}
	if len(got.Status.Members) != 1 || cond(got, v1alpha1.ConditionMembersConnected) != metav1.ConditionTrue {
		t.Fatalf("member status lost: %+v", got.Status)
	}
	if len(got.Status.RecentDecisions) != 1 {
		t.Fatalf("decisions lost across a restart: %+v", got.Status.RecentDecisions)
	}
}
