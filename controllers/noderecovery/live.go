package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// errNotProvenLive stops a destructive write whose proof did not hold when
// re-read from the API servers; the next pass decides again.
type errNotProvenLive struct{ why string }

func (e *errNotProvenLive) Error() string { return "not proven fenced on a live read: " + e.why }

// confirmFenced re-reads the Node from the member's API server and its
// Machine from the host's, and runs the fencing verdict again, right before a
// destructive write. The caches can lag (the node may be Ready again, its
// Machine replaced, the Node re-created under the same name), and the write
// needs proof from now, for the same Node (UID) and the same Machine (UID,
// nodeRef). cached is the Node the pass decided on (nil for a deleted Node),
// s when its Ready condition was first seen; the live Node is returned.
func (r *Reconciler) confirmFenced(ctx context.Context, v *memberView, name string, cached *corev1.Node, s sighting) (*corev1.Node, error) {
	if v.policy == nil {
		return nil, &errNotProvenLive{why: "no policy governs the member"}
	}
	if !r.members.HoldsMember(v.cluster) {
		return nil, notHolding(v.cluster)
	}
	live, err := r.liveNode(ctx, v, name, cached)
	if err != nil {
		return nil, err
	}
	m, err := r.liveMachine(ctx, v.machines[name], name)
	if err != nil {
		return nil, err
	}
	res := fencing.Verdict(fencing.Input{Node: live, Machine: m, Policy: v.policy.Spec.NodeRecovery.Fencing,
		LostSince: s.lossAt, SilentSince: liveConditionSeen(live, s, r.now()), Now: r.now()})
	if !res.Fenced {
		return nil, &errNotProvenLive{why: res.Message()}
	}
	return live, nil
}

// notHolding: with members sharded across replicas, only the holder of a
// member's Lease writes to it.
func notHolding(cluster string) error {
	return &errNotProvenLive{why: fmt.Sprintf("this replica does not hold member %s's lease", cluster)}
}

// liveConditionSeen is when the live Node's Ready condition was first seen:
// the sighting's time if it is the condition the pass decided on, else now
// (a condition never seen before has lasted no time yet).
func liveConditionSeen(live *corev1.Node, s sighting, now time.Time) time.Time {
	c := nodecond.Ready(live)
	if c == nil || c.Status != s.status || !c.LastTransitionTime.Time.Equal(s.since) || s.condAt.IsZero() {
		return now
	}
	return s.condAt
}

// liveNode re-reads the Node from the member's API server; nil when it is
// gone. It must be the Node the pass decided on: same UID, or still absent
// when cached is nil (a deleted Node).
func (r *Reconciler) liveNode(ctx context.Context, v *memberView, name string, cached *corev1.Node) (*corev1.Node, error) {
	uncached, err := r.members.GetUncachedClient(ctx, v.cluster)
	if err != nil {
		return nil, err
	}
	live := &corev1.Node{}
	switch err := uncached.Get(ctx, client.ObjectKey{Name: name}, live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("reading node %s live: %w", name, err)
	}
	switch {
	case cached == nil && live != nil:
		return nil, &errNotProvenLive{why: fmt.Sprintf("a Node named %s exists again (uid %s)", name, live.UID)}
	case cached != nil && live == nil:
		return nil, &errNotProvenLive{why: fmt.Sprintf("node %s was deleted since it was read", name)}
	case cached != nil && live.UID != cached.UID:
		return nil, &errNotProvenLive{why: fmt.Sprintf("node %s was re-created (uid %s, decided on %s)", name, live.UID, cached.UID)}
	}
	return live, nil
}

// stillOrphan re-reads, before each delete of a deleted Node's pods or
// attachments, that no Node of that name exists: a replacement registering
// under the same name would run those pods, and the first check of the pass
// is milliseconds to seconds old by the last delete. For a Node that exists
// it is a no-op (the Node's UID was checked live once, its pods carry
// preconditions).
func (r *Reconciler) stillOrphan(ctx context.Context, v *memberView, n *corev1.Node) error {
	if n.UID != "" {
		return nil
	}
	_, err := r.liveNode(ctx, v, n.Name, nil)
	return err
}

// liveMachine re-reads the cached Machine of node from the host API server;
// nil when there was none or it is gone. A different Machine under the same
// name, or one that now names another node, is not this node's.
func (r *Reconciler) liveMachine(ctx context.Context, cached *clusterv1.Machine, node string) (*clusterv1.Machine, error) {
	if cached == nil {
		return nil, nil
	}
	m := &clusterv1.Machine{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(cached), m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Machine %s/%s live: %w", cached.Namespace, cached.Name, err)
	}
	if m.UID != cached.UID || (m.Status.NodeRef.Name != "" && m.Status.NodeRef.Name != node) {
		return nil, nil
	}
	return m, nil
}

// notProven turns a failed live confirmation into a Blocked recovery (and
// an event on the transition); other errors fail the pass.
func (r *Reconciler) notProven(ctx context.Context, v *memberView, n *corev1.Node, p *plan, err error) (time.Duration, error) {
	var np *errNotProvenLive
	if !errors.As(err, &np) {
		return 0, err
	}
	p.Phase = v1alpha1.RecoveryPhaseBlocked
	p.Step = stepNone
	p.Message = "nothing deleted: " + np.Error()
	if r.store.changed(v.cluster, n.Name, transitionBlocked) {
		r.report(ctx, v, n, corev1.EventTypeWarning, ReasonFencingBlocked, "Block", p.Message)
	}
	return forceDeleteRecheck, nil
}

// confirmStillLost re-reads the Node from the member's API server before a
// Machine deletion is requested: it must be the same Node, still not Ready.
// (The Machine itself is deleted with UID and resourceVersion preconditions.)
func (r *Reconciler) confirmStillLost(ctx context.Context, v *memberView, n *corev1.Node) error {
	if !r.members.HoldsMember(v.cluster) {
		return notHolding(v.cluster)
	}
	live, err := r.liveNode(ctx, v, n.Name, n)
	if err != nil {
		return err
	}
	if nodecond.IsReady(live) {
		return &errNotProvenLive{why: fmt.Sprintf("node %s is Ready again", n.Name)}
	}
	return nil
}
