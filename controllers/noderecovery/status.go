package noderecovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// StatusFieldOwner is the server-side apply field manager of the node
// recovery fields of FailoverPolicy status: recoveries, recentDecisions and
// the StormActive and FencingBlocked conditions. The member controller
// applies its own fields with another manager, so neither overwrites the
// other.
const StatusFieldOwner = "fedfailover-noderecovery"

// Condition reasons.
const (
	ReasonStormActive     = "StormActive"
	ReasonNoStorm         = "NoStorm"
	ReasonNoFencingEvid   = "NoFencingEvidence"
	ReasonAllFenceable    = "NoBlockedNodes"
	maxRecoveriesInStatus = 256
)

// statusReconciler writes the node recovery part of each policy's status
// from the member passes' reports.
type statusReconciler struct {
	client client.Client
	store  *store
	resync time.Duration
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	reps, ours := r.store.snapshot(pol.Name)
	status := desiredStatus(pol, reps, ours)
	if err := policystatus.Apply(ctx, r.client, pol.Name, StatusFieldOwner, &status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.resync}, nil
}

// desiredStatus builds only the fields this controller owns.
func desiredStatus(pol *v1alpha1.FailoverPolicy, reps map[string]memberReport, ours []v1alpha1.Decision) v1alpha1.FailoverPolicyStatus {
	clusters := make([]string, 0, len(reps))
	for c := range reps {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	var recs []v1alpha1.NodeRecoveryStatus
	var storms, blocked []string
	for _, c := range clusters {
		rep := reps[c]
		recs = append(recs, rep.Recoveries...)
		if rep.Storm {
			storms = append(storms, rep.StormMessage)
		}
		for _, rec := range rep.Recoveries {
			if rec.Phase == v1alpha1.RecoveryPhaseBlocked {
				blocked = append(blocked, fmt.Sprintf("%s/%s: %s", rec.Cluster, rec.Node, rec.Message))
			}
		}
	}
	if len(recs) > maxRecoveriesInStatus {
		recs = recs[:maxRecoveriesInStatus]
	}
	storm := metav1.Condition{Type: v1alpha1.ConditionStormActive, Status: metav1.ConditionFalse, Reason: ReasonNoStorm,
		Message: "no member has more lost nodes than maxUnhealthy", ObservedGeneration: pol.Generation}
	if len(storms) > 0 {
		storm.Status, storm.Reason, storm.Message = metav1.ConditionTrue, ReasonStormActive, truncate(strings.Join(storms, "; "), 32768)
	}
	block := metav1.Condition{Type: v1alpha1.ConditionFencingBlocked, Status: metav1.ConditionFalse, Reason: ReasonAllFenceable,
		Message: "no lost node is waiting for fencing evidence", ObservedGeneration: pol.Generation}
	if len(blocked) > 0 {
		block.Status, block.Reason, block.Message = metav1.ConditionTrue, ReasonNoFencingEvid, truncate(strings.Join(blocked, "; "), 32768)
	}
	conds := slices.Clone(pol.Status.Conditions)
	meta.SetStatusCondition(&conds, storm) // keeps lastTransitionTime unless the status flips
	meta.SetStatusCondition(&conds, block)
	return v1alpha1.FailoverPolicyStatus{
		Recoveries:      recs,
		RecentDecisions: policystatus.MergeDecisions(ours, pol.Status.RecentDecisions),
		Conditions: []metav1.Condition{*meta.FindStatusCondition(conds, storm.Type),
			*meta.FindStatusCondition(conds, block.Type)},
	}
}
