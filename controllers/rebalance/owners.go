package rebalance

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// Who changed what in an RSP spec is told by server-side apply field
// ownership (metadata.managedFields), not by comparing with what
// fedfailover recorded: a field fedfailover wrote and nobody else touched
// is fedfailover's own pin, whatever the record says.

// spec field paths as owners() names them: "totalReplicas",
// "clusters/<name>" and "clusters/<name>/<field>".
const (
	pathTotal    = "totalReplicas"
	pathClusters = "clusters/"
)

// fieldOwners says, per spec field path, whether fedfailover's field
// manager owns it and whether any other manager does.
type fieldOwners struct{ ours, others map[string]bool }

// ownersOf reads the RSP's managedFields. Entries that cannot be decoded
// are skipped: they then count as owned by no one.
func ownersOf(entries []metav1.ManagedFieldsEntry) fieldOwners {
	o := fieldOwners{ours: map[string]bool{}, others: map[string]bool{}}
	for _, e := range entries {
		if e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		into := o.others
		if e.Manager == FieldOwner {
			into = o.ours
		}
		spec, _ := fields["f:spec"].(map[string]any)
		if _, ok := spec["f:totalReplicas"]; ok {
			into[pathTotal] = true
		}
		clusters, _ := spec["f:clusters"].(map[string]any)
		for k, v := range clusters {
			name, ok := strings.CutPrefix(k, "f:")
			if !ok {
				continue
			}
			into[pathClusters+name] = true
			sub, _ := v.(map[string]any)
			for f := range sub {
				if field, ok := strings.CutPrefix(f, "f:"); ok {
					into[pathClusters+name+"/"+field] = true
				}
			}
		}
	}
	return o
}

// changedBySomeoneElse: a field that differs from what fedfailover wrote is
// the user's when another manager owns it now, or when no one does (it was
// removed, which fedfailover never does to a field it writes).
func (o fieldOwners) changedBySomeoneElse(path string) bool {
	return o.others[path] || !o.ours[path]
}

// adoptEdits is the new baseline: base with each field someone else
// changed since fedfailover wrote applied taken from live. fedfailover's
// own pins (a failed member's maxReplicas 0, a raised totalReplicas) are
// never taken; the user re-applying the baseline changes nothing.
func adoptEdits(base, applied, live contract.Placement, o fieldOwners) contract.Placement {
	out := base.Normalize()
	if live.TotalReplicas != applied.TotalReplicas && o.changedBySomeoneElse(pathTotal) {
		out.TotalReplicas = live.TotalReplicas
	}
	names := map[string]bool{}
	for n := range applied.Clusters {
		names[n] = true
	}
	for n := range live.Clusters {
		names[n] = true
	}
	for n := range names {
		a, inApplied := applied.Clusters[n]
		l, inLive := live.Clusters[n]
		switch {
		case !inApplied:
			out.Clusters = withCluster(out.Clusters, n, l)
		case !inLive:
			delete(out.Clusters, n)
		default:
			if b, changed := adoptCluster(out.Clusters[n], a, l, pathClusters+n+"/", o); changed {
				out.Clusters = withCluster(out.Clusters, n, b)
			}
		}
	}
	return out.Normalize()
}

// adoptCluster takes from live the fields of one cluster entry that
// someone else changed.
func adoptCluster(b, a, l fedschedv1a1.ClusterPreferences, prefix string, o fieldOwners) (fedschedv1a1.ClusterPreferences, bool) {
	var changed bool
	if l.Weight != a.Weight && o.changedBySomeoneElse(prefix+"weight") {
		b.Weight, changed = l.Weight, true
	}
	if l.MinReplicas != a.MinReplicas && o.changedBySomeoneElse(prefix+"minReplicas") {
		b.MinReplicas, changed = l.MinReplicas, true
	}
	if !equalMax(l.MaxReplicas, a.MaxReplicas) && o.changedBySomeoneElse(prefix+"maxReplicas") {
		b.MaxReplicas, changed = l.MaxReplicas, true
	}
	return b, changed
}

func withCluster(m map[string]fedschedv1a1.ClusterPreferences, n string, p fedschedv1a1.ClusterPreferences) map[string]fedschedv1a1.ClusterPreferences {
	if m == nil {
		m = map[string]fedschedv1a1.ClusterPreferences{}
	}
	m[n] = *p.DeepCopy()
	return m
}

func equalMax(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
