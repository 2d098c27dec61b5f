package rebalance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/policy"
	"github.com/fedfailover/fedfailover/internal/policystatus"
	"github.com/fedfailover/fedfailover/internal/wake"
)

// members is what the reconciler uses of the member connections
// (*member.Cache; tests give a fake).
type members interface {
	KubeFedClusters(ctx context.Context, sel labels.Selector) ([]kubefedv1beta1.KubeFedCluster, error)
	Connected(cluster string) bool
	// Unknown: fedfailover's own view proves nothing about the member
	// (never connected by this process, or its cache still syncing).
	Unknown(cluster string) bool
	GetReader(ctx context.Context, cluster string) (client.Reader, error)
	// PodUsage is the member's pod requests summed per node.
	PodUsage(ctx context.Context, cluster string) (*capacity.Usage, error)
	// Owners reads the member's Deployments and ReplicaSets.
	Owners(ctx context.Context, cluster string) (member.Owners, error)
	Watch(ctx context.Context, cluster string, in member.WatchInput) error
	// Sharded: members are sharded across replicas; HoldsMember: this
	// replica holds the member now; MemberHolder: the replica that does,
	// as this one last saw the member's Lease, and whether it is live.
	Sharded() bool
	HoldsMember(cluster string) bool
	MemberHolder(cluster string) (string, bool)
}

// Reconciler manages one ReplicaSchedulingPreference per request.
type Reconciler struct {
	host client.Client
	// templates reads the federated workloads (newTemplateCache); nil:
	// the host client.
	templates client.Reader
	// templateWait bounds a pass's wait for the templates cache's first
	// list; zero: templateSyncTimeout (tests shorten it).
	templateWait time.Duration
	decoded      decodedWorkloads
	// live reads the API server past the cache (a record just created);
	// nil: the host client alone.
	live    client.Reader
	members members
	// summaries are the members other replicas hold (sharded); nil else.
	summaries *summaryReader
	recorder  recorder.EventRecorder
	opts      Options
	now       func() time.Time
	ctrl      controller.Controller
	store     *policystatus.Store[types.NamespacedName, rspEntry]

	mu  sync.Mutex
	mem map[types.NamespacedName]*memory
	// drains is the drain of each member under maintenance, per RSP, as
	// the last passes planned it (the MemberMaintenance status).
	drains drainStore
	// kubefedViews is kubefed's verdict on each member as last read
	// (kubefedhealth.View), for the messages of the RebalanceSuspended
	// condition.
	kubefedViews sync.Map
}

// memory is what one process keeps per RSP beyond its RebalanceRecord: the
// marks in dry-run (nothing is written), the last reported plan (events on
// transitions only) and the onset of a problem being repaired (metric).
type memory struct {
	dryMarks *contract.RebalanceState
	// rec is the record as this process last wrote it: newer than the
	// cache's until the watch delivers it.
	rec        *v1alpha1.RebalanceRecord
	lastReport string
	// held is why the RSP was last held (events on the transition only).
	held string
	// suspended is the guard's reason last seen (events on transitions only).
	suspended string
	onset     time.Time
	onsetWhy  string
	onsetDone time.Time
	// seen are the member timers of this process's last pass, and the
	// failbacks it wrote since: its own sightings, the only source of the
	// onsets a shift waits on (sightedTimers). A hold clears them: the
	// RSP is not watched over while held.
	seen map[string]contract.MemberTimers
	// breakReady is when this process first saw the current break of a
	// release ready to write (breakOf), on its own clock: the break is
	// written once it has stayed ready for releaseSettle.
	breakReady time.Time
	breakOf    string
	// shortfalls are the members whose readiness series this process
	// set for the RSP, with the policy label it set them under.
	shortfalls map[string]string
}

func (r *Reconciler) memoryOf(key types.NamespacedName) *memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mem[key]
	if m == nil {
		m = &memory{}
		if r.mem == nil {
			r.mem = map[types.NamespacedName]*memory{}
		}
		r.mem[key] = m
	}
	return m
}

