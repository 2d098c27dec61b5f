package policystatus

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Writer is the status controller of one feature: it turns the entries of
// its Store into the FailoverPolicy status fields the feature owns and
// applies them with its own field manager, so features never overwrite
// each other. It runs on policy spec changes, on the Store's wake-ups and
// every Resync (which sends nothing while the policy is as its last apply
// left it: Applier).
type Writer[K comparable, E any] struct {
	// Name is the controller's name.
	Name string
	// FieldOwner is the server-side apply field manager.
	FieldOwner string
	Store      *Store[K, E]
	// Build returns the owned fields (RecentDecisions is filled in here).
	Build func(pol *v1alpha1.FailoverPolicy, entries map[K]E) v1alpha1.FailoverPolicyStatus
	// Resync rewrites status without news this often (0: never).
	Resync time.Duration
	// Client reads and writes policies; SetupWithManager sets the manager's.
	Client client.Client

	applier Applier
}

// SetupWithManager adds the Writer to mgr.
func (w *Writer[K, E]) SetupWithManager(mgr ctrl.Manager) error {
	w.Client = mgr.GetClient()
	err := ctrl.NewControllerManagedBy(mgr).
		Named(w.Name).
		For(&v1alpha1.FailoverPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(w.Store.notify, &handler.EnqueueRequestForObject{})).
		Complete(w)
	if err != nil {
		return fmt.Errorf("creating status controller %s: %w", w.Name, err)
	}
	return nil
}

// Reconcile writes one policy's status fields.
func (w *Writer[K, E]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := w.Client.Get(ctx, req.NamespacedName, pol); err != nil {
		if apierrors.IsNotFound(err) {
			w.applier.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	entries, ours := w.Store.Snapshot(pol.Name)
	status := w.Build(pol, entries)
	status.RecentDecisions = MergeDecisions(ours, pol.Status.RecentDecisions)
	if _, err := w.applier.Apply(ctx, w.Client, pol, w.FieldOwner, &status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: w.Resync}, nil
}
