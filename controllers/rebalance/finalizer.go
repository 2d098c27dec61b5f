package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/finalizers,verbs=update

// finalizer keeps a policy with rebalancing on from going before each RSP
// it shifted has its release handed over to the RSP's RebalanceRecord
// (contract.FinalizerRebalance): the record then says a release is on, with
// the policy's maxStep, and the rebalance controller takes the RSP back to
// its baseline from it, stepwise and only where kubefed alone would put
// replicas now (release.go), however long a member stays down. The
// finalizer does not wait for that: a policy that could not be deleted
// while a member is down would block whoever deletes it (GitOps pruning,
// an uninstall).
type finalizer struct{ r *Reconciler }

func (f *finalizer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := f.r.host.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if policy.Enabled(pol, policy.Rebalance) {
		return f.done(f.setFinalizer(ctx, pol, true))
	}
	if !controllerutil.ContainsFinalizer(pol, contract.FinalizerRebalance) {
		return ctrl.Result{}, nil
	}
	if pending, err := f.handOverAll(ctx, pol); err != nil || pending {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	return f.done(f.setFinalizer(ctx, pol, false))
}

// done ends a pass: a conflict is a newer policy, whose own event brings
// the next pass (not an error to log).
func (f *finalizer) done(err error) (ctrl.Result, error) {
	if errors.Is(err, errStale) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// handOverAll starts the release of every RSP still recorded as managed by
// the policy that no other policy takes over: its record says a release is
// on (releaseParams). Only the record is written here; the RSP is written
// by its own passes alone. pending: a record changed meanwhile, look again.
func (f *finalizer) handOverAll(ctx context.Context, pol *v1alpha1.FailoverPolicy) (pending bool, err error) {
	var list fedschedv1a1.ReplicaSchedulingPreferenceList
	if err := f.r.host.List(ctx, &list); err != nil {
		return false, fmt.Errorf("listing ReplicaSchedulingPreferences: %w", err)
	}
	for i := range list.Items {
		rsp := &list.Items[i]
		owner, err := f.r.storedPolicy(ctx, rsp)
		if err != nil {
			return false, err
		}
		if owner != pol.Name {
			continue
		}
		sel, err := f.r.policyFor(ctx, rsp)
		if err != nil {
			return false, err
		}
		if sel.Governing != nil || sel.Held != nil {
			continue // another policy manages it now, from the same baseline
		}
		switch err := f.handOver(ctx, rsp, pol); {
		case errors.Is(err, errStale):
			pending = true
		case err != nil:
			return false, err
		}
	}
	return pending, nil
}

// handOver marks the RSP's record as being released, unless it already
// is. An RSP with only a legacy annotation is handed over by its own pass.
func (f *finalizer) handOver(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, pol *v1alpha1.FailoverPolicy) error {
	rec, err := f.r.getRecord(ctx, client.ObjectKeyFromObject(rsp), nil)
	if err != nil || rec == nil || rec.Spec.Released || rec.Spec.Release != nil || (rec.Spec.RSPUID != "" && rec.Spec.RSPUID != string(rsp.UID)) {
		return err
	}
	rec = rec.DeepCopy()
	rec.Spec.Release = releaseParams(pol, f.r.now())
	if err := f.r.host.Update(ctx, rec, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		return fmt.Errorf("handing the release of %s/%s over to its RebalanceRecord: %w", rsp.Namespace, rsp.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Release handed over to the RebalanceRecord", "ReplicaSchedulingPreference", client.ObjectKeyFromObject(rsp))
	return nil
}

// setFinalizer adds or removes the finalizer, with an optimistic lock: other
// finalizers of the policy are not ours to drop.
func (f *finalizer) setFinalizer(ctx context.Context, pol *v1alpha1.FailoverPolicy, on bool) error {
	orig := pol.DeepCopy()
	var changed bool
	if on {
		changed = controllerutil.AddFinalizer(pol, contract.FinalizerRebalance)
	} else {
		changed = controllerutil.RemoveFinalizer(pol, contract.FinalizerRebalance)
	}
	if !changed {
		return nil
	}
	err := f.r.host.Patch(ctx, pol, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errStale // a newer policy: its own event queues the next pass
	}
	return fmt.Errorf("updating finalizers of FailoverPolicy %s: %w", pol.Name, err)
}
