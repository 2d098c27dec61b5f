package rebalance

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

// Workload pods are found by owner chain: the pods whose controller is the
// member's current ReplicaSet of the target (for a FederatedDeployment,
// the ReplicaSet of the member Deployment's current revision; for a
// FederatedReplicaSet, the member ReplicaSet itself). A label selector
// alone also counts the pods of an overlapping workload and of old
// ReplicaSets, and skews Running and the exhaustion signal.

// revisionAnnotation is the Deployment controller's revision mark, on the
// Deployment and on each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// memberWorkload is the workload as its member runs it.
type memberWorkload struct {
	// Owner is the UID of the ReplicaSet whose pods are the workload's
	// replicas in the member; empty when the member has no such workload yet.
	Owner types.UID
	// Revisions are the UIDs of every ReplicaSet of the workload, the
	// current one included: the pods of all of them hold the workload's
	// room (a rollout's old pods free it for its new ones).
	Revisions []types.UID
	// Replicas is the member workload's spec.replicas (what kubefed gave
	// it); -1 when the member has no such workload.
	Replicas int64
	// Observed: the workload's controller has seen its current spec
	// (status.observedGeneration at metadata.generation).
	Observed bool
	// RevisionUnseen: the Deployment names a revision whose ReplicaSet is
	// not among those read. The Deployment controller marks a revision
	// only once its ReplicaSet exists, so the ReplicaSets read lag the
	// pods (the owners' cache and the pods' are separate informers), and
	// pods of that ReplicaSet may be bound without being counted: the
	// bound count is unknown then.
	RevisionUnseen bool
}

// workloadOwner reads the member's workload: its current ReplicaSet (the
// pods' owner), its replicas and whether its controller observed them.
// The member's Deployments and ReplicaSets come from its cache once that
// has synced, live before (member.Owners).
func workloadOwner(ctx context.Context, c member.Owners, kind string, key types.NamespacedName) (memberWorkload, error) {
	none := memberWorkload{Replicas: -1}
	if kind == "FederatedReplicaSet" {
		rs, err := c.ReplicaSet(ctx, key)
		if err != nil {
			return none, client.IgnoreNotFound(err)
		}
		return memberWorkload{Owner: rs.UID, Revisions: []types.UID{rs.UID}, Replicas: int64(ptrOr(rs.Spec.Replicas, 1)),
			Observed: rs.Status.ObservedGeneration >= rs.Generation}, nil
	}
	d, err := c.Deployment(ctx, key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("reading Deployment %s: %w", key, err)
	}
	out := memberWorkload{Replicas: int64(ptrOr(d.Spec.Replicas, 1)), Observed: d.Status.ObservedGeneration >= d.Generation}
	sets, err := c.ReplicaSetsOf(ctx, d)
	if err != nil {
		return none, fmt.Errorf("listing ReplicaSets of Deployment %s: %w", key, err)
	}
	if rs := currentReplicaSet(d, sets); rs != nil {
		out.Owner = rs.UID
	} else {
		out.RevisionUnseen = d.Annotations[revisionAnnotation] != ""
	}
	for _, rs := range sets {
		out.Revisions = append(out.Revisions, rs.UID)
	}
	return out, nil
}

// ptrOr is *p, or def when p is nil (an unset replicas field's default).
func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// currentReplicaSet is, of the ReplicaSets the Deployment controls, the one
// at the Deployment's revision, or nil (none created yet).
func currentReplicaSet(d *appsv1.Deployment, sets []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	for _, rs := range sets {
		if rs.Annotations[revisionAnnotation] == d.Annotations[revisionAnnotation] {
			return rs
		}
	}
	return nil
}

// workloadPods walks the pods of ns once: mine are those the current
// ReplicaSet controls (the workload's replicas), placed counts those of any
// of its revisions bound to a node and not finished, terminating ones
// included (the room the workload holds: predictive placement).
func workloadPods(pods []*cachedpod.Pod, ns string, mw memberWorkload) (mine []*cachedpod.Pod, placed int64) {
	if len(mw.Revisions) == 0 { // the current ReplicaSet is one of them
		return nil, 0
	}
	for _, p := range pods {
		if p.Namespace != ns {
			continue
		}
		ctl := controllerUID(p.OwnerReferences)
		if ctl == "" {
			continue
		}
		if ctl == mw.Owner {
			mine = append(mine, p)
		}
		if p.NodeName != "" && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed && slices.Contains(mw.Revisions, ctl) {
			placed++
		}
	}
	return mine, placed
}

// controllerUID is the UID of the controller among refs ("" when none).
func controllerUID(refs []metav1.OwnerReference) types.UID {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}
