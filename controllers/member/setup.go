package member

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberconfig"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

const secretRefIndex = "fedfailover.kubefedcluster.secretRef"

// SetupWithManager adds the member controller (and, unless disabled, the
// FailoverPolicy member-status controller) to mgr and returns the Cache other
// controllers use to reach members.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) (*Cache, error) {
	opts = opts.withDefaults()
	if err := opts.checkWriteTimeout(); err != nil {
		return nil, err
	}
	memberScheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(memberScheme); err != nil {
		return nil, fmt.Errorf("building member scheme: %w", err)
	}
	c := newCache(opts, memberScheme)

	kubefed, err := newKubefedView(mgr, opts.Namespace)
	if err != nil {
		return nil, err
	}
	c.kubefed = kubefed
	if err := kubefed.GetFieldIndexer().IndexField(ctx, &kubefedv1beta1.KubeFedCluster{}, secretRefIndex,
		func(o client.Object) []string {
			// kubefed's Secret, and the one fedfailover uses instead, if any.
			kfc := o.(*kubefedv1beta1.KubeFedCluster)
			names := []string{kfc.Spec.SecretRef.Name}
			if own, ok := kfc.Annotations[contract.AnnotationCredentialsSecret]; ok && own != kfc.Spec.SecretRef.Name {
				names = append(names, own)
			}
			return names
		}); err != nil {
		return nil, fmt.Errorf("indexing KubeFedClusters by Secret: %w", err)
	}
	c.capi, err = setupCAPI(ctx, mgr, kubefed.GetClient(), opts.Namespace)
	if err != nil {
		return nil, err
	}
	c.capi.mgmt = newManagement(kubefed.GetClient(), opts.Namespace, mgr.GetScheme(), opts)
	c.capi.mgmt.log = mgr.GetLogger().WithName("management")
	c.capi.mgmt.onMachine = func(secret string, m *clusterv1.Machine) { c.notifyManagement(secret, m) }
	c.capi.mgmt.onHealth = func(secret string) { c.notifyManagement(secret, nil) }
	if err := mgr.Add(kubefed); err != nil {
		return nil, fmt.Errorf("adding kubefed namespace cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding member cache: %w", err)
	}
	if err := setupSharding(mgr, c); err != nil {
		return nil, err
	}

	r := &reconciler{host: kubefed.GetClient(), cache: c, recorder: mgr.GetEventRecorder("fedfailover-members")}
	secretToClusters := func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
		var list kubefedv1beta1.KubeFedClusterList
		if err := kubefed.GetClient().List(ctx, &list, client.InNamespace(s.Namespace),
			client.MatchingFields{secretRefIndex: s.Name}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing KubeFedClusters of Secret failed", "secret", s.Name)
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	// kubefed rewrites KubeFedCluster status on every health check: only
	// spec, label and annotation changes matter here.
	kfcChanged := predicate.Or[*kubefedv1beta1.KubeFedCluster](
		predicate.TypedGenerationChangedPredicate[*kubefedv1beta1.KubeFedCluster]{},
		predicate.TypedLabelChangedPredicate[*kubefedv1beta1.KubeFedCluster]{},
		predicate.TypedAnnotationChangedPredicate[*kubefedv1beta1.KubeFedCluster]{})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("member").
		WatchesRawSource(source.Kind(kubefed.GetCache(), &kubefedv1beta1.KubeFedCluster{},
			&handler.TypedEnqueueRequestForObject[*kubefedv1beta1.KubeFedCluster]{}, kfcChanged)).
		WatchesRawSource(source.Kind(kubefed.GetCache(), &corev1.Secret{},
			handler.TypedEnqueueRequestsFromMapFunc(secretToClusters))).
		WatchesRawSource(source.Channel(c.synced, &handler.TypedEnqueueRequestForObject[*kubefedv1beta1.KubeFedCluster]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			// Sharded, every replica connects to the members it owns.
			NeedLeaderElection: ptr.To(!c.Sharded())})
	if c.Sharded() {
		// A Lease acquired or lost: connect or stay disconnected.
		b = b.WatchesRawSource(c.EventSource(c.requestForKubeFedCluster))
	}
	err = b.Complete(r)
	if err != nil {
		return nil, fmt.Errorf("creating member controller: %w", err)
	}

	if opts.DisablePolicyStatus {
		return c, nil
	}
	pr := &policyStatusReconciler{client: mgr.GetClient(), cache: c}
	all := func(ctx context.Context, _ *kubefedv1beta1.KubeFedCluster) []reconcile.Request {
		return pr.allPolicies(ctx)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("failoverpolicy-members").
		// Ready summarises the other controllers' conditions too.
		For(&v1alpha1.FailoverPolicy{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, policystatus.ReadyInputsChanged))).
		WatchesRawSource(source.Kind(kubefed.GetCache(), &kubefedv1beta1.KubeFedCluster{},
			handler.TypedEnqueueRequestsFromMapFunc(all), kfcChanged)).
		WatchesRawSource(c.EventSource(func(ctx context.Context, _ string) []reconcile.Request { return pr.allPolicies(ctx) })).
		// MachineEvidenceUnavailable follows the management clusters' availability.
		WatchesRawSource(c.ManagementEventSource(false, func(ctx context.Context, _ string) []reconcile.Request { return pr.allPolicies(ctx) })).
		// Which policy governs a member (Overlapping) depends on every policy.
		Watches(&v1alpha1.FailoverPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return pr.allPolicies(ctx)
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(pr)
	if err != nil {
		return nil, fmt.Errorf("creating FailoverPolicy member status controller: %w", err)
	}
	return c, nil
}

// setupSharding adds the shard coordinator when sharding is on.
func setupSharding(mgr ctrl.Manager, c *Cache) error {
	c.log = mgr.GetLogger().WithName("members")
	o := c.opts.Shard
	if !o.Enabled() {
		return nil
	}
	if o.Config == nil {
		o.Config = mgr.GetConfig()
	}
	coord, err := newCoordinator(o, c.memberNames, c.ownershipChanged)
	if err != nil {
		return err
	}
	c.shard = coord
	if err := mgr.Add(coord); err != nil {
		return fmt.Errorf("adding shard coordinator: %w", err)
	}
	return nil
}

// newKubefedView is a cache and client limited to the kubefed namespace, so
// the operator needs no cluster-wide Secret access. Cached Secrets keep only
// the token.
func newKubefedView(mgr ctrl.Manager, ns string) (cluster.Cluster, error) {
	cl, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.HTTPClient = mgr.GetHTTPClient()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Logger = mgr.GetLogger().WithName("kubefed-cache")
		o.Cache = cache.Options{
			DefaultNamespaces: map[string]cache.Config{ns: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Transform: secretCredentialsOnly},
			},
			ReaderFailOnMissingInformer: true,
		}
	})
	if err != nil {
		return nil, fmt.Errorf("creating kubefed namespace cache: %w", err)
	}
	return cl, nil
}