// forget drops what this process keeps about an RSP that is gone or
// given back: its memory, its status entry and its series.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.mem, key)
	r.mu.Unlock()
	r.store.Delete(key)
	r.drains.set(key, nil)
	metrics.DeleteRSP(key.Namespace, key.Name)
}

// Reconcile plans one RSP: release it when no policy manages it, hold it
// when the policy that manages it has unusable selectors, else assess each
// member, plan and write the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := r.host.Get(ctx, req.NamespacedName, rsp); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		// The RSP is gone: so is what fedfailover kept about it.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.deleteRecord(ctx, req.NamespacedName)
	}
	sel, err := r.policyFor(ctx, rsp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sel.Held != nil {
		pol := sel.Held.Policy
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("policy", pol.Name))
		r.hold(ctx, pol, rsp, v1alpha1.ReasonInvalidSelector, sel.Held.Err)
		return ctrl.Result{}, nil
	}
	if r.opts.Sharded && !r.opts.ShardedRebalance {
		return r.holdSharded(ctx, sel.Governing, rsp)
	}
	if sel.Governing == nil {
		r.dropShortfalls(req.NamespacedName)  // no policy's N+1 figure any more
		r.drains.set(req.NamespacedName, nil) // nor a drain: a release ignores maintenance
		return r.release(ctx, rsp)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("policy", sel.Governing.Name))
	if sel.Governing.Spec.Paused {
		// Paused: neither planned nor released, whatever state it is in.
		r.hold(ctx, sel.Governing, rsp, v1alpha1.ReasonPaused, errPaused)
		return ctrl.Result{}, nil
	}
	return r.manage(ctx, sel.Governing, rsp)
}

var errPaused = errors.New("the policy is paused (spec.paused)")

var errSharded = errors.New("the manager shards members across replicas (--shard) and each replica sees only the members it holds; " +
	"rebalance is not planned on a partial view: run one replica (or leader election without --shard) to rebalance")

