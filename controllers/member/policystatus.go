package member

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;update;patch

// StatusFieldOwner is the server-side apply field manager of the member
// fields of FailoverPolicy status. Other controllers that fill other fields
// of status.members[] (lostNodes, fencedNodes, stormActive) apply them with
// their own field manager, so neither overwrites the other.
const StatusFieldOwner = "fedfailover-members"

// Condition reasons of MembersConnected.
const (
	ReasonAllConnected     = "AllConnected"
	ReasonSomeDisconnected = "MembersNotConnected"
	ReasonNoMembers        = "NoMembers"
	ReasonInvalidSelector  = "InvalidClusterSelector"
)

// policyStatusReconciler writes status.members, status.connectedMembers and
// the MembersConnected condition of each FailoverPolicy.
type policyStatusReconciler struct {
	client  client.Client
	kubefed client.Reader
	cache   *Cache
}

func (r *policyStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	members, cond := r.desired(ctx, pol)
	if err := r.apply(ctx, pol, members, cond); err != nil {
		return ctrl.Result{}, err
	}
	// lastProbeTime goes stale otherwise.
	return ctrl.Result{RequeueAfter: r.cache.opts.StatusRefresh}, nil
}

func (r *policyStatusReconciler) desired(ctx context.Context, pol *v1alpha1.FailoverPolicy) ([]v1alpha1.MemberStatus, metav1.Condition) {
	cond := metav1.Condition{Type: v1alpha1.ConditionMembersConnected, ObservedGeneration: pol.Generation}
	sel := labels.Everything()
	if pol.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(pol.Spec.ClusterSelector)
		if err != nil {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalidSelector, err.Error()
			return nil, cond
		}
		sel = s
	}
	var kfcs kubefedv1beta1.KubeFedClusterList
	if err := r.kubefed.List(ctx, &kfcs, client.InNamespace(r.cache.opts.Namespace),
		client.MatchingLabelsSelector{Selector: sel}); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, "ListFailed", err.Error()
		return nil, cond
	}
	names := make([]string, 0, len(kfcs.Items))
	for _, k := range kfcs.Items {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	members := r.cache.MemberStatuses(ctx, names)
	r.keepFreshProbeTimes(pol, members)

	var down []string
	for _, m := range members {
		if !m.Connected {
			down = append(down, fmt.Sprintf("%s (%s)", m.Name, m.Reason))
		}
	}
	switch {
	case len(members) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonNoMembers, "no KubeFedCluster matches clusterSelector"
	case len(down) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonAllConnected,
			fmt.Sprintf("all %d members connected", len(members))
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonSomeDisconnected
		cond.Message = fmt.Sprintf("%d of %d members not connected: %s", len(down), len(members), strings.Join(down, ", "))
	}
	return members, cond
}

// readyCondition says whether the policy is being enforced: admission has
// already validated it, so it is Ready unless it selects no member or its
// selector cannot be used. Disconnected members are MembersConnected's news.
func readyCondition(pol *v1alpha1.FailoverPolicy, members metav1.Condition) metav1.Condition {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: pol.Generation,
		Status: metav1.ConditionTrue, Reason: "Enforcing", Message: "policy is enforced on its members"}
	switch members.Reason {
	case ReasonInvalidSelector, ReasonNoMembers, "ListFailed":
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, members.Reason, members.Message
	}
	if pol.Spec.DryRun {
		ready.Message = "dry run: decisions are reported, nothing is changed"
	}
	return ready
}

// keepFreshProbeTimes reuses the recorded lastProbeTime while it is younger
// than StatusRefresh, so a probe alone does not rewrite every policy.
func (r *policyStatusReconciler) keepFreshProbeTimes(pol *v1alpha1.FailoverPolicy, members []v1alpha1.MemberStatus) {
	for i := range members {
		m := &members[i]
		for _, old := range pol.Status.Members {
			if old.Name != m.Name || old.LastProbeTime == nil || m.LastProbeTime == nil {
				continue
			}
			if d := m.LastProbeTime.Sub(old.LastProbeTime.Time); d >= 0 && d < r.cache.opts.StatusRefresh {
				m.LastProbeTime = old.LastProbeTime
			}
		}
	}
}

// apply writes the member fields with server-side apply. An unchanged
// status is a no-op for the API server.
func (r *policyStatusReconciler) apply(ctx context.Context, pol *v1alpha1.FailoverPolicy, members []v1alpha1.MemberStatus, cond metav1.Condition) error {
	conds := slices.Clone(pol.Status.Conditions)
	meta.SetStatusCondition(&conds, cond) // keeps lastTransitionTime unless the status flips
	var connected int32
	for _, m := range members {
		if m.Connected {
			connected++
		}
	}
	meta.SetStatusCondition(&conds, readyCondition(pol, cond))
	status := v1alpha1.FailoverPolicyStatus{
		ObservedGeneration: pol.Generation,
		Members:            members,
		ConnectedMembers:   connected,
		Conditions: []metav1.Condition{*meta.FindStatusCondition(conds, cond.Type),
			*meta.FindStatusCondition(conds, v1alpha1.ConditionReady)},
	}
	return policystatus.Apply(ctx, r.client, pol.Name, StatusFieldOwner, &status)
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
