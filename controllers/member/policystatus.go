package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policy"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;update;patch

// StatusFieldOwner is the server-side apply field manager of the member
// fields of FailoverPolicy status (members, connectedMembers,
// observedGeneration) and of the MembersConnected and Ready conditions.
// Node recovery and rebalance apply their fields with their own managers,
// so none overwrites another.
const StatusFieldOwner = "fedfailover-members"

// policyStatusReconciler writes status.members, status.connectedMembers,
// the MembersConnected condition and the Ready summary of each
// FailoverPolicy.
type policyStatusReconciler struct {
	client  client.Client
	cache   *Cache
	applier policystatus.Applier
}

func (r *policyStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		if apierrors.IsNotFound(err) {
			r.applier.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	members, cond, overlap := r.desired(ctx, pol)
	extra := append(r.machineEvidence(ctx, pol), permissionDenied(pol, members))
	if err := r.apply(ctx, pol, members, cond, overlap, extra...); err != nil {
		return ctrl.Result{}, err
	}
	// With StatusRefresh set, lastProbeTime goes stale otherwise.
	return ctrl.Result{RequeueAfter: r.cache.opts.StatusRefresh}, nil
}

func (r *policyStatusReconciler) desired(ctx context.Context, pol *v1alpha1.FailoverPolicy) ([]v1alpha1.MemberStatus, metav1.Condition, metav1.Condition) {
	noOverlap := policystatus.Condition(pol, v1alpha1.ConditionOverlapping, metav1.ConditionFalse, v1alpha1.ReasonNoOverlap,
		"no other policy governs node recovery in this policy's members")
	cond := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return policystatus.Condition(pol, v1alpha1.ConditionMembersConnected, status, reason, msg)
	}
	sel, err := policy.Clusters(pol)
	if err != nil {
		return nil, cond(metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector, err.Error()), noOverlap
	}
	kfcs, err := r.cache.KubeFedClusters(ctx, sel)
	if err != nil {
		return nil, cond(metav1.ConditionUnknown, v1alpha1.ReasonListFailed, err.Error()), noOverlap
	}
	overlap := noOverlap
	if o, err := r.overlaps(ctx, pol, kfcs); err != nil {
		overlap = policystatus.Condition(pol, v1alpha1.ConditionOverlapping, metav1.ConditionUnknown, v1alpha1.ReasonListFailed, err.Error())
	} else if len(o) > 0 {
		overlap = policystatus.Condition(pol, v1alpha1.ConditionOverlapping, metav1.ConditionTrue, v1alpha1.ReasonOverlapping,
			"node recovery is governed by another policy (the oldest wins) in "+strings.Join(o, "; "))
	}
	names := make([]string, 0, len(kfcs))
	for _, k := range kfcs {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	members := r.cache.MemberStatuses(ctx, names)
	r.keepFreshProbeTimes(pol, members)

	var down []string
	elsewhere := 0
	for _, m := range members {
		switch {
		case m.Reason == ReasonNotOwned:
			// Sharded: the owner's connection is not visible from here.
			elsewhere++
		case !m.Connected:
			down = append(down, fmt.Sprintf("%s (%s)", m.Name, m.Reason))
		}
	}
	switch {
	case len(members) == 0:
		return members, cond(metav1.ConditionFalse, v1alpha1.ReasonNoMembers, "no KubeFedCluster matches "+policy.FieldClusterSelector), overlap
	case len(down) == 0 && elsewhere > 0:
		return members, cond(metav1.ConditionTrue, v1alpha1.ReasonAllConnected, fmt.Sprintf(
			"all %d members owned by this replica connected; %d owned by other replicas (see their fedfailover_member_connected)",
			len(members)-elsewhere, elsewhere)), overlap
	case len(down) == 0:
		return members, cond(metav1.ConditionTrue, v1alpha1.ReasonAllConnected, fmt.Sprintf("all %d members connected", len(members))), overlap
	}
	return members, cond(metav1.ConditionFalse, v1alpha1.ReasonMembersNotConnected,
		fmt.Sprintf("%d of %d members not connected: %s", len(down), len(members), strings.Join(down, ", "))), overlap
}

// permissionDenied is the MemberPermissionDenied condition: True, naming
// each selected member that refuses requests fedfailover makes and what
// it refuses (the member's message), so a missing permission is never a
// silent failure.
func permissionDenied(pol *v1alpha1.FailoverPolicy, members []v1alpha1.MemberStatus) metav1.Condition {
	var denied []string
	for _, m := range members {
		if m.Reason == ReasonMemberPermissionDenied {
			denied = append(denied, fmt.Sprintf("member %s: %s", m.Name, m.Message))
		}
	}
	if len(denied) == 0 {
		return policystatus.Condition(pol, v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionFalse, v1alpha1.ReasonNoPermissionDenied,
			"no selected member refuses a request of fedfailover's")
	}
	return policystatus.Condition(pol, v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionTrue, v1alpha1.ReasonMemberPermissionDenied,
		strings.Join(denied, "; "))
}

// machineEvidence is the MachineEvidenceUnavailable condition of a policy
// with node recovery (none otherwise): True, naming each selected member
// whose Cluster API Cluster cannot be trusted and why, so that "no Machine
// evidence" is never silent.
func (r *policyStatusReconciler) machineEvidence(ctx context.Context, pol *v1alpha1.FailoverPolicy) []metav1.Condition {
	if !policy.Enabled(pol, policy.NodeRecovery) {
		return nil
	}
	cond := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{policystatus.Condition(pol, v1alpha1.ConditionMachineEvidenceUnavailable, status, reason, msg)}
	}
	sel, err := policy.Clusters(pol)
	if err != nil {
		return cond(metav1.ConditionUnknown, v1alpha1.ReasonInvalidSelector, err.Error())
	}
	kfcs, err := r.cache.KubeFedClusters(ctx, sel)
	if err != nil {
		return cond(metav1.ConditionUnknown, v1alpha1.ReasonListFailed, err.Error())
	}
	problems, err := r.cache.CAPIProblems(ctx, kfcs)
	switch {
	case errors.Is(err, ErrCAPIUnavailable):
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCAPIClustersResolved, "the host cluster has no Cluster API CRDs: no Machine evidence exists")
	case err != nil:
		return cond(metav1.ConditionUnknown, v1alpha1.ReasonListFailed, err.Error())
	case len(problems) == 0:
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCAPIClustersResolved,
			"each selected member has one verified Cluster API Cluster, or none")
	}
	parts := make([]string, 0, len(problems))
	for _, p := range problems {
		parts = append(parts, fmt.Sprintf("member %s: %s", p.Member, p.Err.Message))
	}
	return cond(metav1.ConditionTrue, problems[0].Err.Reason, "no Machine evidence can be used for "+strings.Join(parts, "; "))
}

