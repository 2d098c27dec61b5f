package noderecovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// NodeRecovery records are fedfailover's memory of each loss, on the host
// where member-level writers cannot forge them.
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=noderecoveries,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=noderecoveries/status,verbs=get;update;patch

// indexRecordCluster indexes NodeRecovery records by spec.cluster.
const indexRecordCluster = "spec.cluster"

// sighting is when fedfailover first saw a node's loss and its current
// Ready condition, on the host's clock. notReadyFor and assumeFencedAfter are
// measured with it, so no decision compares a member's clock with the host's.
type sighting struct {
	uid    types.UID
	status corev1.ConditionStatus
	since  time.Time // the condition's lastTransitionTime (member clock), compared for equality only
	lossAt time.Time // host clock: the loss was first seen
	condAt time.Time // host clock: this Ready condition was first seen
}

// sightings remembers the not-Ready nodes seen, per member and node. After a
// restart it starts again from the records (or from now: a later recovery,
// never an earlier one).
type sightings struct {
	mu sync.Mutex
	m  map[string]sighting
}

func newSightings() *sightings { return &sightings{m: map[string]sighting{}} }

// observe returns the node's sighting, updating it; the zero sighting for a
// Ready node (which forgets it).
func (s *sightings) observe(cluster string, n *corev1.Node, rec *v1alpha1.NodeRecovery, now time.Time) sighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cluster + "/" + n.Name
	cur := nodecond.Ready(n)
	if cur == nil || cur.Status == corev1.ConditionTrue {
		delete(s.m, key)
		return sighting{}
	}
	prev, ok := s.m[key]
	if !ok && rec != nil && rec.Spec.NodeUID == string(n.UID) && rec.Status.ObservedAt != nil && rec.Status.ReadySince != nil {
		prev, ok = sighting{uid: n.UID, status: corev1.ConditionStatus(rec.Status.ReadyStatus), since: rec.Status.ReadySince.Time,
			lossAt: rec.Status.ObservedAt.Time, condAt: timeOf(rec.Status.ReadyObservedAt)}, true
		if prev.condAt.IsZero() {
			prev.condAt = prev.lossAt
		}
	}
	next := sighting{uid: n.UID, status: cur.Status, since: cur.LastTransitionTime.Time, lossAt: now, condAt: now}
	if ok && prev.uid == n.UID && nodecond.SameLoss(prev.status, prev.since, cur) {
		next.lossAt = prev.lossAt
		if prev.status == cur.Status && prev.since.Equal(next.since) {
			next.condAt = prev.condAt
		}
	}
	s.m[key] = next
	return next
}

// forget drops a member's sightings (it is gone or unselected).
func (s *sightings) forget(cluster string, keep func(node string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if c, node, _ := cut(k); c == cluster && !keep(node) {
			delete(s.m, k)
		}
	}
}

// recordName is deterministic for one loss of one Node, so that a pass that
// does not see its own create yet (cache lag) gets AlreadyExists instead of
// a second record.
func recordName(cluster, node string, uid types.UID, since time.Time) string {
	h := sha256.Sum256([]byte(cluster + "\x00" + node + "\x00" + string(uid) + "\x00" + since.UTC().Format(time.RFC3339)))
	base := cluster + "." + node
	if len(base) > 240 {
		base = base[:240]
	}
	return base + "." + hex.EncodeToString(h[:])[:10]
}

// memberRecords lists a member's records from the manager's cache: the
// active one per node, and the finished ones (for retention).
func (r *Reconciler) memberRecords(ctx context.Context, cluster string) (active map[string]*v1alpha1.NodeRecovery, finished []*v1alpha1.NodeRecovery, err error) {
	var list v1alpha1.NodeRecoveryList
	if err := r.host.List(ctx, &list, client.MatchingFields{indexRecordCluster: cluster}); err != nil {
		return nil, nil, fmt.Errorf("listing NodeRecovery records: %w", err)
	}
	active = map[string]*v1alpha1.NodeRecovery{}
	for i := range list.Items {
		rec := &list.Items[i]
		if rec.Status.Phase == v1alpha1.RecoveryPhaseFinished {
			finished = append(finished, rec)
			continue
		}
		// Two active records for one node cannot be made by one worker per
		// member; if some appear, the oldest is the one continued.
		if old := active[rec.Spec.Node]; old == nil || rec.CreationTimestamp.Before(&old.CreationTimestamp) {
			active[rec.Spec.Node] = rec
		}
	}
	return active, finished, nil
}

