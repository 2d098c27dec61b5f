package member

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

// Workload owners: the member Deployments and ReplicaSets rebalance reads
// to find a workload's pods by owner chain (controllers/rebalance/owner.go).
// Read live, they were two requests per member and RSP pass (3,000 every
// 30 s at 3 members and 500 RSPs, a fifth of the manager's CPU). A
// connection caches them once rebalance first asks (a manager whose
// policies rebalance nothing never watches them), compact (ownerKinds'
// transforms), with the ReplicaSets indexed by their controller. Until
// those informers have synced, and for good where the member refuses to
// list or watch them (a denied permission the member's status shows),
// the reads stay live.

// controllerIndex indexes ReplicaSets and Pods by their controller's UID.
const controllerIndex = "fedfailover-controller-uid"

// ownerKinds are the kinds cached for rebalance (not in cachedKinds: their
// informers start on first use, and the connection's sync does not wait
// for them).
func ownerKinds() []cachedKind {
	return []cachedKind{
		{"Deployment", &appsv1.Deployment{}, transformDeployment, func() client.ObjectList { return &appsv1.DeploymentList{} }, nil},
		{"ReplicaSet", &appsv1.ReplicaSet{}, transformReplicaSet, func() client.ObjectList { return &appsv1.ReplicaSetList{} }, nil},
	}
}

// isOwnerKind: obj is of an ownerKinds kind (the cached client reads those
// live: its cache may hold them partly synced).
func isOwnerKind(obj any) bool {
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.DeploymentList, *appsv1.ReplicaSet, *appsv1.ReplicaSetList:
		return true
	}
	return false
}

// revisionAnnotation is the Deployment controller's revision mark, on a
// Deployment and each of its ReplicaSets: the owner chain's current
// ReplicaSet is the one at its Deployment's revision.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// ownerMeta keeps of an owner's metadata what the owner chain reads: its
// key, UID, generation (against status.observedGeneration), revision and
// controller.
func ownerMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: shared.str(m.Namespace), UID: m.UID,
		ResourceVersion: m.ResourceVersion, Generation: m.Generation}
	if rev, ok := m.Annotations[revisionAnnotation]; ok {
		out.Annotations = map[string]string{revisionAnnotation: shared.str(rev)}
	}
	if ref := metav1.GetControllerOfNoCopy(&m); ref != nil {
		out.OwnerReferences = shared.owners([]metav1.OwnerReference{*ref})
	}
	return out
}

// transformDeployment keeps spec.replicas (what kubefed gave the member),
// spec.selector (the live path lists its ReplicaSets by it) and
// status.observedGeneration; not the pod template.
func transformDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	return &appsv1.Deployment{TypeMeta: d.TypeMeta, ObjectMeta: ownerMeta(d.ObjectMeta),
		Spec:   appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector},
		Status: appsv1.DeploymentStatus{ObservedGeneration: d.Status.ObservedGeneration}}, nil
}

// transformReplicaSet keeps spec.replicas and status.observedGeneration;
// not the pod template.
func transformReplicaSet(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.ReplicaSet{TypeMeta: rs.TypeMeta, ObjectMeta: ownerMeta(rs.ObjectMeta),
		Spec:   appsv1.ReplicaSetSpec{Replicas: rs.Spec.Replicas},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: rs.Status.ObservedGeneration}}, nil
}

// byController is the controllerIndex of ReplicaSets and Pods.
func byController(obj any) ([]string, error) {
	var refs []metav1.OwnerReference
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		refs = o.OwnerReferences
	case *cachedpod.Pod:
		refs = o.OwnerReferences
	}
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return []string{string(r.UID)}, nil
		}
	}
	return nil, nil
}

// withControllerIndex adds controllerIndex to the indexers of a ReplicaSet
// or Pod informer.
func withControllerIndex(obj any, idx toolscache.Indexers) toolscache.Indexers {
	switch obj.(type) {
	case *appsv1.ReplicaSet, *corev1.Pod: // the informer's listed type; the index reads the transformed one
	default:
		return idx
	}
	out := toolscache.Indexers{controllerIndex: byController}
	for k, v := range idx {
		out[k] = v
	}
	return out
}

// Owners reads a member's workload owners.
type Owners interface {
	// Deployment and ReplicaSet return a NotFound error as a client does.
	Deployment(ctx context.Context, key types.NamespacedName) (*appsv1.Deployment, error)
	ReplicaSet(ctx context.Context, key types.NamespacedName) (*appsv1.ReplicaSet, error)
	// ReplicaSetsOf returns the ReplicaSets d controls.
	ReplicaSetsOf(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error)
}

// The objects Owners return may be a cache's own: read them, never modify
// them. Cached ones hold only what the transforms above keep.

// LiveOwners reads them through c (a live client; the fakes of unit tests).
func LiveOwners(c client.Reader) Owners { return liveOwners{c} }

type liveOwners struct{ c client.Reader }

func (l liveOwners) Deployment(ctx context.Context, key types.NamespacedName) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, l.c.Get(ctx, key, d)
}

