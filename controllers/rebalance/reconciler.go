package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/wake"
)

// Reconciler manages one ReplicaSchedulingPreference per request.
type Reconciler struct {
	host     client.Client
	members  *member.Cache
	recorder recorder.EventRecorder
	opts     Options
	now      func() time.Time
	ctrl     controller.Controller
	store    *store

	mu  sync.Mutex
	mem map[types.NamespacedName]*memory
}

// memory is what one process keeps per RSP beyond the annotation: the
// marks in dry-run (nothing is written), the last reported plan (events on
// transitions only) and the onset of a problem being repaired (metric).
type memory struct {
	dryMarks   *contract.RebalanceState
	lastReport string
	onset      time.Time
	onsetWhy   string
	onsetDone  time.Time
}

func (r *Reconciler) memoryOf(key types.NamespacedName) *memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mem[key]
	if m == nil {
		m = &memory{}
		r.mem[key] = m
	}
	return m
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.mem, key)
	r.mu.Unlock()
	r.store.forget(key)
}

// Reconcile plans one RSP: release it when no policy manages it, else
// assess each member, plan and write the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := r.host.Get(ctx, req.NamespacedName, rsp); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pol, err := r.policyFor(ctx, rsp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pol == nil {
		return ctrl.Result{}, r.release(ctx, rsp)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("policy", pol.Name))
	return r.manage(ctx, pol, rsp)
}

// policyFor returns the enabled policy whose rebalance selector matches the
// RSP; when several do, the oldest (then by name) wins, so the choice is
// stable.
func (r *Reconciler) policyFor(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (*v1alpha1.FailoverPolicy, error) {
	var list v1alpha1.FailoverPolicyList
	if err := r.host.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing FailoverPolicies: %w", err)
	}
	var match []*v1alpha1.FailoverPolicy
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Spec.Rebalance == nil || !p.Spec.Rebalance.Enabled {
			continue
		}
		ok, err := r.selects(ctx, p.Spec.Rebalance.ReplicaSchedulingPreferences, rsp)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Ignoring policy with an invalid RSP selector", "policy", p.Name, "error", err.Error())
			continue
		}
		if ok {
			match = append(match, p)
		}
	}
	if len(match) == 0 {
		return nil, nil
	}
	slices.SortFunc(match, func(a, b *v1alpha1.FailoverPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmpString(a.Name, b.Name)
	})
	return match[0], nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// manage runs one planning pass for a managed RSP.
func (r *Reconciler) manage(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(rsp)
	mem := r.memoryOf(key)
	recorded, err := r.recordedMarks(rsp, pol, mem)
	if err != nil {
		return ctrl.Result{}, err
	}
	live := specPlacement(rsp)
	m, edited := baselineOf(recorded, live, pol.Name)
	if edited {
		r.report(ctx, pol, rsp, "", "AdoptedUserEdit", "BaselineChanged",
			"spec changed by someone else while managed: it is the new baseline", pol.Spec.DryRun)
	}
	w, err := r.loadWorkload(ctx, rsp)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	in, requeue, onset, err := r.plannerInput(ctx, pol, rsp, m, w, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := planner.Plan(in)
	if err := r.apply(ctx, pol, rsp, m, res, mem); err != nil {
		if errors.Is(err, errStale) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	r.observeRecovery(mem, in, onset, now)
	r.record(pol, rsp, res, m)
	// A periodic resync catches what no watch reports (capacity estimates,
	// kubefed status).
	next := wake.Soonest{}
	next.At(wake.Earliest(requeue, res.RequeueAt))
	return ctrl.Result{RequeueAfter: next.After(now, minRequeue, r.opts.Resync)}, nil
}

// recordedMarks is the durable state: in dry-run the process memory (the
// RSP is never written), else the annotation.
func (r *Reconciler) recordedMarks(rsp *fedschedv1a1.ReplicaSchedulingPreference, pol *v1alpha1.FailoverPolicy, mem *memory) (*contract.RebalanceState, error) {
	if pol.Spec.DryRun {
		r.mu.Lock()
		defer r.mu.Unlock()
		if mem.dryMarks != nil {
			return mem.dryMarks.Clone(), nil
		}
	}
	return contract.DecodeRebalanceState(rsp.Annotations)
}

// plannerInput assesses every selected member and updates the marks.
func (r *Reconciler) plannerInput(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	m *contract.RebalanceState, w workload, now time.Time) (planner.Input, time.Time, onsetInfo, error) {
	spec := *pol.Spec.Rebalance
	names, err := r.memberNames(ctx, pol)
	if err != nil {
		return planner.Input{}, time.Time{}, onsetInfo{}, err
	}
	in := planner.Input{
		Baseline: m.Baseline.Clusters, TotalReplicas: m.Baseline.TotalReplicas,
		Members: map[string]planner.Member{}, Current: rsp.Spec.Clusters, CurrentTotalReplicas: rsp.Spec.TotalReplicas,
		LastChange: timeOf(m.LastChange), Now: now, Spec: spec,
	}
	var requeue time.Time
	var onset onsetInfo
	newMarks := map[string]contract.MemberTimers{}
	for _, name := range sortedKeys(names) {
		obs, err := r.observe(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", name)), name, names[name], rsp.Namespace, w)
		if err != nil {
			return planner.Input{}, time.Time{}, onsetInfo{}, err
		}
		a := assess(obs, m.Members[name], spec, now)
		in.Members[name] = a.Member
		if a.Marks != (contract.MemberTimers{}) {
			newMarks[name] = a.Marks
		}
		requeue = wake.Earliest(requeue, a.RequeueAt)
		onset.add(a)
	}
	if len(newMarks) == 0 {
		newMarks = nil
	}
	m.Members = newMarks
	return in, requeue, onset, nil
}

// minRequeue keeps a transition that is already due from spinning.
const minRequeue = 100 * time.Millisecond