// openRecord creates the record of a newly seen loss, owned by the policy.
func (r *Reconciler) openRecord(ctx context.Context, v *memberView, n *corev1.Node, m *clusterv1.Machine, s sighting, p *plan) (*v1alpha1.NodeRecovery, error) {
	cond := nodecond.Ready(n)
	since := metav1.NewTime(cond.LastTransitionTime.Time)
	rec := &v1alpha1.NodeRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: recordName(v.cluster, n.Name, n.UID, cond.LastTransitionTime.Time)},
		Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: v.cluster, Node: n.Name, NodeUID: string(n.UID),
			ProviderID: n.Spec.ProviderID, Policy: v.policy.Name, LostSince: &since},
	}
	if m != nil {
		rec.Spec.Machine = &v1alpha1.MachineReference{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
	}
	rec.OwnerReferences = []metav1.OwnerReference{policyOwner(v.policy)}
	if err := ensureFinalizer(ctx, r.host, v.policy); err != nil {
		return nil, err
	}
	if err := r.createRecord(ctx, rec); err != nil {
		return nil, err
	}
	// The status is written with the first sync (the create ignores it).
	rec.Status = v1alpha1.NodeRecoveryRecordStatus{}
	if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.ObservedAt, st.ReadyObservedAt = metaTimePtr(s.lossAt), metaTimePtr(s.condAt)
		st.ReadyStatus, st.ReadySince = string(cond.Status), &since
	}); err != nil {
		return nil, err
	}
	return rec, r.syncRecord(ctx, v, rec, p)
}

// createRecord creates rec under its deterministic name or, when a finished
// record of the same loss holds that name (the loss was closed, e.g. for
// want of a policy, and is taken up again), under the next free suffix.
func (r *Reconciler) createRecord(ctx context.Context, rec *v1alpha1.NodeRecovery) error {
	base := rec.Name
	for i := 1; ; i++ {
		err := r.host.Create(ctx, rec)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("creating NodeRecovery record: %w", err)
			}
			return nil
		}
		old := &v1alpha1.NodeRecovery{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: rec.Name}, old); err != nil {
			return fmt.Errorf("reading NodeRecovery %s: %w", rec.Name, err)
		}
		if old.Status.Phase != v1alpha1.RecoveryPhaseFinished || i > 8 {
			return errRecordNotSeenYet
		}
		rec.Name = fmt.Sprintf("%s-%d", base, i)
	}
}

// errRecordNotSeenYet: the record exists but the cache has not caught up.
var errRecordNotSeenYet = fmt.Errorf("NodeRecovery record not in the cache yet")

func policyOwner(p *v1alpha1.FailoverPolicy) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FailoverPolicy", Name: p.Name, UID: p.UID}
}

func metaTimePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

// syncRecord writes the plan's phase and message, and the node's current
// Ready condition, to the record when they changed. The write is
// optimistic-locked: a record changed since the pass read it fails the pass,
// and the next one decides on the new record.
func (r *Reconciler) syncRecord(ctx context.Context, v *memberView, rec *v1alpha1.NodeRecovery, p *plan) error {
	return r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		if p.Phase != "" {
			st.Phase = p.Phase
		}
		st.Message = policystatus.Truncate(p.Message, 1024)
		if st.Evidence == "" && p.Verdict.Fenced {
			st.Evidence = p.Verdict.Reason
		}
		if st.IntentAt == nil && p.Method != "" {
			st.Method = p.Method
		}
		st.DryRun = r.dryRun(v)
		if p.sighting.lossAt.IsZero() {
			return
		}
		st.ReadyStatus, st.ReadySince = string(p.sighting.status), metaTimePtr(p.sighting.since)
		st.ReadyObservedAt = metaTimePtr(p.sighting.condAt)
	})
}

// updateRecord applies change to the record's status and writes it if it
// changed, with the record's resourceVersion as precondition.
func (r *Reconciler) updateRecord(ctx context.Context, rec *v1alpha1.NodeRecovery, change func(*v1alpha1.NodeRecoveryRecordStatus)) error {
	before := rec.DeepCopy()
	change(&rec.Status)
	if equality.Semantic.DeepEqual(before.Status, rec.Status) {
		return nil
	}
	if err := r.host.Status().Patch(ctx, rec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		*rec = *before
		return fmt.Errorf("updating NodeRecovery %s: %w", rec.Name, err)
	}
	return nil
}

// finishRecord closes the record.
func (r *Reconciler) finishRecord(ctx context.Context, rec *v1alpha1.NodeRecovery, reason, msg string) error {
	now := r.now()
	return r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Phase, st.FinishReason, st.Message = v1alpha1.RecoveryPhaseFinished, reason, policystatus.Truncate(msg, 1024)
		st.FinishedAt = metaTimePtr(now)
	})
}

// pruneRecords deletes finished records past the retention period, and the
// oldest beyond the per-member limit.
func (r *Reconciler) pruneRecords(ctx context.Context, finished []*v1alpha1.NodeRecovery) error {
	slices.SortFunc(finished, func(a, b *v1alpha1.NodeRecovery) int {
		return timeOf(b.Status.FinishedAt).Compare(timeOf(a.Status.FinishedAt)) // newest first
	})
	now := r.now()
	for i, rec := range finished {
		if i < r.opts.MaxFinishedRecords && now.Sub(timeOf(rec.Status.FinishedAt)) < r.opts.RecordRetention {
			continue
		}
		uid := rec.UID
		if err := r.host.Delete(ctx, rec, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting expired NodeRecovery %s: %w", rec.Name, err)
		}
	}
	return nil
}
