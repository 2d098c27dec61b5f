package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/kubefedhealth"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// workload is what the controller knows of the RSP's target: which pods are
// its replicas and what each requests.
type workload struct {
	// kind and name are the target's (FederatedDeployment or
	// FederatedReplicaSet): the member workload of the same name owns the
	// replicas.
	kind, name string
	spec       *corev1.PodSpec
	// placement selects, by KubeFedCluster labels, the members kubefed may
	// place the target on; nil when kubefed ignores the target's placement
	// (the RSP's intersectWithClusterSelector is off).
	placement labels.Selector
}

// federatedGroupVersion holds kubefed's FederatedDeployment and
// FederatedReplicaSet (the RSP targetKind).
var federatedGroupVersion = schema.GroupVersion{Group: "types.kubefed.io", Version: "v1beta1"}

// loadWorkload reads the target's template from the host: from the
// federated workloads' cache (templates.go) in production, decoded once per
// resourceVersion. Without a target, capacity is estimated for an empty
// pod. The workload's pods are found in each member by owner chain
// (workloadOwner), not by labels.
func (r *Reconciler) loadWorkload(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (workload, error) {
	kind := rsp.Spec.TargetKind
	if kind == "" {
		kind = "FederatedDeployment"
	}
	key := decodedKey{kind: kind, name: client.ObjectKeyFromObject(rsp)}
	w := workload{kind: kind, name: rsp.Name, spec: &corev1.PodSpec{}}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(federatedGroupVersion.WithKind(kind))
	if err := r.readTemplate(ctx, key.name, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			r.decoded.forget(key)
			return w, nil
		}
		return w, fmt.Errorf("reading %s %s/%s: %w", kind, rsp.Namespace, rsp.Name, err)
	}
	d, ok := r.decoded.get(key, u.GetResourceVersion())
	if !ok {
		var err error
		if d, err = decodeWorkload(u, w); err != nil {
			return w, err
		}
		r.decoded.put(key, u.GetResourceVersion(), d)
	}
	return d.forRSP(rsp)
}

// decodeWorkload decodes a federated workload's pod template and placement.
// A placement that does not decode is kept as an error, for the RSPs that
// intersect with it only.
func decodeWorkload(u *unstructured.Unstructured, w workload) (decodedWorkload, error) {
	if tmpl, ok, _ := unstructured.NestedMap(u.Object, templatePath...); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, w.spec); err != nil {
			return decodedWorkload{}, fmt.Errorf("decoding pod template of %s %s/%s: %w", w.kind, u.GetNamespace(), w.name, err)
		}
	}
	d := decodedWorkload{w: w}
	if p, err := targetPlacement(u); err != nil {
		d.placementErr = fmt.Errorf("placement of %s %s/%s: %w", w.kind, u.GetNamespace(), w.name, err)
	} else {
		d.w.placement = p
	}
	return d, nil
}

// forRSP is the workload as the RSP sees it: kubefed reads the placement
// only with the RSP's intersectWithClusterSelector.
func (d decodedWorkload) forRSP(rsp *fedschedv1a1.ReplicaSchedulingPreference) (workload, error) {
	w := d.w
	if !rsp.Spec.IntersectWithClusterSelector {
		w.placement = nil
		return w, nil
	}
	return w, d.placementErr
}

