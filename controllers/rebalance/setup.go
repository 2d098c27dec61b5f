// Package rebalance shifts kubefed ReplicaSchedulingPreference placements
// away from member clusters that failed or ran out of capacity, and back
// to the user's baseline, stepwise, once they recover. Decisions come from
// internal/planner and internal/capacity; this package gathers their inputs
// and writes their results.
package rebalance

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/defaults"
)

// +kubebuilder:rbac:groups=scheduling.kubefed.io,resources=replicaschedulingpreferences,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=types.kubefed.io,resources=federateddeployments;federatedreplicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;patch

// Options configure rebalancing. Zero values take defaults.
type Options struct {
	// Resync bounds the wait between passes over a managed RSP, for what no
	// watch reports (default 30s).
	Resync time.Duration
	// MaxConcurrentReconciles is the number of RSPs planned at once (default
	// 16). A pass may wait on a few reads (a cache's first list, a
	// member's owners read live until their cache has synced), so a member
	// running out of room for many RSPs at once is planned in parallel
	// rather than one small batch behind the other.
	MaxConcurrentReconciles int
	// Sharded: members are sharded across replicas (--shard). This
	// replica sees only the members it holds, so it plans nothing: every
	// RSP a policy would rebalance, or release, is held (ReasonShardedRebalance).
	Sharded bool
	// ShardedRebalance (with Sharded; --sharded-rebalance, experimental):
	// plan on every member anyway, each replica publishing what it sees of
	// the members it holds (summary.go), instead of holding.
	ShardedRebalance bool
	// SummaryFlush is how often changed member summaries are written
	// (default 500ms).
	SummaryFlush time.Duration
	// SummaryRenew is how long after its last write an unchanged summary
	// is written again (default 10s); SummaryStaleAfter is how long after
	// the leader last saw a summary change it counts as Unknown (default
	// 30s, at least two renew periods).
	SummaryRenew      time.Duration
	SummaryStaleAfter time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	defaults.Set(&o.Resync, 30*time.Second)
	defaults.Set(&o.MaxConcurrentReconciles, 16)
	defaults.Set(&o.SummaryFlush, 500*time.Millisecond)
	defaults.Set(&o.SummaryRenew, 10*time.Second)
	defaults.Set(&o.SummaryStaleAfter, 30*time.Second)
	defaults.Clock(&o.Now)
	return o
}