func (l liveOwners) ReplicaSet(ctx context.Context, key types.NamespacedName) (*appsv1.ReplicaSet, error) {
	rs := &appsv1.ReplicaSet{}
	return rs, l.c.Get(ctx, key, rs)
}

// ReplicaSetsOf lists the Deployment's namespace by its selector, the
// Deployment controller's own way to find them, and keeps those it controls.
func (l liveOwners) ReplicaSetsOf(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	opts := []client.ListOption{client.InNamespace(d.Namespace)}
	if d.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	var sets appsv1.ReplicaSetList
	if err := l.c.List(ctx, &sets, opts...); err != nil {
		return nil, err
	}
	var out []*appsv1.ReplicaSet
	for i := range sets.Items {
		if ref := metav1.GetControllerOfNoCopy(&sets.Items[i]); ref != nil && ref.UID == d.UID {
			out = append(out, &sets.Items[i])
		}
	}
	return out, nil
}

// cachedOwners reads the owner informers' stores.
type cachedOwners struct {
	deployments, replicaSets toolscache.Indexer
}

func (c cachedOwners) Deployment(_ context.Context, key types.NamespacedName) (*appsv1.Deployment, error) {
	return getCached[*appsv1.Deployment](c.deployments, key, appsv1.Resource("deployments"))
}

func (c cachedOwners) ReplicaSet(_ context.Context, key types.NamespacedName) (*appsv1.ReplicaSet, error) {
	return getCached[*appsv1.ReplicaSet](c.replicaSets, key, appsv1.Resource("replicasets"))
}

// ReplicaSetsOf reads the index by controller: a Deployment's ReplicaSets
// are those whose controller it is, whatever their labels.
func (c cachedOwners) ReplicaSetsOf(_ context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	items, err := c.replicaSets.ByIndex(controllerIndex, string(d.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, 0, len(items))
	for _, item := range items {
		rs, ok := item.(*appsv1.ReplicaSet)
		if !ok {
			return nil, fmt.Errorf("the ReplicaSet informer holds a %T", item)
		}
		if rs.Namespace == d.Namespace {
			out = append(out, rs)
		}
	}
	return out, nil
}

// getCached reads key from store, NotFound as a client would say it.
func getCached[O any](store toolscache.Indexer, key types.NamespacedName, gr schema.GroupResource) (O, error) {
	var zero O
	item, ok, err := store.GetByKey(key.Namespace + "/" + key.Name)
	switch {
	case err != nil:
		return zero, err
	case !ok:
		return zero, apierrors.NewNotFound(gr, key.Name)
	}
	o, ok := item.(O)
	if !ok {
		return zero, fmt.Errorf("the informer of %s holds a %T", gr, item)
	}
	return o, nil
}

// ownerInformers are a connection's owner informers, started on first use.
type ownerInformers struct {
	once sync.Once
	// err is why they could not be made (then every read is live).
	err                      error
	deployments, replicaSets cache.Informer
}

// owners returns the connection's owner reads: cached once both owner
// informers have synced, live before that.
func (c *connection) owners(ctx context.Context) Owners {
	o := &c.ownerInf
	o.once.Do(func() {
		if o.deployments, o.err = c.cache.GetInformer(ctx, &appsv1.Deployment{}, cache.BlockUntilSynced(false)); o.err != nil {
			return
		}
		o.replicaSets, o.err = c.cache.GetInformer(ctx, &appsv1.ReplicaSet{}, cache.BlockUntilSynced(false))
	})
	if o.err == nil && o.deployments.HasSynced() && o.replicaSets.HasSynced() {
		d, okD := o.deployments.(interface{ GetIndexer() toolscache.Indexer })
		rs, okR := o.replicaSets.(interface{ GetIndexer() toolscache.Indexer })
		if okD && okR {
			return cachedOwners{deployments: d.GetIndexer(), replicaSets: rs.GetIndexer()}
		}
	}
	return LiveOwners(c.uncached)
}

// VisitOwnedPods calls visit with each cached pod of namespace whose
// controller is one of uids, through the controller index (not every pod of
// the namespace). r is as for VisitCached; another reader's pods of the
// namespace are listed and filtered.
func VisitOwnedPods(ctx context.Context, r client.Reader, namespace string, uids []types.UID, visit func(*cachedpod.Pod)) error {
	k := visitableKinds()[reflect.TypeFor[*cachedpod.Pod]()]
	store, err := storeOf(ctx, r, k)
	if err != nil {
		return fmt.Errorf("reading the Pod informer: %w", err)
	}
	if store == nil {
		return visitList(ctx, r, k, namespace, func(p *cachedpod.Pod) {
			if ctl := metav1.GetControllerOfNoCopy(p); ctl != nil && slices.Contains(uids, ctl.UID) {
				visit(p)
			}
		})
	}
	for _, uid := range uids {
		items, err := store.ByIndex(controllerIndex, string(uid))
		if err != nil {
			return fmt.Errorf("reading cached pods by controller: %w", err)
		}
		for _, item := range items {
			p, ok := item.(*cachedpod.Pod)
			if !ok {
				return fmt.Errorf("the Pod informer holds a %T", item)
			}
			if p.Namespace == namespace {
				visit(p)
			}
		}
	}
	return nil
}
