package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// finalizer keeps a policy with rebalancing on from going before the RSPs
// it shifted have their baselines back (contract.FinalizerRebalance): a
// deleted or disabled policy must not leave a failover placement behind
// while no one manages it.
type finalizer struct{ r *Reconciler }

func (f *finalizer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := f.r.host.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if policy.Enabled(pol, policy.Rebalance) {
		return ctrl.Result{}, f.setFinalizer(ctx, pol, true)
	}
	if !controllerutil.ContainsFinalizer(pol, contract.FinalizerRebalance) {
		return ctrl.Result{}, nil
	}
	if pending, err := f.restoreAll(ctx, pol.Name); err != nil || pending {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	return ctrl.Result{}, f.setFinalizer(ctx, pol, false)
}

// restoreAll releases every RSP still recorded as managed by the policy
// that no other policy takes over. pending: one changed meanwhile, look
// again.
func (f *finalizer) restoreAll(ctx context.Context, name string) (pending bool, err error) {
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
		if owner != name {
			continue
		}
		sel, err := f.r.policyFor(ctx, rsp)
		if err != nil {
			return false, err
		}
		if sel.Governing != nil || sel.Held != nil {
			continue // another policy manages it now, from the same baseline
		}
		rctx := ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("ReplicaSchedulingPreference", client.ObjectKeyFromObject(rsp)))
		if err := f.r.release(rctx, rsp); err != nil {
			if errors.Is(err, errStale) {
				pending = true
				continue
			}
			return false, err
		}
	}
	return pending, nil
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
	if err := f.r.host.Patch(ctx, pol, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating finalizers of FailoverPolicy %s: %w", pol.Name, client.IgnoreNotFound(err))
	}
	return nil
}