// SetupWithManager adds the rebalance controller (one request per RSP) and
// its FailoverPolicy status controller to mgr.
func SetupWithManager(mgr ctrl.Manager, members *member.Cache, opts Options) error {
	opts = opts.withDefaults()
	r := &Reconciler{host: mgr.GetClient(), live: mgr.GetAPIReader(), members: members, recorder: mgr.GetEventRecorder("fedfailover-rebalance"),
		opts: opts, now: opts.Now, store: newStore(), mem: map[types.NamespacedName]*memory{}}
	templates, err := newTemplateCache(mgr)
	if err != nil {
		return fmt.Errorf("creating the federated workloads' cache: %w", err)
	}
	if err := mgr.Add(templates); err != nil {
		return err
	}
	r.templates = templates
	all := func(ctx context.Context, _ client.Object) []reconcile.Request { return r.allRSPs(ctx, "") }
	allForKFC := func(ctx context.Context, _ *kubefedv1beta1.KubeFedCluster) []reconcile.Request {
		return r.allRSPs(ctx, "")
	}
	bld := ctrl.NewControllerManagedBy(mgr)
	if opts.Sharded && opts.ShardedRebalance {
		if bld, err = r.setupSummaries(mgr, members, bld); err != nil {
			return err
		}
	}
	r.ctrl, err = bld.
		Named("rebalance").
		For(&fedschedv1a1.ReplicaSchedulingPreference{}).
		Watches(&v1alpha1.FailoverPolicy{}, handler.EnqueueRequestsFromMapFunc(all),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A record maps to its RSP (same namespace and name): on start (a
		// record whose RSP is gone is deleted) and when one appears or
		// goes (an RSP held for want of it). fedfailover's own updates
		// need no pass.
		Watches(&v1alpha1.RebalanceRecord{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// A maintenance accepted or ended changes what every RSP may
		// place on its member.
		Watches(&v1alpha1.MemberMaintenance{}, handler.EnqueueRequestsFromMapFunc(all), builder.WithPredicates(maintenanceChanged)).
		WatchesRawSource(members.KubeFedClusterSource(handler.TypedEnqueueRequestsFromMapFunc(allForKFC), kubefedClusterChanged)).
		WatchesRawSource(members.EventSource(func(ctx context.Context, _ string) []reconcile.Request { return r.allRSPs(ctx, "") })).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Build(r)
	if err != nil {
		return fmt.Errorf("creating rebalance controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("rebalance-finalizer").For(&v1alpha1.FailoverPolicy{}).
		Complete(&finalizer{r: r}); err != nil {
		return fmt.Errorf("creating rebalance finalizer controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("membermaintenance").For(&v1alpha1.MemberMaintenance{}).
		Complete(&maintenance{r: r, progressEvery: maintenanceProgressEvery}); err != nil {
		return fmt.Errorf("creating the member maintenance controller: %w", err)
	}
	return statusWriter(r.store).SetupWithManager(mgr)
}

// maintenanceProgressEvery is how often a drain's progress is read again
// into its MemberMaintenance's status.
const maintenanceProgressEvery = 2 * time.Second

// setupSummaries adds, for a sharded manager that rebalances: the observer
// and publisher of the members this replica holds (every replica), the
// reader of the others' summaries, and a watch of those summaries for the
// rebalance controller (bld).
func (r *Reconciler) setupSummaries(mgr ctrl.Manager, members *member.Cache, bld *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	ns := members.ShardNamespace()
	view, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.HTTPClient = mgr.GetHTTPClient()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Logger = mgr.GetLogger().WithName("summary-cache")
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ReaderFailOnMissingInformer: false}
	})
	if err != nil {
		return nil, fmt.Errorf("creating the member summary cache: %w", err)
	}
	if err := mgr.Add(view); err != nil {
		return nil, err
	}
	if r.opts.SummaryStaleAfter < 2*r.opts.SummaryRenew {
		return nil, fmt.Errorf("member summaries go stale after %s, want at least two renew periods (%s)", r.opts.SummaryStaleAfter, r.opts.SummaryRenew)
	}
	clock := newSummaryClock(r.opts.SummaryStaleAfter)
	inf, err := view.GetCache().GetInformer(context.Background(), &v1alpha1.MemberSummary{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching member summaries: %w", err)
	}
	if _, err := inf.AddEventHandler(clock.handler(r.opts.Now)); err != nil {
		return nil, fmt.Errorf("watching member summaries: %w", err)
	}
	r.summaries = &summaryReader{reader: view.GetCache(), namespace: ns, clock: clock}
	pub := newSummaryPublisher(view.GetClient(), ns, members.ShardIdentity(), members.HoldsMember, r.opts.SummaryFlush, r.opts.SummaryRenew, r.opts.Now)
	if err := mgr.Add(pub); err != nil {
		return nil, err
	}
	obs := &observer{r: r, pub: pub}
	oc, err := ctrl.NewControllerManagedBy(mgr).Named("rebalance-observer").
		For(&fedschedv1a1.ReplicaSchedulingPreference{}).
		WatchesRawSource(members.EventSource(func(ctx context.Context, _ string) []reconcile.Request { return r.allRSPs(ctx, "") })).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles, NeedLeaderElection: ptr.To(false)}).
		Build(obs)
	if err != nil {
		return nil, fmt.Errorf("creating the rebalance observer: %w", err)
	}
	obs.ctrl = oc
	if err := ctrl.NewControllerManagedBy(mgr).Named("membersummary-collector").
		WatchesRawSource(source.Kind(view.GetCache(), &v1alpha1.MemberSummary{}, &handler.TypedEnqueueRequestForObject[*v1alpha1.MemberSummary]{})).
		WatchesRawSource(members.KubeFedClusterSource(handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, kfc *kubefedv1beta1.KubeFedCluster) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: summaryName(kfc.Name)}}}
		}), predicate.TypedFuncs[*kubefedv1beta1.KubeFedCluster]{
			CreateFunc: func(event.TypedCreateEvent[*kubefedv1beta1.KubeFedCluster]) bool { return false },
			UpdateFunc: func(event.TypedUpdateEvent[*kubefedv1beta1.KubeFedCluster]) bool { return false },
		})).
		Complete(&summaryCollector{summaries: view.GetCache(), writer: view.GetClient(), live: mgr.GetAPIReader(), kubefedNS: members.KubeFedNamespace()}); err != nil {
		return nil, fmt.Errorf("creating the member summary collector: %w", err)
	}
	toRSPs := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, s *v1alpha1.MemberSummary) []reconcile.Request {
		out := make([]reconcile.Request, 0, len(s.Spec.Workloads))
		for _, w := range s.Spec.Workloads {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Name}})
		}
		return out
	})
	// A renewal alone (metadata) needs no pass, unless it makes a stale
	// summary count again.
	renewedOnly := predicate.TypedFuncs[*v1alpha1.MemberSummary]{UpdateFunc: func(e event.TypedUpdateEvent[*v1alpha1.MemberSummary]) bool {
		return e.ObjectOld.Generation != e.ObjectNew.Generation || clock.revived(e.ObjectNew.Name, e.ObjectNew.ResourceVersion, r.opts.Now())
	}}
	return bld.WatchesRawSource(source.Kind(view.GetCache(), &v1alpha1.MemberSummary{}, toRSPs, renewedOnly)), nil
}

