package cli

import (
	"testing"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

// Clusters print what a reader compares, by value and sorted: weight, and
// min and max when set.
func TestFormatClustersPrintsValues(t *testing.T) {
	two := int64(2)
	got := FormatClusters(map[string]fedschedv1a1.ClusterPreferences{"member2": {Weight: 2, MinReplicas: 2, MaxReplicas: &two}, "member1": {Weight: 4}})
	if want := "member1{w=4} member2{w=2,min=2,max=2}"; got != want {
		t.Fatalf("FormatClusters = %q, want %q", got, want)
	}
}