// secretCredentialsOnly keeps a Secret's identity, its member token and a
// management cluster's kubeconfig (contract.ManagementKubeconfigKeys):
// annotations may hold a last-applied copy of the data.
func secretCredentialsOnly(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{TypeMeta: s.TypeMeta, Type: s.Type}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = s.Name, s.Namespace, s.UID, s.ResourceVersion
	out.Labels = s.Labels
	for _, k := range append([]string{memberconfig.TokenKey}, contract.ManagementKubeconfigKeys...) {
		if v, ok := s.Data[k]; ok {
			if out.Data == nil {
				out.Data = map[string][]byte{}
			}
			out.Data[k] = v
		}
	}
	return out, nil
}

// setupCAPI indexes Machines in the manager's cache. Without the Cluster API
// CRDs the mapping is off and its methods return ErrCAPIUnavailable.
func setupCAPI(ctx context.Context, mgr ctrl.Manager, kubefed client.Reader, ns string) (capi, error) {
	c := capi{kubefed: kubefed, host: capimap.Reader{Reader: mgr.GetClient(), Indexed: true},
		hostLive: mgr.GetAPIReader(), hostWriter: mgr.GetClient(), ns: ns}
	if err := capimap.IndexMachines(ctx, mgr.GetFieldIndexer()); err != nil {
		if meta.IsNoMatchError(err) {
			mgr.GetLogger().Info("Cluster API CRDs not installed: Node to Machine mapping disabled")
			return c, nil
		}
		return c, fmt.Errorf("indexing Machines: %w", err)
	}
	c.enabled = true
	return c, nil
}