// holdSharded holds an RSP a policy governs (or whose release is on) while
// the manager is sharded: nothing is planned, written or released.
func (r *Reconciler) holdSharded(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference) (ctrl.Result, error) {
	if pol != nil {
		r.hold(ctx, pol, rsp, v1alpha1.ReasonShardedRebalance, errSharded)
		return ctrl.Result{}, nil
	}
	rec, err := r.getRecord(ctx, client.ObjectKeyFromObject(rsp), nil)
	if err != nil || rec == nil || rec.Spec.Released {
		return ctrl.Result{}, err // nothing of fedfailover's to give back
	}
	recorded, err := r.recordedPolicy(ctx, rec.Spec.Policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	mem := r.memoryOf(client.ObjectKeyFromObject(rsp))
	r.mu.Lock()
	first := mem.held != errSharded.Error()
	mem.held = errSharded.Error()
	r.mu.Unlock()
	if first {
		r.reportRelease(ctx, recorded, rsp, v1alpha1.ReasonShardedRebalance, ActionHold, corev1.EventTypeWarning,
			"release held, the RSP left as it is: "+errSharded.Error())
	}
	return ctrl.Result{}, nil
}

// policyFor selects the policy that manages the RSP (internal/policy.ForRSP),
// given the policy recorded on it.
func (r *Reconciler) policyFor(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (policy.Selection, error) {
	var list v1alpha1.FailoverPolicyList
	// The cache's own objects, then copies without status: a policy's
	// status holds an entry per RSP, and deep-copying it in every pass was
	// a tenth of the manager's CPU at the goal size. No pass reads it.
	if err := r.host.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return policy.Selection{}, fmt.Errorf("listing FailoverPolicies: %w", err)
	}
	for i := range list.Items {
		list.Items[i] = withoutStatus(&list.Items[i])
	}
	obj := policy.Object{Labels: rsp.Labels, Namespace: rsp.Namespace}
	if policy.NeedNamespaceLabels(list.Items) {
		ns := &corev1.Namespace{}
		if err := r.host.Get(ctx, client.ObjectKey{Name: rsp.Namespace}, ns); client.IgnoreNotFound(err) != nil {
			return policy.Selection{}, fmt.Errorf("getting namespace %s: %w", rsp.Namespace, err)
		}
		obj.NamespaceLabels = ns.Labels
	}
	owner, err := r.storedPolicy(ctx, rsp)
	if err != nil {
		return policy.Selection{}, err
	}
	return policy.ForRSP(list.Items, obj, owner), nil
}

// withoutStatus copies a policy shared with the cache, leaving out what a
// pass never reads: its status and its managed fields.
func withoutStatus(shared *v1alpha1.FailoverPolicy) v1alpha1.FailoverPolicy {
	meta := shared.ObjectMeta
	meta.ManagedFields = nil
	return v1alpha1.FailoverPolicy{TypeMeta: shared.TypeMeta, ObjectMeta: *meta.DeepCopy(), Spec: *shared.Spec.DeepCopy()}
}

// manage runs one planning pass for a managed RSP.
func (r *Reconciler) manage(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(rsp)
	mem := r.memoryOf(key)
	now := r.now()
	st, err := r.recordedMarks(ctx, rsp, pol, mem, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.missing != "" {
		// fedfailover's own pins without the state that says what they
		// replaced: never adopted as the baseline, never "restored" from
		// a guess. The record's creation or the RSP's next write wakes it.
		r.hold(ctx, pol, rsp, v1alpha1.ReasonStateMissing, errors.New(st.missing))
		return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
	}
	r.mu.Lock()
	mem.held = "" // a later hold is a new transition
	r.mu.Unlock()
	r.reportLoad(ctx, pol, rsp, &st)
	recorded := st.state
	live := specPlacement(rsp)
	m, edited := baselineOf(recorded, live, ownersOf(rsp.ManagedFields), pol.Name)
	switch {
	case edited && shiftedBefore(recorded):
		r.report(ctx, pol, rsp, "", ReasonAdoptedUserEdit, ActionBaselineChanged,
			"spec changed by someone else while managed: their fields are adopted into the baseline", pol.Spec.DryRun)
	case edited:
		ctrl.LoggerFrom(ctx).V(1).Info("Rebalance: spec changed by someone else while at its baseline: the new spec is the baseline")
	}
	w, err := r.loadWorkload(ctx, rsp)
	if err != nil {
		return ctrl.Result{}, err
	}
	in, requeue, onset, err := r.plannerInput(ctx, pol, rsp, m, w, mem, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := planner.Plan(in)
	if wait, ok := r.settled(key, res, now); !ok {
		// A drain's break, like a release's, waits until it has stayed
		// ready for releaseSettle.
		res = settling(rsp, res)
		requeue = wake.Earliest(requeue, now.Add(wait))
	}
	if err := r.apply(ctx, pol, rsp, m, res, mem, &st); err != nil {
		if errors.Is(err, errStale) {
			// The RSP's newer version is on its way through the watch and
			// queues the next pass; this requeue is only a safety net.
			return ctrl.Result{RequeueAfter: staleRequeue, Priority: ptr.To(duePriority)}, nil
		}
		return ctrl.Result{}, err
	}
	r.observeRecovery(mem, in, onset, now)
	r.record(pol, rsp, in, res, m)
	r.recordDrains(key, in, res, pol.Spec.DryRun)
	r.reportSuspension(ctx, pol, rsp, mem, in, res)
	// A periodic resync catches what no watch reports (capacity estimates,
	// kubefed status).
	next := wake.Soonest{}
	next.At(wake.Earliest(requeue, res.RequeueAt))
	// The queue counts RequeueAfter from the end of the pass: counted from
	// its start, a due transition would wait the pass's length again.
	end := r.now()
	return ctrl.Result{RequeueAfter: next.After(end, minRequeue, r.opts.Resync), Priority: ptr.To(wakePriority(next, end, r.opts.Resync))}, nil
}

// duePriority queues a pass that is due at a time-based transition (a
// member failing, pods becoming exhausted, a window ending) ahead of the
// passes events queue: a fan-out over every RSP (a Node change, a member
// connecting) or the manager's initial list (queued at controller-runtime's
// low priority, which a requeue would otherwise inherit) must not delay a
// decision that is due now. Resync passes keep the default priority.
const duePriority = 10

// wakePriority is the queue priority of the pass next schedules.
func wakePriority(next wake.Soonest, now time.Time, resync time.Duration) int {
	if at := next.Time(); !at.IsZero() && at.Sub(now) <= resync {
		return duePriority
	}
	return 0
}

// recordedMarks is the durable state: in dry-run the process memory
// (nothing is written), else the RSP's RebalanceRecord (loadState).
func (r *Reconciler) recordedMarks(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, pol *v1alpha1.FailoverPolicy,
	mem *memory, now time.Time) (stored, error) {
	if pol.Spec.DryRun {
		r.mu.Lock()
		dry := mem.dryMarks.Clone()
		r.mu.Unlock()
		if dry != nil {
			return stored{state: dry}, nil
		}
	}
	return r.loadState(ctx, rsp, mem, now)
}

// plannerInput assesses every selected member and updates the marks.
func (r *Reconciler) plannerInput(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	m *contract.RebalanceState, w workload, mem *memory, now time.Time) (planner.Input, time.Time, onsetInfo, error) {
	spec := *pol.Spec.Rebalance
	names, eligible, err := r.memberNames(ctx, pol, w)
	if err != nil {
		return planner.Input{}, time.Time{}, onsetInfo{}, err
	}
	draining, err := r.drainingMembers(ctx)
	if err != nil {
		return planner.Input{}, time.Time{}, onsetInfo{}, err
	}
	in := planner.Input{
		Baseline: m.Baseline.Clusters, TotalReplicas: m.Baseline.TotalReplicas, Eligible: eligible, Assigned: map[string]int64{},
		Members: map[string]planner.Member{}, Current: rsp.Spec.Clusters, CurrentTotalReplicas: rsp.Spec.TotalReplicas,
		LastChange: timeOf(m.LastChange), Now: now, Spec: spec,
	}
	var requeue time.Time
	var onset onsetInfo
	newMarks := map[string]contract.MemberTimers{}
	r.mu.Lock()
	seen := mem.seen
	r.mu.Unlock()
	for _, name := range sortedKeys(names) {
		obs, err := r.observe(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", name)), name, names[name], rsp.Namespace, w)
		if err != nil {
			return planner.Input{}, time.Time{}, onsetInfo{}, err
		}
		obs.Draining = draining[name]
		a := assess(obs, sightedTimers(m.Members[name], seen[name]), spec, now)
		in.Members[name] = a.Member
		if obs.Healthy && !obs.Unknown {
			in.Assigned[name] = assignedOf(obs)
		}
		if a.Marks != (contract.MemberTimers{}) {
			newMarks[name] = a.Marks
		}
		requeue = wake.Earliest(requeue, a.RequeueAt)
		onset.add(a)
		if a.BackedOff {
			r.report(ctx, pol, rsp, name, ReasonFailbackBackoff, ActionBackoff, fmt.Sprintf(
				"%s ran out of capacity right after a failback: its next failback waits %s (backoff level %d)",
				name, planner.BackedOffWindow(spec.Failback.StabilizationWindow.Get(), a.Marks.Backoff), a.Marks.Backoff), pol.Spec.DryRun)
		}
	}
	if len(newMarks) == 0 {
		newMarks = nil
	}
	m.Members = newMarks
	r.mu.Lock()
	mem.seen = maps.Clone(newMarks) // apply adds failbacks to m.Members only once written
	r.mu.Unlock()
	return in, requeue, onset, nil
}

// minRequeue keeps a transition that is already due from spinning.
const minRequeue = 100 * time.Millisecond

// staleRequeue is the pass after a write refused as stale (the cache lagged
// behind the RSP): short, since a decision may be waiting on it.
const staleRequeue = 200 * time.Millisecond
