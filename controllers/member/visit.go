package member

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VisitCached calls visit with every object of O's kind in the member cache
// r reads, in namespace ("" for all), in no particular order. O is a type
// member caches hold: *corev1.Node, *cachedpod.Pod (Pods),
// *storagev1.VolumeAttachment or *storagev1.CSIDriver.
//
// A pass over every Node or Pod of a member should visit them rather than
// list them: List copies each object's struct into the list's Items, even
// with client.UnsafeDisableDeepCopy (1.2 KB a Pod, 25 MB for a member of
// 20,000 pods), where visiting copies nothing.
//
// The objects visited are the cache's own. Never modify one, nor anything it
// refers to (its maps and slices are shared with the cache, and between
// cached objects: see transform.go): to write, patch a DeepCopy or a live
// read. Keeping the pointers for the rest of a pass is safe: the informer
// replaces an object that changes, it never edits one in place.
//
// r is what Cache.GetReader or Cache.GetClient returned: visiting reads its
// informer's store. Any other reader (the fakes of unit tests) is listed
// with client.UnsafeDisableDeepCopy and its items are visited, Pods as the
// member caches keep them (CompactPod).
func VisitCached[O client.Object](ctx context.Context, r client.Reader, namespace string, visit func(O)) error {
	k, ok := visitableKinds()[reflect.TypeFor[O]()]
	if !ok {
		return fmt.Errorf("member caches do not hold %v", reflect.TypeFor[O]())
	}
	store, err := storeOf(ctx, r, k)
	if err != nil {
		return fmt.Errorf("reading the %s informer: %w", k.name, err)
	}
	if store == nil {
		return visitList(ctx, r, k, namespace, visit)
	}
	var items []any
	if namespace == "" {
		items = store.List()
	} else if items, err = store.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
		return fmt.Errorf("reading cached %ss of namespace %s: %w", k.name, namespace, err)
	}
	for _, item := range items {
		o, ok := item.(O)
		if !ok {
			return fmt.Errorf("the %s informer holds a %T", k.name, item)
		}
		visit(o)
	}
	return nil
}

// visitableKinds are the member caches' kinds, by object type.
var visitableKinds = sync.OnceValue(func() map[reflect.Type]cachedKind {
	out := map[reflect.Type]cachedKind{}
	for _, k := range cachedKinds() {
		out[k.heldType()] = k
	}
	return out
})

// storeOf is the store of k's informer when r reads a member cache, or nil.
// Every kind of cachedKinds has its informer from dial on: asking for one
// never starts another.
func storeOf(ctx context.Context, r client.Reader, k cachedKind) (toolscache.Indexer, error) {
	var informers cache.Informers
	switch r := r.(type) {
	case memberClient:
		informers = r.cache
	case cache.Informers:
		informers = r
	default:
		return nil, nil
	}
	inf, err := informers.GetInformer(ctx, k.obj)
	if err != nil {
		return nil, err
	}
	if s, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		return s.GetIndexer(), nil
	}
	return nil, nil
}

// visitList is VisitCached for a reader that is no member cache.
func visitList[O client.Object](ctx context.Context, r client.Reader, k cachedKind, namespace string, visit func(O)) error {
	list := k.newList()
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(item runtime.Object) error {
		if k.held != nil { // the kind's transform makes what the cache holds
			t, err := k.transform(item)
			if err != nil {
				return err
			}
			item = t.(runtime.Object)
		}
		o, ok := item.(O)
		if !ok {
			return fmt.Errorf("a %s list holds a %T", k.name, item)
		}
		visit(o)
		return nil
	})
}

// memberClient is the client GetClient returns: cached reads of the cached
// kinds, live reads of the others, every write through the fence. It keeps
// its cache at hand for VisitCached.
type memberClient struct {
	client.WithWatch
	cache cache.Cache
}
