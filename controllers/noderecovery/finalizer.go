package noderecovery

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// finalizerWait bounds how long a deleted policy waits for the member
// passes to remove the taints it may remove now.
const finalizerWait = time.Minute

// policyFinalizer keeps a FailoverPolicy with node recovery until its
// recoveries are safe without it: the records of Ready nodes that still
// carry fedfailover's taint are given up to finalizerWait to be cleaned up
// by the member passes (which need no policy to clean up);
// the others are released from the policy's ownership, so that garbage
// collection does not take with it the proof that a taint is
// fedfailover's. The member pass removes such a taint once the node is
// Ready and its tracked volumes are detached.
type policyFinalizer struct {
	host    client.Client
	members memberAccess
}

// Reconcile runs the finalizer of a deleted policy (the member pass adds it
// with the policy's first record).
func (f *policyFinalizer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.FailoverPolicy{}
	if err := f.host.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(p, contract.FinalizerNodeRecovery) {
		return ctrl.Result{}, nil
	}
	var list v1alpha1.NodeRecoveryList
	if err := f.host.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing NodeRecovery records: %w", err)
	}
	waiting := false
	for i := range list.Items {
		rec := &list.Items[i]
		if !slices.ContainsFunc(rec.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == p.UID }) ||
			rec.Status.Phase == v1alpha1.RecoveryPhaseFinished {
			continue
		}
		if recordedOf(rec).OwnsTaint && time.Since(p.DeletionTimestamp.Time) < finalizerWait && f.nodeReady(ctx, rec) {
			// The member pass (every resync while a recovery goes on) removes
			// the taint once the tracked volumes are detached.
			waiting = true
			continue
		}
		patch := client.MergeFrom(rec.DeepCopy())
		rec.OwnerReferences = slices.DeleteFunc(rec.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == p.UID })
		if err := f.host.Patch(ctx, rec, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("releasing NodeRecovery %s from policy %s: %w", rec.Name, p.Name, err)
		}
	}
	if waiting {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, contract.FinalizerNodeRecovery)
	return ctrl.Result{}, f.host.Patch(ctx, p, patch)
}

// nodeReady: the record's Node is Ready in the member's cache (false when
// the member is not connected or the Node is gone).
func (f *policyFinalizer) nodeReady(ctx context.Context, rec *v1alpha1.NodeRecovery) bool {
	cl, err := f.members.GetClient(ctx, rec.Spec.Cluster)
	if err != nil {
		return false
	}
	n := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: rec.Spec.Node}, n); err != nil {
		return false
	}
	return string(n.UID) == rec.Spec.NodeUID && nodecond.IsReady(n)
}
