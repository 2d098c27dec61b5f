package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// rspWithAnnotation is an RSP of the user's 1:1 placement carrying value
// as its rebalance annotation (none when empty), in a fake host with the objects given.
func rspWithAnnotation(t *testing.T, value string, objs ...client.Object) (*Reconciler, client.Client, *events.FakeRecorder, types.NamespacedName) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 6, Clusters: prefs(1, 1)}}
	if value != "" {
		rsp.Annotations = map[string]string{contract.AnnotationRebalance: value}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, rsp)...).Build()
	rec := events.NewFakeRecorder(20)
	r := &Reconciler{host: c, recorder: rec, store: newStore(), mem: map[types.NamespacedName]*memory{}, now: func() time.Time { return t0 }}
	return r, c, rec, client.ObjectKeyFromObject(rsp)
}

// rspWithState is rspWithAnnotation without one, and m as the RSP's
// RebalanceRecord.
func rspWithState(t *testing.T, m *contract.RebalanceState, objs ...client.Object) (*Reconciler, client.Client, *events.FakeRecorder, types.NamespacedName) {
	t.Helper()
	r, c, rec, key := rspWithAnnotation(t, "", objs...)
	putRecord(t, c, key, m)
	return r, c, rec, key
}

// Rule 8: an unreadable annotation on an unmanaged RSP is removed with a
// Warning event, the spec left as it is, instead of failing every pass.
func TestMalformedAnnotationOnReleaseIsRemoved(t *testing.T) {
	r, c, rec, key := rspWithAnnotation(t, `{"baseline": 7`)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile: %v, want the bad state reset, not an error", err)
	}
	got := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[contract.AnnotationRebalance]; ok {
		t.Errorf("annotation kept: %q", got.Annotations[contract.AnnotationRebalance])
	}
	if want := (contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}); !specPlacement(got).Equal(want) {
		t.Errorf("spec %+v, want the user's 1:1 left as it is", got.Spec)
	}
	wantWarning(t, rec, ReasonStateReset)
}

// Rule 8: a managed RSP with an unreadable annotation takes the current
// spec as its baseline and records a fresh state, with a Warning event.
func TestMalformedAnnotationOnManagedRSPResetsBaseline(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	r, c, rec, key := rspWithAnnotation(t, "not json", pol)
	r.members = noMembers(t)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile: %v, want the bad state reset, not an error", err)
	}
	got := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	m := recordedState(t, c, key)
	if want := (contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}); !m.Baseline.Equal(want) || m.Policy != "p" {
		t.Errorf("baseline %+v (policy %q), want the current spec 1:1 for p", m.Baseline, m.Policy)
	}
	wantWarning(t, rec, ReasonStateReset)
}

// wantWarning fails unless a Warning event with reason was recorded.
func wantWarning(t *testing.T, rec *events.FakeRecorder, reason string) {
	t.Helper()
	for {
		select {
		case ev := <-rec.Events:
			if strings.HasPrefix(ev, "Warning "+reason+" ") {
				return
			}
		default:
			t.Fatalf("no Warning event with reason %s", reason)
		}
	}
}

func specOf(t *testing.T, c client.Client, key types.NamespacedName) *fedschedv1a1.ReplicaSchedulingPreference {
	t.Helper()
	got := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got
}
