package member

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// A probe alone does not rewrite a policy's status: without StatusRefresh
// the recorded lastProbeTime stays while the rest of the member's entry is
// unchanged, and moves with it; with StatusRefresh, it moves once older.
func TestKeepProbeTimes(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { tm := metav1.NewTime(t0.Add(d)); return &tm }
	entry := func(probed time.Duration, ready int32) v1alpha1.MemberStatus {
		return v1alpha1.MemberStatus{Name: "member1", Connected: true, Reason: ReasonConnected, NodesReady: ready, NodesTotal: 3, LastProbeTime: at(probed)}
	}
	recorded := []v1alpha1.MemberStatus{entry(0, 3)}
	for _, tc := range []struct {
		name    string
		now     v1alpha1.MemberStatus
		refresh time.Duration
		want    time.Duration
	}{
		{"unchanged an hour later", entry(time.Hour, 3), 0, 0},
		{"a node not Ready", entry(time.Hour, 2), 0, time.Hour},
		{"with a refresh, younger", entry(30*time.Second, 2), time.Minute, 0},
		{"with a refresh, older", entry(2*time.Minute, 3), time.Minute, 2 * time.Minute},
	} {
		got := []v1alpha1.MemberStatus{tc.now}
		keepProbeTimes(recorded, got, tc.refresh)
		if !got[0].LastProbeTime.Equal(at(tc.want)) {
			t.Errorf("%s: lastProbeTime %v, want %v", tc.name, got[0].LastProbeTime, at(tc.want))
		}
	}
}
