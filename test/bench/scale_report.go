package bench

import (
	"fmt"
	"math"
	"sort"

	"github.com/fedfailover/fedfailover/test/lab"
)

// scVerdict is PASS or MISS for one target; "-" when the figure is missing
// or the target does not apply to this size.
func scVerdict(applies, ok bool) string {
	switch {
	case !applies:
		return "-"
	case ok:
		return "PASS"
	}
	return "MISS"
}

func scSeconds(l *scLatency, p func(*scLatency) *float64) string {
	if l == nil || p(l) == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *p(l))
}

// scTargets evaluates the targets. RSS applies at the goal size
// (3 x 2,000 x 10) or larger only.
func scTargets(r *scResult) map[string]string {
	goalSized := r.PodsTotal >= 60000
	decided := func(l *scLatency) bool {
		return l != nil && len(l.Samples) > 0 && l.Missing == 0 && l.P99 != nil && *l.P99 <= scTargetDecisionS
	}
	rss := math.Max(r.RSSAfterSyncMB, r.RSSAfterSteadyMB)
	return map[string]string{
		"rss":           scVerdict(goalSized, rss <= scTargetRSSMB),
		"cpu":           scVerdict(true, r.CPUPercent <= scTargetCPUPercent),
		"member_writes": scVerdict(true, r.MemberWrites == 0),
		"host_writes":   scVerdict(true, r.HostOtherWrites == 0),
		"taint":         scVerdict(r.Taint != nil && (len(r.Taint.Samples) > 0 || r.Taint.Missing > 0), decided(r.Taint)),
		"shift":         scVerdict(r.Shift != nil && (len(r.Shift.Samples) > 0 || r.Shift.Missing > 0), decided(r.Shift)),
	}
}

func (b *scBench) report(r *scResult) error {
	t := scTargets(r)
	out := b.out
	fmt.Fprintln(out)
	fmt.Fprintf(out, "scale benchmark: %d members x %d nodes x %d pods (%d pods, %d with RWO volumes), %d RSPs, %d kwok per member; the manager binary as its own process\n",
		r.Members, r.NodesPerMem, r.PodsPerNode, r.PodsTotal, r.VolumePods, r.RSPs, r.KwokPerMember)
	fmt.Fprintf(out, "lab: bulk objects created in %.0fs; when the manager started, %d of %d RSP pods Running and %d bulk pods not yet Running\n",
		r.PopulateSeconds, r.RSPPodsRunning, r.RSPs*r.Members, r.BulkPodsNotRunning)
	rows := [][]string{
		{"sync all members from start (s)", Seconds(r.SyncSeconds), "-", "-", "-"},
		{"RSS after sync (MB)", fmt.Sprintf("%.0f", r.RSSAfterSyncMB), "-", "<= 300 at 3x2000x10", t["rss"]},
		{"RSS after steady window (MB)", fmt.Sprintf("%.0f", r.RSSAfterSteadyMB), "-", "<= 300 at 3x2000x10", t["rss"]},
		{"Go heap in use after sync / steady (MB)", fmt.Sprintf("%.0f / %.0f", r.HeapAfterSyncMB, r.HeapAfterSteady), "-", "-", "-"},
		{"RSS before the first member (MB)", fmt.Sprintf("%.0f", r.BaseRSSMB), "-", "-", "-"},
		{fmt.Sprintf("idle CPU over %.0fs (%% of one core)", r.SteadySeconds), fmt.Sprintf("%.2f", r.CPUPercent), "-", "<= 2", t["cpu"]},
		{"writes/s to members (steady)", fmt.Sprintf("%.3f", r.MemberWrites), "-", "0", t["member_writes"]},
		{"writes/s to host without leader election (steady)", fmt.Sprintf("%.3f", r.HostOtherWrites), "-", "0", t["host_writes"]},
		{"loss rule true (first seen not Ready + notReadyFor, or evidence) -> taint (s)", scSeconds(r.Taint, func(l *scLatency) *float64 { return l.P50 }),
			scSeconds(r.Taint, func(l *scLatency) *float64 { return l.P99 }), "p99 <= 1", t["taint"]},
		{"exhaustion rule true (Unschedulable transition + capacityExhaustedAfter) -> RSP shift (s)", scSeconds(r.Shift, func(l *scLatency) *float64 { return l.P50 }),
			scSeconds(r.Shift, func(l *scLatency) *float64 { return l.P99 }), "p99 <= 1", t["shift"]},
	}
	if err := Table(out, []string{"FIGURE", "VALUE (P50)", "P99", "TARGET", "RESULT"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(out)
	names := make([]string, 0, len(r.Requests))
	for n := range r.Requests {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return names[i] == lab.HostName || (names[j] != lab.HostName && names[i] < names[j])
	})
	var req [][]string
	for _, n := range names {
		req = append(req, []string{n, fmt.Sprintf("%.3f", r.Requests[n].Reads), fmt.Sprintf("%.3f", r.Requests[n].Writes)})
	}
	fmt.Fprintf(out, "API requests of the manager over the steady window (its rest_client_requests_total; host Lease renewals %.3f/s):\n", r.HostLeaseWrites)
	if err := Table(out, []string{"API SERVER", "READS/S", "WRITES/S"}, req); err != nil {
		return err
	}
	missing := func(l *scLatency) int {
		if l == nil {
			return 0
		}
		return l.Missing
	}
	fmt.Fprintf(out, "decisions: %d taints timed (%d not seen), %d RSP shifts timed (%d not seen), both ends from watches (stamped on delivery, host clock)\n",
		len(r.Taint.Samples), missing(r.Taint), len(r.Shift.Samples), missing(r.Shift))
	fmt.Fprintf(out, "  taint: %s\n  shift: %s\n", scTaintBasis, scShiftBasis)
	fmt.Fprintf(out, "machine load average at the end of the steady window: %.2f (1 min), %.2f (5 min); peak RSS %.0f MB\n", r.LoadAvg1, r.LoadAvg5, r.PeakRSSMB)
	return WriteJSON(out, map[string]any{"benchmark": "scale", "size": b.o.size, "result": r, "targets": t,
		"target_values": map[string]any{"rss_mb": scTargetRSSMB, "cpu_percent": scTargetCPUPercent, "writes_per_second": 0, "decision_p99_seconds": scTargetDecisionS}})
}
