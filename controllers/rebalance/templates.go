package rebalance

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// templateSyncTimeout bounds a pass's wait for the federated workloads'
// first list: a host that refuses it (a role without list or watch) is an
// error of the pass, not a pass that never ends.
const templateSyncTimeout = 30 * time.Second

// newTemplateCache is a host cache of the federated workloads that holds
// only what loadWorkload reads: the pod template's spec and the placement's
// cluster selector. Its informers start on the first read of their kind, so
// a manager that rebalances nothing never lists them, and a kind whose CRD
// is not installed is never watched (the read says so, as a live one did).
// Before it, every RSP pass read its target live: at 500 RSPs, 17 host
// reads a second and the lead of the manager's CPU profile.
//
// The transform is the cache's default, not one per kind: a per-kind
// option needs the kind served when the cache is built, and kubefed serves
// only the types enabled in it (kubefedctl enable).
func newTemplateCache(mgr ctrl.Manager) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: pruneFederatedWorkload,
	})
}

// pruneFederatedWorkload keeps, of a federated workload, its identity and
// the two fields a rebalance pass reads (loadWorkload): overrides, status,
// labels, annotations and managed fields go.
func pruneFederatedWorkload(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetGeneration(u.GetGeneration())
	if dt := u.GetDeletionTimestamp(); dt != nil {
		out.SetDeletionTimestamp(dt)
	}
	for _, path := range [][]string{templatePath, clusterSelectorPath} {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found {
			if err := unstructured.SetNestedField(out.Object, v, path...); err != nil {
				return nil, fmt.Errorf("pruning %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
	}
	return out, nil
}

var (
	templatePath        = []string{"spec", "template", "spec", "template", "spec"}
	clusterSelectorPath = []string{"spec", "placement", "clusterSelector"}
)

// decodedWorkloads remembers each federated workload as last decoded, by
// resourceVersion: a pass over an unchanged target decodes nothing. A
// workload's spec is shared by the passes that read it: never changed.
type decodedWorkloads struct {
	mu sync.Mutex
	m  map[decodedKey]decodedWorkload
}

type decodedKey struct {
	kind string
	name types.NamespacedName
}

type decodedWorkload struct {
	resourceVersion string
	// w holds the placement whatever the RSPs' intersectWithClusterSelector
	// (forRSP drops it); placementErr is why it did not decode.
	w            workload
	placementErr error
}

func (d *decodedWorkloads) get(k decodedKey, rv string) (decodedWorkload, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[k]
	if !ok || rv == "" || e.resourceVersion != rv {
		return decodedWorkload{}, false
	}
	return e, true
}

func (d *decodedWorkloads) put(k decodedKey, rv string, e decodedWorkload) {
	if rv == "" {
		return
	}
	e.resourceVersion = rv
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[decodedKey]decodedWorkload{}
	}
	d.m[k] = e
}

func (d *decodedWorkloads) forget(k decodedKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, k)
}
