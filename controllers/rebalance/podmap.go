package rebalance

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

// podHandler maps a member pod's change to the RSP of its own workload:
// only that RSP's running count and exhaustion signal depend on the pod,
// and a fan-out to every RSP of the namespace queued one pass per RSP
// (each with live member reads) per pod event, ahead of the passes that
// were due. What the pod changes for other workloads is room: a pod that
// goes (deleted, or finished) frees some, so that reaches every RSP of the
// namespace; a pod that takes room is seen by the others at their next
// pass or resync, as pods of other namespaces always were.
func (r *Reconciler) podHandler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(q queue, reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(q, r.rspsOfPod(ctx, e.Object)) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if freesRoom(e.ObjectOld, e.ObjectNew) {
				add(q, r.allRSPs(ctx, e.ObjectNew.GetNamespace()))
				return
			}
			add(q, r.rspsOfPod(ctx, e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			add(q, r.allRSPs(ctx, e.Object.GetNamespace()))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(q, r.rspsOfPod(ctx, e.Object)) },
	}
}

// rspsOfPod is the RSP of the pod's workload, if the host has one.
func (r *Reconciler) rspsOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, name := range workloadNames(o) {
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: name}
		if err := r.host.Get(ctx, key, &fedschedv1a1.ReplicaSchedulingPreference{}); err == nil {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// workloadNames are the names the pod's workload may have, which are its
// RSP's (loadWorkload): the controlling ReplicaSet's (a FederatedReplicaSet)
// and, when that ReplicaSet is a Deployment's (named <deployment>-<the
// pod's pod-template-hash>), the Deployment's.
func workloadNames(o client.Object) []string {
	ref := controllerReplicaSet(o)
	if ref == "" {
		return nil
	}
	out := []string{ref}
	if h := o.GetLabels()[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
		if d, ok := strings.CutSuffix(ref, "-"+h); ok && d != "" {
			out = append(out, d)
		}
	}
	return out
}

// controllerReplicaSet is the name of the pod's controlling ReplicaSet, or "".
func controllerReplicaSet(o client.Object) string {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "ReplicaSet" {
			return ref.Name
		}
	}
	return ""
}

// freesRoom: the pod stopped taking room on its node (it finished).
func freesRoom(oldObj, newObj client.Object) bool {
	o, okO := oldObj.(*cachedpod.Pod)
	n, okN := newObj.(*cachedpod.Pod)
	if !okO || !okN {
		return false
	}
	return !terminal(o) && terminal(n)
}

func terminal(p *cachedpod.Pod) bool {
	return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
}