// readTemplate reads a federated workload from the templates cache, or
// from the host client where there is none (tests that build a Reconciler
// by hand).
func (r *Reconciler) readTemplate(ctx context.Context, key types.NamespacedName, u *unstructured.Unstructured) error {
	if r.templates == nil {
		return r.host.Get(ctx, key, u)
	}
	wait := templateSyncTimeout
	if r.templateWait > 0 {
		wait = r.templateWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return r.templates.Get(ctx, key, u)
}

// targetPlacement is the target's spec.placement.clusterSelector as kubefed's
// RSP scheduler reads it with intersectWithClusterSelector: the selector
// alone (spec.placement.clusters is kubefed's own output then), and no
// selector selects nothing.
func targetPlacement(u *unstructured.Unstructured) (labels.Selector, error) {
	raw, ok, _ := unstructured.NestedMap(u.Object, clusterSelectorPath...)
	if !ok {
		return labels.Nothing(), nil
	}
	sel := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, sel); err != nil {
		return nil, err
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// memberNames lists the KubeFedClusters the policy selects, with kubefed's
// own verdict on each (kubefedhealth: the second view a failure needs), and
// those of them the target's placement allows (nil: every one). The
// governing policy's selector is valid (internal/policy.ForRSP).
func (r *Reconciler) memberNames(ctx context.Context, pol *v1alpha1.FailoverPolicy, w workload) (map[string]kubefedhealth.View, map[string]bool, error) {
	sel, err := policy.Clusters(pol)
	if err != nil {
		return nil, nil, err
	}
	kfcs, err := r.members.KubeFedClusters(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]kubefedhealth.View, len(kfcs))
	var eligible map[string]bool
	if w.placement != nil {
		eligible = map[string]bool{}
	}
	now := r.now()
	for i := range kfcs {
		v := kubefedhealth.Of(&kfcs[i], now)
		out[kfcs[i].Name] = v
		r.kubefedViews.Store(kfcs[i].Name, v)
		if w.placement != nil && w.placement.Matches(labels.Set(kfcs[i].Labels)) {
			eligible[kfcs[i].Name] = true
		}
	}
	return out, eligible, nil
}

func kubefedReady(k *kubefedv1beta1.KubeFedCluster) bool {
	for _, c := range k.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// observe gathers one member's view of the workload. A member that cannot
// be read counts as unhealthy; its replicas move once that lasts
// clusterFailedAfter and kubefed agrees (kubefed not Ready): fedfailover's
// own view alone (its connection, probes, reads) is no proof of failure.
func (r *Reconciler) observe(ctx context.Context, cluster string, kubefed kubefedhealth.View, ns string, w workload) (observation, error) {
	switch {
	case kubefed.Confirmed():
		return observation{}, nil
	case r.members.Sharded() && !r.members.HoldsMember(cluster):
		// Held by another replica: what it published (summary.go).
		holder, live := r.members.MemberHolder(cluster)
		return r.summaries.observation(ctx, cluster, holder, live, ns, w.name, r.now()), nil
	case r.members.Sharded():
		metrics.ShardSummaryUnknown.DeleteLabelValues(cluster) // held here: no summary read
	}
	return r.observeHeld(ctx, cluster, ns, w, r.ensureWatches)
}

// observeHeld is observe of a member this replica holds (or of any member,
// unsharded): from its own cache. watch adds the member watches of the
// controller that asks.
func (r *Reconciler) observeHeld(ctx context.Context, cluster, ns string, w workload, watch func(context.Context, string) error) (observation, error) {
	switch {
	case r.members.Unknown(cluster):
		return observation{KubefedReady: true, Unknown: true}, nil
	case !r.members.Connected(cluster):
		return observation{KubefedReady: true}, nil
	}
	if err := watch(ctx, cluster); err != nil && !errors.Is(err, member.ErrNotConnected) {
		return observation{}, err
	}
	mw, err := r.ownerIn(ctx, cluster, ns, w)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Member workload unreadable; counted unhealthy", "error", err.Error())
		return observation{KubefedReady: true}, nil //nolint:nilerr // an unreadable member is a state, not a failed pass
	}
	rd, pods, usage, err := r.readMember(ctx, cluster, ns, mw.Revisions)
	if err != nil {
		// Unreadable counts as unhealthy: its replicas move once that lasts
		// clusterFailedAfter.
		ctrl.LoggerFrom(ctx).V(1).Info("Member unreadable; counted unhealthy", "error", err.Error())
		return observation{KubefedReady: true}, nil //nolint:nilerr // as for an unreadable workload
	}
	mine, placed := workloadPods(pods, ns, mw)
	if mw.RevisionUnseen {
		placed = -1 // no prediction on a bound count that may miss pods
	}
	est, err := usage.Estimate(w.spec, func() ([]*corev1.Node, error) { return cachedNodes(ctx, rd) })
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Member nodes unreadable; counted unhealthy", "error", err.Error())
		return observation{KubefedReady: true}, nil //nolint:nilerr // as for an unreadable cache
	}
	for name, q := range est.Free {
		v := float64(q.Value())
		if name == corev1.ResourceCPU {
			v = float64(q.MilliValue()) / 1000
		}
		metrics.MemberFreeCapacity.WithLabelValues(cluster, string(name)).Set(v)
	}
	return observation{Healthy: true, KubefedReady: true, Running: runningPods(mine), Fits: est.Replicas,
		Placed:        placed,
		Unschedulable: anyUnschedulable(mine), Assigned: mw.Replicas, AssignedObserved: mw.Observed}, nil
}

// ownerIn finds the member's ReplicaSet of the workload (workloadOwner).
func (r *Reconciler) ownerIn(ctx context.Context, cluster, ns string, w workload) (memberWorkload, error) {
	c, err := r.members.Owners(ctx, cluster)
	if err != nil {
		return memberWorkload{Replicas: -1}, err
	}
	return workloadOwner(ctx, c, w.kind, types.NamespacedName{Namespace: ns, Name: w.name})
}

// readMember returns the member's cache reader, the Pods of namespace ns
// whose controller is one of owners (the workload's ReplicaSets) from it,
// and what all its pods take per node. The Pods are the cache's own
// (member.VisitOwnedPods), for reading during this pass only.
func (r *Reconciler) readMember(ctx context.Context, cluster, ns string, owners []types.UID) (client.Reader, []*cachedpod.Pod, *capacity.Usage, error) {
	rd, err := r.members.GetReader(ctx, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	usage, err := r.members.PodUsage(ctx, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	var pods []*cachedpod.Pod
	if err := member.VisitOwnedPods(ctx, rd, ns, owners, func(p *cachedpod.Pod) { pods = append(pods, p) }); err != nil {
		return nil, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	return rd, pods, usage, nil
}

// cachedNodes are the member cache's own Nodes, for an estimate made
// during this pass: with many RSPs planned at once, a copy of every Node
// per pass was most of the heap.
func cachedNodes(ctx context.Context, rd client.Reader) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	if err := member.VisitCached(ctx, rd, "", func(n *corev1.Node) { nodes = append(nodes, n) }); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes, nil
}

// sortedKeys returns a map's keys in order, so every pass is deterministic.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
