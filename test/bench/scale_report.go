package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

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
// The steady window's verdict decides the steady targets, the decision
// steps' own verdict the decision latencies.
func scTargets(r *scResult) map[string]string {
	out := map[string]string{"sync": scInvalid, "rss": scInvalid, "cpu": scInvalid, "member_writes": scInvalid, "host_writes": scInvalid,
		"taint": scInvalid, "shift": scInvalid}
	if r.Validity.Valid {
		rssTarget, rssApplies := scRSSTarget(r)
		rss := math.Max(r.RSSAfterSyncMB, r.RSSAfterSteadyMB)
		out["sync"] = scVerdict(true, r.SyncSeconds <= scTargetSyncS)
		out["rss"] = scVerdict(rssApplies, rss <= rssTarget)
		out["cpu"] = scVerdict(true, r.CPUPercent <= scTargetCPUPercent)
		out["member_writes"] = scVerdict(true, r.MemberWrites == 0)
		out["host_writes"] = scVerdict(true, r.HostOtherWrites == 0)
	}
	decisionsValid := r.decisionsValid()
	decided := func(l *scLatency) bool {
		return l != nil && len(l.Samples) > 0 && l.Missing == 0 && l.P99 != nil && *l.P99 <= scTargetDecisionS
	}
	if decisionsValid {
		out["taint"] = scVerdict(r.Taint != nil && (len(r.Taint.Samples) > 0 || r.Taint.Missing > 0), decided(r.Taint))
		out["shift"] = scVerdict(r.Shift != nil && (len(r.Shift.Samples) > 0 || r.Shift.Missing > 0), decided(r.Shift))
	}
	for role, l := range r.TaintByHolder {
		out["taint_held_by_"+role] = scInvalid
		if decisionsValid {
			out["taint_held_by_"+role] = scVerdict(true, decided(l))
		}
	}
	return out
}

// decisionsValid: the decision steps ran in a window with headroom.
func (r *scResult) decisionsValid() bool {
	return r.DecisionsValidity != nil && r.DecisionsValidity.Valid
}

// scRSSTarget is the memory target and whether it applies: 300 MB for one
// process at 3 x 2,000 x 10 (60,000 pods), 1 GiB for each replica of a
// sharded manager at 10 x 5,000 x 10 (500,000 pods).
func scRSSTarget(r *scResult) (float64, bool) {
	if len(r.Replicas) > 1 {
		return scTargetReplicaRSSMB, r.PodsTotal >= 500000
	}
	return scTargetRSSMB, r.PodsTotal >= 60000
}

// scRSSTargetText is the memory target as the table shows it.
func scRSSTargetText(r *scResult) string {
	if len(r.Replicas) > 1 {
		return "<= 1024 per replica at 10x5000x10"
	}
	return "<= 300 at 3x2000x10"
}

// scInvalid stands in for every figure of a run without headroom.
const scInvalid = "INVALID"