// allRSPs maps a change to every RSP (in one namespace when given): there
// are few, and a pass over an unmanaged one is a cheap no-op. Only the keys
// are read, so the cache's objects are not copied (500 RSPs copied per
// member event were a tenth of the heap at 3 x 2,000 x 10).
func (r *Reconciler) allRSPs(ctx context.Context, namespace string) []reconcile.Request {
	var list fedschedv1a1.ReplicaSchedulingPreferenceList
	if err := r.host.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ReplicaSchedulingPreferences failed")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ensureWatches adds the member Pod and Node watches once per connection.
// Pods map to their own workload's RSP (podHandler), Nodes to every RSP.
func (r *Reconciler) ensureWatches(ctx context.Context, cluster string) error {
	return r.memberWatches(ctx, cluster, r.ctrl, "rebalance")
}

// memberWatches adds the member Pod and Node watches of controller c, named
// with prefix, once per connection.
func (r *Reconciler) memberWatches(ctx context.Context, cluster string, c controller.Controller, prefix string) error {
	nodeToRSPs := r.allRSPsHandler(nodeFanOutWindow)
	for _, w := range []member.WatchInput{
		{Name: prefix + "-pods", Kind: &corev1.Pod{}, Handler: r.podHandler(), Predicates: []predicate.Predicate{podChanged}},
		{Name: prefix + "-nodes", Kind: &corev1.Node{}, Handler: nodeToRSPs, Predicates: []predicate.Predicate{nodeCapacityChanged}},
	} {
		w.Watcher = c
		if err := r.members.Watch(ctx, cluster, w); err != nil {
			return err
		}
	}
	return nil
}

// kubefedClusterChanged passes label changes and Ready flips: kubefed
// rewrites the status on every health check.
var kubefedClusterChanged = predicate.TypedFuncs[*kubefedv1beta1.KubeFedCluster]{
	UpdateFunc: func(e event.TypedUpdateEvent[*kubefedv1beta1.KubeFedCluster]) bool {
		return kubefedReady(e.ObjectOld) != kubefedReady(e.ObjectNew) ||
			!equality.Semantic.DeepEqual(e.ObjectOld.Labels, e.ObjectNew.Labels)
	}}

// podChanged passes what changes a member's state for a workload: pods
// appearing, going, being scheduled, running or being deleted.
var podChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okO := e.ObjectOld.(*cachedpod.Pod)
	n, okN := e.ObjectNew.(*cachedpod.Pod)
	if !okO || !okN {
		return true
	}
	return o.Phase != n.Phase || o.NodeName != n.NodeName ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) || scheduledReason(o) != scheduledReason(n)
}}

func scheduledReason(p *cachedpod.Pod) string {
	if c := p.Condition(corev1.PodScheduled); c != nil {
		return string(c.Status) + c.Reason
	}
	return ""
}

// nodeCapacityChanged drops heartbeats: only what an estimate reads of a
// node (capacity.NodeFitChanged) changes the room for replicas.
var nodeCapacityChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return capacity.NodeUpdateChangesFit(e.ObjectOld, e.ObjectNew)
}}
