// Package decisions keeps a FailoverPolicy's recentDecisions list. Node
// recovery and rebalance each write their own decisions into the same list,
// so both merge through here and never drop the other's.
package decisions

import (
	"fmt"
	"slices"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Max is how many decisions status keeps (the API's MaxItems).
const Max = 20

// Merge returns ours and the recorded ones (which include the other
// controller's and, after a restart, our earlier ones), newest first,
// without duplicates, at most Max.
func Merge(ours, recorded []v1alpha1.Decision) []v1alpha1.Decision {
	all := append(slices.Clone(ours), recorded...)
	slices.SortStableFunc(all, func(a, b v1alpha1.Decision) int { return b.Time.Compare(a.Time.Time) })
	out := make([]v1alpha1.Decision, 0, Max)
	seen := map[string]bool{}
	for _, d := range all {
		// Status times have second precision: compare at that precision.
		k := fmt.Sprintf("%d|%s|%s|%s|%s", d.Time.Unix(), d.Cluster, d.Object, d.Action, d.Reason)
		if seen[k] || len(out) == Max {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
