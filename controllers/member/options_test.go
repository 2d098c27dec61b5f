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

// Every member write is cut before another replica may take the member
// over: the default write timeout is shorter than the gap between the
// renew deadline and the Lease duration (the shard Lease's, or unsharded
// the leader election's), and a longer one is refused.
func TestWriteTimeoutIsShorterThanTheLeaseGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		gap  time.Duration
	}{
		{"unsharded: the leader election's 15s - 10s", Options{}, 5 * time.Second},
		{"sharded, default timings", Options{Shard: ShardOptions{Namespace: "ns"}}, 5 * time.Second},
		{"sharded, 4s - 3s", Options{Shard: ShardOptions{Namespace: "ns", LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second}}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o.withDefaults()
			if o.WriteTimeout <= 0 || o.WriteTimeout >= tc.gap {
				t.Errorf("default write timeout %s, want within (0, %s)", o.WriteTimeout, tc.gap)
			}
			if err := o.checkWriteTimeout(); err != nil {
				t.Errorf("default refused: %v", err)
			}
			o.WriteTimeout = tc.gap
			if err := o.checkWriteTimeout(); err == nil {
				t.Errorf("write timeout %s (the whole gap) accepted", o.WriteTimeout)
			}
		})
	}
}
