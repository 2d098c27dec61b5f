package rebalance

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/metrics"
)

// summaryCollector deletes the MemberSummary of a member that left the
// federation. It runs on the leader, the one reader of summaries. The
// member's absence is read live (a KubeFedCluster not yet in a cache is
// not gone), and only the summary as read is deleted (UID and
// resourceVersion preconditions): a member that joined again meanwhile
// keeps its new holder's summary. Deleting one decides nothing about the
// member: a missing summary reads as Unknown, as an unrenewed one does.
type summaryCollector struct {
	summaries client.Reader // the summary cache
	writer    client.Writer
	live      client.Reader // the host API server, past any cache
	kubefedNS string
}

func (g *summaryCollector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sum := &v1alpha1.MemberSummary{}
	if err := g.summaries.Get(ctx, req.NamespacedName, sum); err != nil || sum.DeletionTimestamp != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	kfc := &kubefedv1beta1.KubeFedCluster{}
	err := g.live.Get(ctx, client.ObjectKey{Namespace: g.kubefedNS, Name: sum.Spec.Member}, kfc)
	switch {
	case err == nil:
		return ctrl.Result{}, nil // still joined
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("reading KubeFedCluster %s: %w", sum.Spec.Member, err)
	}
	err = g.writer.Delete(ctx, sum, client.Preconditions{UID: &sum.UID, ResourceVersion: &sum.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		// A conflict: written since it was read; the next pass reads it again.
		return ctrl.Result{}, fmt.Errorf("deleting MemberSummary %s of a member that left: %w", sum.Name, err)
	}
	metrics.ShardSummariesDeleted.Inc()
	metrics.ShardSummaryUnknown.DeleteLabelValues(sum.Spec.Member)
	ctrl.LoggerFrom(ctx).Info("Deleted the MemberSummary of a member that left the federation",
		"cluster", sum.Spec.Member, "holder", sum.Spec.Holder)
	return ctrl.Result{}, nil
}
