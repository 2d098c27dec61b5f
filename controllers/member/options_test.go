package member

import (
	"testing"
	"time"
)

// A member whose API server died (connections refused at once) is torn
// down after FailureThreshold probes; with the API's default
// clusterFailedAfter (20 s) on top, the replicas must still leave it well
// within the 30 s member-failure target.
func TestDefaultProbesNoticeADeadMemberQuickly(t *testing.T) {
	o := Options{}.withDefaults()
	const clusterFailedAfter, kubefedAndPods = 20 * time.Second, 5 * time.Second
	teardown := time.Duration(o.FailureThreshold) * o.ProbePeriod
	if total := teardown + clusterFailedAfter + kubefedAndPods; total > 30*time.Second {
		t.Errorf("teardown within %s (%d probes every %s): replicas move after up to %s, want <= 30s",
			teardown, o.FailureThreshold, o.ProbePeriod, total)
	}
	if o.ProbeTimeout > o.ProbePeriod*2 {
		t.Errorf("probe timeout %s longer than two periods (%s): a silent member would take too long", o.ProbeTimeout, o.ProbePeriod)
	}
	if o.RetryPeriod != o.ProbePeriod {
		t.Errorf("retry every %s, want the probe period %s", o.RetryPeriod, o.ProbePeriod)
	}
}