// overlaps names the selected members whose node recovery another policy
// governs (internal/policy.Overlaps).
func (r *policyStatusReconciler) overlaps(ctx context.Context, pol *v1alpha1.FailoverPolicy, kfcs []kubefedv1beta1.KubeFedCluster) ([]string, error) {
	if !policy.Enabled(pol, policy.NodeRecovery) {
		return nil, nil
	}
	var list v1alpha1.FailoverPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing FailoverPolicies: %w", err)
	}
	members := make([]policy.Member, 0, len(kfcs))
	for i := range kfcs {
		members = append(members, policy.Member{Name: kfcs[i].Name, Labels: kfcs[i].Labels})
	}
	slices.SortFunc(members, func(a, b policy.Member) int { return strings.Compare(a.Name, b.Name) })
	return policy.Overlaps(pol, list.Items, members), nil
}

// keepFreshProbeTimes reuses the recorded lastProbeTime, so a probe alone
// does not rewrite every policy: while the rest of the member's entry is
// unchanged or, with StatusRefresh set, while the recorded time is younger
// than that.
func (r *policyStatusReconciler) keepFreshProbeTimes(pol *v1alpha1.FailoverPolicy, members []v1alpha1.MemberStatus) {
	keepProbeTimes(pol.Status.Members, members, r.cache.opts.StatusRefresh)
}

// keepProbeTimes is keepFreshProbeTimes over the recorded entries.
func keepProbeTimes(recorded, members []v1alpha1.MemberStatus, refresh time.Duration) {
	for i := range members {
		m := &members[i]
		for _, old := range recorded {
			if old.Name != m.Name || old.LastProbeTime == nil || m.LastProbeTime == nil {
				continue
			}
			keep := sameButProbeTime(old, *m)
			if refresh > 0 {
				d := m.LastProbeTime.Sub(old.LastProbeTime.Time)
				keep = d >= 0 && d < refresh
			}
			if keep {
				m.LastProbeTime = old.LastProbeTime
			}
		}
	}
}

// sameButProbeTime: a and b differ in lastProbeTime at most.
func sameButProbeTime(a, b v1alpha1.MemberStatus) bool {
	a.LastProbeTime, b.LastProbeTime = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// apply writes the member fields and Ready with server-side apply. Ready
// summarises this controller's condition and the other controllers' (see
// policystatus.Ready). A status this controller already applied to the
// policy as it is now is not sent again (policystatus.Applier).
func (r *policyStatusReconciler) apply(ctx context.Context, pol *v1alpha1.FailoverPolicy, members []v1alpha1.MemberStatus,
	cond, overlap metav1.Condition, extra ...metav1.Condition) error {
	var connected int32
	for _, m := range members {
		if m.Connected {
			connected++
		}
	}
	conds := slices.Clone(pol.Status.Conditions)
	for _, c := range append([]metav1.Condition{cond}, extra...) {
		meta.SetStatusCondition(&conds, c)
	}
	status := v1alpha1.FailoverPolicyStatus{
		ObservedGeneration: pol.Generation,
		Members:            members,
		ConnectedMembers:   connected,
		Conditions:         policystatus.Conditions(pol, append([]metav1.Condition{cond, overlap, policystatus.Ready(pol, conds)}, extra...)...),
	}
	_, err := r.applier.Apply(ctx, r.client, pol, StatusFieldOwner, &status)
	return err
}

// allPolicies maps any member change to every FailoverPolicy: there are few.
func (r *policyStatusReconciler) allPolicies(ctx context.Context) []reconcile.Request {
	var list v1alpha1.FailoverPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FailoverPolicies failed")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}