func (b *scBench) report(r *scResult) error {
	t := scTargets(r)
	out := b.out
	fmt.Fprintln(out)
	fmt.Fprintf(out, "scale benchmark: %d members x %d nodes x %d pods (%d pods, %d with RWO volumes), %d RSPs; static bulk (written into etcd: %t), no node-lifecycle controller, shared etcd: %t; the manager binary as its own process\n",
		r.Members, r.NodesPerMem, r.PodsPerNode, r.PodsTotal, r.VolumePods, r.RSPs, r.BulkViaEtcd, r.SharedEtcd)
	fmt.Fprintf(out, "lab: bulk objects created in %.0fs; when the manager started, %d of %d RSP pods Running, %d bulk pods not Running, %d of %d bulk VolumeAttachments attached\n",
		r.PopulateSeconds, r.RSPPodsRunning, r.RSPs*r.Members, r.BulkPodsNotRunning, r.VolumesAttached, r.VolumePods)
	if c := r.Churn; c != nil {
		fmt.Fprintf(out, "churn (settle + steady, %.0fs): a status report per bulk node every %s (%.2f/s), %.2f %% of pods replaced per minute (%.2f/s), %.1f RSP scale events per minute; done %d / %d / %d, errors %d / %d / %d, max lag %.1fs\n",
			c.Seconds, c.Plan.Rates.NodeStatusEvery, c.Plan.NodeStatusPerSecond, c.Plan.Rates.PodPercentPerMin, c.Plan.PodReplacedPerSec, c.Plan.Rates.ScalePerMin,
			c.Nodes.Done, c.Pods.Done, c.Scales.Done, c.Nodes.Errors, c.Pods.Errors, c.Scales.Errors, c.maxLagSeconds())
		for _, e := range []string{c.Nodes.FirstError, c.Pods.FirstError, c.Scales.FirstError} {
			if e != "" {
				fmt.Fprintf(out, "  churn error: %s\n", e)
			}
		}
	}
	// A figure is shown only from a window with headroom.
	fig := func(format string, v ...any) string {
		if !r.Validity.Valid {
			return scInvalid
		}
		return fmt.Sprintf(format, v...)
	}
	lat := func(l *scLatency, p func(*scLatency) *float64) string {
		if !r.decisionsValid() {
			return scInvalid
		}
		return scSeconds(l, p)
	}
	rows := [][]string{
		{"sync all members from start (s)", fig("%s", Seconds(r.SyncSeconds)), "-", "<= 60", t["sync"]},
		{"RSS after sync (MB" + largestNote(r) + ")", fig("%.0f", r.RSSAfterSyncMB), "-", scRSSTargetText(r), t["rss"]},
		{"RSS after steady window (MB" + largestNote(r) + ")", fig("%.0f", r.RSSAfterSteadyMB), "-", scRSSTargetText(r), t["rss"]},
		{"Go heap in use after sync / steady (MB)", fig("%.0f / %.0f", r.HeapAfterSyncMB, r.HeapAfterSteady), "-", "-", "-"},
		{"RSS before the first member (MB)", fmt.Sprintf("%.0f", r.BaseRSSMB), "-", "-", "-"},
		{fmt.Sprintf("manager CPU at the churn rate over %.0fs (%% of one core)", r.SteadySeconds), fig("%.2f", r.CPUPercent), "-", "<= 2", t["cpu"]},
		{"writes/s to members (steady)", fig("%.3f", r.MemberWrites), "-", "0", t["member_writes"]},
		{"writes/s to host without leader election (steady)", fig("%.3f", r.HostOtherWrites), "-", "0", t["host_writes"]},
		{"loss rule true (evidence + Lease silence, or not Ready + notReadyFor) -> taint (s)", lat(r.Taint, func(l *scLatency) *float64 { return l.P50 }),
			lat(r.Taint, func(l *scLatency) *float64 { return l.P99 }), "p99 <= 1", t["taint"]},
		{"exhaustion rule true (Unschedulable transition + capacityExhaustedAfter) -> RSP shift (s)", lat(r.Shift, func(l *scLatency) *float64 { return l.P50 }),
			lat(r.Shift, func(l *scLatency) *float64 { return l.P99 }), "p99 <= 1", t["shift"]},
	}
	for _, role := range []string{scHeldByLeader, scHeldByNonLeader} {
		if l, ok := r.TaintByHolder[role]; ok {
			rows = append(rows, []string{"  of which on members held by the " + role, lat(l, func(l *scLatency) *float64 { return l.P50 }),
				lat(l, func(l *scLatency) *float64 { return l.P99 }), "p99 <= 1", t["taint_held_by_"+role]})
		}
	}
	if r.ShiftHolder != "" {
		rows = append(rows, []string{"  the exhausted member held by the " + r.ShiftHolder, "-", "-", "-", "-"})
	}
	rows = append(rows, scRigRows(r)...)
	if err := Table(out, []string{"FIGURE", "VALUE (P50)", "P99", "TARGET", "RESULT"}, rows); err != nil {
		return err
	}
	if r.Validity.Valid {
		fmt.Fprintf(out, "run VALID: load average at most %.2f (limit %.2f) and every member answered /readyz within %s in %d samples\n",
			r.Validity.MaxLoad1, r.Validity.MaxLoad, scProbeLimit, r.Validity.Samples)
	} else {
		fmt.Fprintln(out, "run INVALID (the steady window had no headroom; the manager's figures are not reported):")
		for _, why := range r.Validity.Reasons {
			fmt.Fprintf(out, "  - %s\n", why)
		}
	}
	if err := b.reportDecisions(r); err != nil {
		return err
	}
	if err := scLabCostTable(out, r); err != nil {
		return err
	}
	if err := scReplicaTable(out, r); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if !r.Validity.Valid {
		return b.writeJSON(r, t)
	}
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
	fmt.Fprintf(out, "API requests of the manager over the steady window (its rest_client_requests_total; host Lease PUTs of every client %.3f/s):\n", r.HostLeaseWrites)
	if err := Table(out, []string{"API SERVER", "READS/S", "WRITES/S"}, req); err != nil {
		return err
	}
	if len(r.HostWrites) > 0 {
		var rows [][]string
		for _, w := range r.HostWrites {
			rows = append(rows, []string{w.Request, strconv.Itoa(w.Count), fmt.Sprintf("%.3f", w.PerSecond)})
		}
		fmt.Fprintf(out, "the manager's host writes over the steady window (the host's audit log; %.3f/s without its leader election Lease):\n", r.HostOtherWrites)
		if err := Table(out, []string{"REQUEST", "COUNT", "PER S"}, rows); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "machine load average at the end of the steady window: %.2f (1 min), %.2f (5 min); peak RSS %.0f MB\n", r.LoadAvg1, r.LoadAvg5, r.PeakRSSMB)
	return b.writeJSON(r, t)
}

