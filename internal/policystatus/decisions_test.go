package policystatus

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func d(sec int, obj, action string) v1alpha1.Decision {
	return v1alpha1.Decision{Time: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)), Object: obj, Action: action, Reason: "R"}
}

func TestMergeOrdersAndDeduplicates(t *testing.T) {
	got := MergeDecisions([]v1alpha1.Decision{d(3, "x", "A"), d(2, "y", "A")}, []v1alpha1.Decision{d(2, "y", "A"), d(1, "z", "A")})
	if len(got) != 3 || got[0].Object != "x" || got[1].Object != "y" || got[2].Object != "z" {
		t.Fatalf("merge: %+v", got)
	}
}

func TestMergeKeepsTheOtherControllersDecisions(t *testing.T) {
	theirs := d(0, "Node/n", "TaintedOutOfService")
	ours := d(1, "ReplicaSchedulingPreference/a/b", "Shift")
	got := MergeDecisions([]v1alpha1.Decision{ours}, []v1alpha1.Decision{theirs, ours})
	if len(got) != 2 || got[0].Action != "Shift" || got[1].Action != "TaintedOutOfService" {
		t.Fatalf("merged %+v", got)
	}
}

func TestMergeIsBoundedNewestFirst(t *testing.T) {
	var many []v1alpha1.Decision
	for i := range 30 {
		many = append(many, d(i, "o", "A"))
	}
	got := MergeDecisions(many, nil)
	if len(got) != MaxDecisions || !got[0].Time.Equal(&many[29].Time) || !got[MaxDecisions-1].Time.Equal(&many[30-MaxDecisions].Time) {
		t.Fatalf("bound/order: %d, first %v", len(got), got[0].Time)
	}
}
