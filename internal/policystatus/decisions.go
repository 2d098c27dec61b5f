// Package policystatus writes FailoverPolicy status the way every
// fedfailover controller shares it: each applies only the fields it owns,
// with its own field manager, and the recentDecisions list that node
// recovery and rebalance both write is merged, never overwritten.
package policystatus

import (
	"fmt"
	"slices"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// MaxDecisions is how many decisions status keeps (the API's MaxItems).
const MaxDecisions = 20

// MergeDecisions returns ours and the recorded ones (which include the other
// controller's and, after a restart, our earlier ones), newest first,
// without duplicates, at most MaxDecisions.
func MergeDecisions(ours, recorded []v1alpha1.Decision) []v1alpha1.Decision {
	all := append(slices.Clone(ours), recorded...)
	slices.SortStableFunc(all, func(a, b v1alpha1.Decision) int { return b.Time.Compare(a.Time.Time) })
	out := make([]v1alpha1.Decision, 0, MaxDecisions)
	seen := map[string]bool{}
	for _, d := range all {
		// Status times have second precision: compare at that precision.
		k := fmt.Sprintf("%d|%s|%s|%s|%s", d.Time.Unix(), d.Cluster, d.Object, d.Action, d.Reason)
		if seen[k] || len(out) == MaxDecisions {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