// reportDecisions says whether the decision steps had headroom of their
// own and, when they had, how many of each were timed.
func (b *scBench) reportDecisions(r *scResult) error {
	out := b.out
	v := r.DecisionsValidity
	switch {
	case v == nil:
		_, err := fmt.Fprintln(out, "decision steps: not run")
		return err
	case !v.Valid:
		fmt.Fprintln(out, "decision steps INVALID (their window had no headroom; the latencies are not reported):")
		for _, why := range v.Reasons {
			fmt.Fprintf(out, "  - %s\n", why)
		}
		return nil
	}
	missing := func(l *scLatency) int {
		if l == nil {
			return 0
		}
		return l.Missing
	}
	fmt.Fprintf(out, "decision steps VALID (their own window: load average at most %.2f, limit %.2f, every probe within %s in %d samples): "+
		"%d taints timed (%d not seen), %d RSP shifts timed (%d not seen), both ends from watches (stamped on delivery, host clock)\n",
		v.MaxLoad1, v.MaxLoad, scProbeLimit, v.Samples, len(r.Taint.Samples), missing(r.Taint), len(r.Shift.Samples), missing(r.Shift))
	_, err := fmt.Fprintf(out, "  taint: %s\n  shift: %s\n", scTaintBasis, scShiftBasis)
	return err
}

func (b *scBench) writeJSON(r *scResult, t map[string]string) error {
	res, err := scJSONResult(r)
	if err != nil {
		return err
	}
	var decisionsWhy []string
	if v := r.DecisionsValidity; v != nil {
		decisionsWhy = v.Reasons
	}
	return WriteJSON(b.out, map[string]any{"benchmark": "scale", "size": b.o.size, "valid": r.Validity.Valid, "invalid_reasons": r.Validity.Reasons,
		"decisions_valid": r.decisionsValid(), "decisions_invalid_reasons": decisionsWhy,
		"result": res, "targets": t,
		"target_values": map[string]any{"rss_mb": scTargetRSSMB, "cpu_percent": scTargetCPUPercent, "writes_per_second": 0, "decision_p99_seconds": scTargetDecisionS, "sync_seconds": scTargetSyncS,
			"max_load_average_1m": r.Validity.MaxLoad, "probe_limit_seconds": scProbeLimit.Seconds(), "max_churn_lag_seconds": scMaxChurnLag.Seconds()}})
}

// scSteadyFigures are the result's keys that hold the manager's figures
// of the steady window, scDecisionFigures those of the decision steps: a
// window without headroom leaves its keys out of the JSON (absent, not
// zero: a zero would read as a figure).
var (
	scSteadyFigures = []string{
		"sync_seconds", "rss_after_sync_mb", "heap_inuse_after_sync_mb", "rss_after_steady_mb", "heap_inuse_after_steady_mb",
		"peak_rss_mb", "idle_cpu_percent_of_one_core", "requests_per_second", "host_lease_writes_per_second",
		"member_writes_per_second", "host_writes_without_leader_election_per_second", "replicas",
	}
	scDecisionFigures = []string{"evidence_to_taint", "exhaustion_to_rsp_shift", "evidence_to_taint_by_holder", "exhaustion_member_holder"}
)

// largestNote marks a sharded run's memory figures as the largest
// replica's.
func largestNote(r *scResult) string {
	if len(r.Replicas) > 1 {
		return ", largest replica"
	}
	return ""
}

