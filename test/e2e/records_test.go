//go:build e2e

package e2e

import (
	"context"
	"fmt"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// nodeRecords lists the host's NodeRecovery records of one member node:
// the active one (nil if none) and the finished ones.
func nodeRecords(ctx context.Context, cluster, node string) (active *v1alpha1.NodeRecovery, finished []v1alpha1.NodeRecovery, err error) {
	var list v1alpha1.NodeRecoveryList
	if err := nrHostCl.List(ctx, &list); err != nil {
		return nil, nil, fmt.Errorf("listing NodeRecovery records: %w", err)
	}
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.Cluster != cluster || r.Spec.Node != node {
			continue
		}
		if r.Status.Phase == v1alpha1.RecoveryPhaseFinished {
			finished = append(finished, *r)
		} else {
			active = r
		}
	}
	return active, finished, nil
}

// acted: the record says fedfailover decided an action (intent written).
func acted(r *v1alpha1.NodeRecovery) bool { return r != nil && r.Status.IntentAt != nil }

func describeRecord(r *v1alpha1.NodeRecovery) string {
	if r == nil {
		return "no active record"
	}
	return fmt.Sprintf("record %s phase=%s method=%s evidence=%s message=%q", r.Name, r.Status.Phase, r.Status.Method, r.Status.Evidence, r.Status.Message)
}
