package rebalance

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// resolve runs baselineOf on the RSP as the host has it now.
func resolve(t *testing.T, c client.Client, key types.NamespacedName) (*contract.RebalanceState, bool) {
	t.Helper()
	live := specOf(t, c, key)
	recorded := recordedState(t, c, key)
	return baselineOf(recorded, specPlacement(live), ownersOf(live.ManagedFields), "p")
}

// Rule 5: a user edit made while shifted (here totalReplicas 6 -> 8 with a
// merge patch) is adopted, but fedfailover's own pins on spec.clusters are
// not: the new baseline is the user's 1:1 with 8 replicas. Main adopted the
// whole live spec, pins included.
func TestUserEditAdoptsOnlyTheirFields(t *testing.T) {
	r, c, _, ns := onHost(t)
	key, user := shiftedOnHost(t, r, c, ns, "p")
	rsp := specOf(t, c, key)
	if err := c.Patch(context.Background(), rsp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"totalReplicas":8}}`)),
		client.FieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
	m, edited := resolve(t, c, key)
	want := contract.Placement{TotalReplicas: 8, Clusters: user.Clusters}
	if !edited || !m.Baseline.Equal(want) {
		t.Errorf("baseline %+v (edited %v), want the user's clusters with 8 replicas %+v", m.Baseline, edited, want)
	}
}

// Rule 5: GitOps re-applying the original spec (server-side apply, forcing
// its fields back) during a failover is no edit: the baseline stays, so the
// RSP does not flap between baselines.
func TestGitOpsReapplyIsNoEdit(t *testing.T) {
	r, c, _, ns := onHost(t)
	key, user := shiftedOnHost(t, r, c, ns, "p")
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"targetKind": "FederatedDeployment", "totalReplicas": int64(6),
		"clusters": map[string]any{"member1": map[string]any{"weight": int64(1)}, "member2": map[string]any{"weight": int64(1)}}}}}
	u.SetAPIVersion("scheduling.kubefed.io/v1alpha1")
	u.SetKind("ReplicaSchedulingPreference")
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("argocd-controller"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if live := specPlacement(specOf(t, c, key)); live.Equal(user) {
		t.Fatalf("setup: the re-apply restored the spec exactly (%+v); the pins should be mixed in", live)
	}
	m, edited := resolve(t, c, key)
	if edited || !m.Baseline.Equal(user) {
		t.Errorf("baseline %+v (edited %v), want the user's %+v unchanged", m.Baseline, edited, user)
	}
}

// Rule 5: fedfailover's own write read back is not an edit, whatever the
// managers.
func TestOwnWriteIsNoEdit(t *testing.T) {
	r, c, _, ns := onHost(t)
	key, user := shiftedOnHost(t, r, c, ns, "p")
	if m, edited := resolve(t, c, key); edited || !m.Baseline.Equal(user) {
		t.Errorf("baseline %+v (edited %v), want %+v", m.Baseline, edited, user)
	}
}