// scReplicaTable prints each replica of a sharded run (a valid one only).
func scReplicaTable(out io.Writer, r *scResult) error {
	if len(r.Replicas) < 2 || !r.Validity.Valid {
		return nil
	}
	fmt.Fprintln(out, "\nmanager replicas (sharded):")
	var rows [][]string
	for _, x := range r.Replicas {
		lead := "-"
		if x.Leader {
			lead = "yes"
		}
		rows = append(rows, []string{x.Name, lead, strings.Join(x.Members, " "), fmt.Sprintf("%.0f / %.0f", x.RSSAfterSyncMB, x.RSSAfterSteadyMB),
			fmt.Sprintf("%.0f / %.0f", x.HeapAfterSyncMB, x.HeapAfterSteady), fmt.Sprintf("%.0f", x.PeakRSSMB), fmt.Sprintf("%.2f", x.CPUPercent)})
	}
	return Table(out, []string{"REPLICA", "LEADER", "MEMBERS HELD", "RSS SYNC / STEADY (MB)", "HEAP SYNC / STEADY (MB)", "PEAK RSS (MB)", "CPU (% OF ONE CORE)"}, rows)
}

// scJSONResult is the result as written to BENCH_JSON; an INVALID
// window's part carries the lab's and the rig's figures and the reasons
// only.
func scJSONResult(r *scResult) (any, error) {
	var drop []string
	if !r.Validity.Valid {
		drop = append(drop, scSteadyFigures...)
	}
	if !r.decisionsValid() {
		drop = append(drop, scDecisionFigures...)
	}
	if len(drop) == 0 {
		return r, nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, k := range drop {
		delete(m, k)
	}
	return m, nil
}

// scRigRows are the rig's own figures, next to the manager's.
func scRigRows(r *scResult) [][]string {
	rows := [][]string{{"machine load average, max over the steady window (1 min)", fmt.Sprintf("%.2f", r.Validity.MaxLoad1), "-",
		fmt.Sprintf("<= %.2f", r.Validity.MaxLoad), validWord(r.Validity.MaxLoad1 <= r.Validity.MaxLoad && r.Validity.Samples > 0)}}
	if l := r.SteadyLab; l != nil {
		rows = append(rows,
			[]string{"rig CPU over the steady window: lab processes + bench (% of one core)", fmt.Sprintf("%.1f", l.Rig.CPUPercent), "-", "-", "-"},
			[]string{"  of which the bench process (churn driver, watches)", fmt.Sprintf("%.1f", l.Bench.CPUPercent), "-", "-", "-"})
	}
	return rows
}

func validWord(ok bool) string {
	if ok {
		return "ok"
	}
	return scInvalid
}

// scLabCostTable prints what the lab cost idle (before the manager) and
// over the steady window, per part.
func scLabCostTable(out io.Writer, r *scResult) error {
	if r.IdleLab == nil && r.SteadyLab == nil {
		return nil
	}
	fmt.Fprintln(out, "\nlab processes (/proc; CPU % of one core over the window, RSS at its end):")
	cell := func(c *scRigCost, pick func(*scRigCost) *scProcCost) string {
		if c == nil {
			return "-"
		}
		p := pick(c)
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f %% / %.0f MB", p.CPUPercent, p.RSSMB)
	}
	parts := []struct {
		name string
		pick func(*scRigCost) *scProcCost
	}{
		{"one member, mean", func(c *scRigCost) *scProcCost { return &c.MemberMean }},
		{"one member, max", func(c *scRigCost) *scProcCost { return &c.MemberMax }},
		{"host (kubefed included)", func(c *scRigCost) *scProcCost { return &c.Host }},
		{"shared etcd", func(c *scRigCost) *scProcCost { return c.SharedEtcd }},
		{"bench process", func(c *scRigCost) *scProcCost { return &c.Bench }},
		{"all (rig)", func(c *scRigCost) *scProcCost { return &c.Rig }},
	}
	comps := map[string]bool{}
	for _, c := range []*scRigCost{r.IdleLab, r.SteadyLab} {
		if c != nil {
			for k := range c.Components {
				comps[k] = true
			}
		}
	}
	for _, comp := range slices.Sorted(maps.Keys(comps)) {
		parts = append(parts, struct {
			name string
			pick func(*scRigCost) *scProcCost
		}{"  its " + comp, func(c *scRigCost) *scProcCost {
			if p, ok := c.Components[comp]; ok {
				return &p
			}
			return nil
		}})
	}
	var rows [][]string
	for _, p := range parts {
		rows = append(rows, []string{p.name, cell(r.IdleLab, p.pick), cell(r.SteadyLab, p.pick)})
	}
	idle := "IDLE (no manager, no churn)"
	if r.IdleLab != nil {
		idle = fmt.Sprintf("IDLE %.0fs (no manager, no churn; load %.2f)", r.IdleLab.Seconds, r.IdleLoad1)
	}
	return Table(out, []string{"PART", idle, "STEADY (manager + churn)"}, rows)
}
