package noderecovery

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/defaults"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Options configure node recovery. Zero values take defaults.
type Options struct {
	// ResyncPeriod bounds the wait between passes over a member with a
	// recovery going on (default 15s).
	ResyncPeriod time.Duration
	// IdleResync is the pass period of a quiet member (default 2m).
	IdleResync time.Duration
	// StatusResync is how often policy status is rewritten without news (default 1m).
	StatusResync time.Duration
	// RecordRetention is how long finished NodeRecovery records are kept
	// (default 72h).
	RecordRetention time.Duration
	// MaxFinishedRecords bounds the finished records kept per member, oldest
	// deleted first (default 20).
	MaxFinishedRecords int
	// MaxConcurrentReconciles is the number of members handled at once (default 5).
	MaxConcurrentReconciles int
	// EnableMachineDeletion lets policies with requestMachineDeletion delete
	// Machines. It is an installation choice (--enable-machine-deletion), since
	// it needs a separate RBAC grant; off, such policies delete nothing.
	EnableMachineDeletion bool
	// RemediationKinds are the remediation kinds the installation enables
	// (--remediation-kind; the chart grants their RBAC): each one the host
	// serves is watched, so that a remediation's result brings the next
	// pass at once. A policy naming another kind still works, on the
	// resync period, if the RBAC allows it.
	RemediationKinds []schema.GroupVersionKind
	// Now is the clock (tests).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	defaults.Set(&o.ResyncPeriod, 15*time.Second)
	defaults.Set(&o.IdleResync, 2*time.Minute)
	defaults.Set(&o.StatusResync, time.Minute)
	defaults.Set(&o.MaxConcurrentReconciles, 5)
	defaults.Set(&o.RecordRetention, 72*time.Hour)
	defaults.Set(&o.MaxFinishedRecords, 20)
	defaults.Clock(&o.Now)
	return o
}

// SetupWithManager adds the node recovery controller (one request per
// member) and its FailoverPolicy status controller to mgr.
func SetupWithManager(mgr ctrl.Manager, members *member.Cache, opts Options) error {
	opts = opts.withDefaults()
	r := &Reconciler{host: mgr.GetClient(), apiReader: mgr.GetAPIReader(), members: members,
		recorder: mgr.GetEventRecorder("fedfailover-noderecovery"), store: newStore(), sightings: newSightings(), opts: opts, now: opts.Now}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.NodeRecovery{}, indexRecordCluster, func(o client.Object) []string {
		return []string{o.(*v1alpha1.NodeRecovery).Spec.Cluster}
	}); err != nil {
		return fmt.Errorf("indexing NodeRecovery records: %w", err)
	}
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Machine"}, clusterv1.GroupVersion.Version)
	r.capi = err == nil
	b := ctrl.NewControllerManagedBy(mgr).
		Named("noderecovery").
		WatchesRawSource(members.EventSource(member.RequestForCluster)).
		Watches(&v1alpha1.FailoverPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allMembers),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Sharded, every replica recovers the members it holds.
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, NeedLeaderElection: ptr.To(!members.Sharded())})
	if r.capi {
		b = b.Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineMembers))
	}
	for _, gvk := range r.watchRemediations(mgr, opts.RemediationKinds) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(r.remediationMembers))
	}
	// Machines of members whose KubeFedCluster names a management cluster,
	// and that cluster becoming (un)available.
	b = b.WatchesRawSource(members.ManagementEventSource(true, member.RequestForCluster))
	if r.ctrl, err = b.Build(r); err != nil {
		return fmt.Errorf("creating node recovery controller: %w", err)
	}
	fin := &policyFinalizer{host: mgr.GetClient(), members: members}
	if err := ctrl.NewControllerManagedBy(mgr).Named("noderecovery-finalizer").For(&v1alpha1.FailoverPolicy{}).Complete(fin); err != nil {
		return fmt.Errorf("creating node recovery finalizer controller: %w", err)
	}
	return statusWriter(r.store, opts.StatusResync).SetupWithManager(mgr)
}

func (r *Reconciler) allMembers(context.Context, client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, c := range r.members.ConnectedClusters() {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: c}})
	}
	return out
}

// machineMembers maps a Machine to the member of the same name as its
// Cluster, or to every member when none is (the Cluster is then named by an
// annotation on the KubeFedCluster).
func (r *Reconciler) machineMembers(ctx context.Context, o client.Object) []reconcile.Request {
	m := o.(*clusterv1.Machine)
	if slices.Contains(r.members.ConnectedClusters(), m.Spec.ClusterName) {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: m.Spec.ClusterName}}}
	}
	return r.allMembers(ctx, o)
}

// ensureWatches adds the member watches once per connection.
func (r *Reconciler) ensureWatches(ctx context.Context, cluster string) error {
	toMember := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: cluster}}}
	})
	for _, w := range []member.WatchInput{
		{Name: "noderecovery-nodes", Kind: &corev1.Node{}, Predicates: []predicate.Predicate{nodeChanged}},
		{Name: "noderecovery-pods", Kind: &corev1.Pod{}, Predicates: []predicate.Predicate{podWithClaims}},
		{Name: "noderecovery-volumeattachments", Kind: &storagev1.VolumeAttachment{}},
	} {
		w.Watcher, w.Handler = r.ctrl, toMember
		if err := r.members.Watch(ctx, cluster, w); err != nil {
			return err
		}
	}
	return nil
}

// nodeChanged drops heartbeat-only Node updates: only readiness, taints,
// annotations and deletion matter here.
var nodeChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okO := e.ObjectOld.(*corev1.Node)
	n, okN := e.ObjectNew.(*corev1.Node)
	if !okO || !okN {
		return true
	}
	return readyStatus(o) != readyStatus(n) || !equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		!equality.Semantic.DeepEqual(o.Annotations, n.Annotations) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}}

// readyStatus is the Ready condition's status and transition time: a
// flip, or a new spell of the same status, is news.
func readyStatus(n *corev1.Node) string {
	if c := nodecond.Ready(n); c != nil {
		return string(c.Status) + c.LastTransitionTime.String()
	}
	return ""
}

// podWithClaims keeps the pods whose replacements are tracked.
var podWithClaims = predicate.NewPredicateFuncs(func(o client.Object) bool {
	p, ok := o.(*cachedpod.Pod)
	return !ok || len(podClaims(p)) > 0
})
