package noderecovery

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// closeReplaced closes the active record of a node name whose Node now has
// another UID: the record was about a Node that no longer exists, and
// nothing it says applies to the new one.
func (r *Reconciler) closeReplaced(ctx context.Context, v *memberView, n *corev1.Node) error {
	rec := v.records[n.Name]
	if rec == nil || rec.Spec.NodeUID == string(n.UID) {
		return nil
	}
	delete(v.records, n.Name)
	return r.finishRecord(ctx, rec, v1alpha1.FinishNodeReplaced,
		fmt.Sprintf("Node %s was re-created (uid %s, record about %s); the new Node is judged afresh", n.Name, n.UID, rec.Spec.NodeUID))
}

// closeDeleted closes the active records of Nodes that no longer exist (and
// forgets their sightings).
func (r *Reconciler) closeDeleted(ctx context.Context, v *memberView) error {
	present := map[string]bool{}
	for _, n := range v.nodes {
		present[n.Name] = true
	}
	r.sightings.forget(v.cluster, func(node string) bool { return present[node] })
	for node, rec := range v.records {
		if present[node] {
			continue
		}
		if err := r.finishRecord(ctx, rec, v1alpha1.FinishNodeDeleted, "Node "+node+" was deleted"); err != nil {
			return err
		}
		delete(v.records, node)
	}
	return nil
}

// migrate reads, once, the node annotations an older fedfailover kept on
// member Nodes into a host record, and removes them. Anyone with nodes/patch
// can write those annotations, so the record made from them is marked
// Migrated: it shows what was done and tracks the claims, but never makes
// fedfailover remove a taint, and, like every record, never authorizes a
// destructive write (each needs a fencing verdict from live reads). It
// returns the Node the pass goes on with: n itself, or, once the annotations
// are removed, a copy of n without them (n is the cache's own: never
// modified).
func (r *Reconciler) migrate(ctx context.Context, v *memberView, n *corev1.Node) (*corev1.Node, error) {
	if !contract.HasNodeMarks(n.Annotations) || r.paused(v) || r.dryRun(v) {
		return n, nil
	}
	marks, _ := contract.DecodeNodeMarks(n.Annotations)
	if cond := nodecond.Ready(n); v.records[n.Name] == nil && marks.Acted() && cond != nil && !nodecond.IsReady(n) && v.policy != nil {
		rec := &v1alpha1.NodeRecovery{
			ObjectMeta: metav1.ObjectMeta{Name: recordName(v.cluster, n.Name, n.UID, cond.LastTransitionTime.Time),
				OwnerReferences: []metav1.OwnerReference{policyOwner(v.policy)}},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: v.cluster, Node: n.Name, NodeUID: string(n.UID),
				ProviderID: n.Spec.ProviderID, Policy: v.policy.Name, LostSince: metaTimePtr(marks.LostSince)},
		}
		if err := ensureFinalizer(ctx, r.host, v.policy); err != nil {
			return nil, err
		}
		if err := r.createRecord(ctx, rec); err != nil {
			return nil, err
		}
		now := r.now()
		if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
			st.Phase, st.Migrated, st.Method, st.Evidence, st.Claims = v1alpha1.RecoveryPhaseRecovering, true, marks.Action, marks.FencedBy, marks.Claims
			st.IntentAt, st.ActedAt, st.RecoveredAt = metaTimePtr(marks.FencedAt), metaTimePtr(marks.FencedAt), metaTimePtr(marks.RecoveredAt)
			st.ObservedAt, st.ReadyObservedAt = metaTimePtr(now), metaTimePtr(now)
			st.ReadyStatus, st.ReadySince = string(cond.Status), metaTimePtr(cond.LastTransitionTime.Time)
			st.Message = "made from the node annotations of an older fedfailover; its taint, if any, is left to its owner"
		}); err != nil {
			return nil, err
		}
		v.records[n.Name] = rec
	}
	upd := n.DeepCopy()
	for _, k := range contract.NodeMarkKeys() {
		delete(upd.Annotations, k)
	}
	if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("removing old recovery annotations from node: %w", err)
	}
	migrated := *n
	migrated.Annotations = upd.Annotations
	return &migrated, nil
}

// reportUnreachable publishes, for a member that cannot be reached, the
// taints fedfailover added there that it cannot remove until it can.
func (r *Reconciler) reportUnreachable(ctx context.Context, cluster string, why error) error {
	active, _, err := r.memberRecords(ctx, cluster)
	if err != nil {
		return err
	}
	var rep memberReport
	for node, rec := range active {
		if !recordedOf(rec).OwnsTaint || rec.Status.ActedAt == nil {
			continue
		}
		rep.Policy = rec.Spec.Policy
		rep.TaintsLeft = append(rep.TaintsLeft, fmt.Sprintf("taint on node %s of member %s cannot be removed while the member is unreachable: %v", node, cluster, why))
	}
	if rep.Policy != "" {
		slices.Sort(rep.TaintsLeft)
		r.store.publish(cluster, rep)
	}
	return nil
}
