package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDeleteClusterRemovesOnlyThatCluster(t *testing.T) {
	MemberConnected.WithLabelValues("a").Set(1)
	MemberConnected.WithLabelValues("b").Set(1)
	MemberCacheObjects.WithLabelValues("a", "Pod").Set(3)
	MemberProbeDuration.WithLabelValues("a", ProbeSuccess).Observe(0.01)
	MemberDisconnects.WithLabelValues("a", "ProbeFailed").Inc()
	FailoverShortfall.WithLabelValues("p", "ns", "web", "a").Set(2)
	FailoverShortfall.WithLabelValues("p", "ns", "web", "b").Set(1)

	DeleteCluster("a")

	for name, c := range map[string]int{
		"connected":  testutil.CollectAndCount(MemberConnected),
		"objects":    testutil.CollectAndCount(MemberCacheObjects),
		"probe":      testutil.CollectAndCount(MemberProbeDuration),
		"disconnect": testutil.CollectAndCount(MemberDisconnects),
		"shortfall":  testutil.CollectAndCount(FailoverShortfall),
	} {
		want := 0
		if name == "connected" || name == "shortfall" {
			want = 1 // b's series stays
		}
		if c != want {
			t.Errorf("%s: %d series left, want %d", name, c, want)
		}
	}
	if v := testutil.ToFloat64(MemberConnected.WithLabelValues("b")); v != 1 {
		t.Errorf("b's series changed to %v", v)
	}
	FailoverShortfall.Reset()
}
