package member

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
)

// The one read path to KubeFedClusters for every controller: the cache of
// the kubefed namespace that the member controller keeps anyway, so the
// operator needs no cluster-wide access to them (the Role in that
// namespace, see reconciler.go).

// KubeFedCluster returns the member's KubeFedCluster from the cache (a
// copy: the caller may change it).
func (c *Cache) KubeFedCluster(ctx context.Context, cluster string) (*kubefedv1beta1.KubeFedCluster, error) {
	kfc := &kubefedv1beta1.KubeFedCluster{}
	if err := c.kubefed.GetClient().Get(ctx, types.NamespacedName{Namespace: c.opts.Namespace, Name: cluster}, kfc); err != nil {
		return nil, fmt.Errorf("getting KubeFedCluster %s: %w", cluster, err)
	}
	return kfc, nil
}

// KubeFedClusters lists the KubeFedClusters that sel matches, from the cache.
func (c *Cache) KubeFedClusters(ctx context.Context, sel labels.Selector) ([]kubefedv1beta1.KubeFedCluster, error) {
	var list kubefedv1beta1.KubeFedClusterList
	if err := c.kubefed.GetClient().List(ctx, &list, client.InNamespace(c.opts.Namespace),
		client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing KubeFedClusters: %w", err)
	}
	return list.Items, nil
}

// KubeFedClusterSource is a watch on the cached KubeFedClusters, for
// controllers that react to their labels or kubefed's health checks.
func (c *Cache) KubeFedClusterSource(h handler.TypedEventHandler[*kubefedv1beta1.KubeFedCluster, reconcile.Request],
	preds ...predicate.TypedPredicate[*kubefedv1beta1.KubeFedCluster]) source.Source {
	return source.Kind(c.kubefed.GetCache(), &kubefedv1beta1.KubeFedCluster{}, h, preds...)
}

// KubeFedNamespace is where the KubeFedClusters are.
func (c *Cache) KubeFedNamespace() string { return c.opts.Namespace }
