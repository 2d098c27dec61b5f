package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// RenderExplanation writes an explanation in `kubectl describe` style.
func RenderExplanation(w io.Writer, e Explanation, now time.Time) error {
	p := &describer{w: w, now: now}
	p.field(0, "Node", e.Cluster+"/"+e.Node)
	p.field(0, "Policy", orDash(e.Policy))
	p.field(0, "Verdict", e.Verdict)
	if e.Detail != "" {
		p.field(0, "Why", e.Detail)
	}
	if r := e.Recovery; r != nil {
		p.line(0, "Recovery (policy status):")
		p.field(1, "Phase", string(r.Phase))
		if r.Detection != "" {
			p.field(1, "Detection", string(r.Detection))
		}
		p.field(1, "Lost since", p.when(r.LostSince))
		p.field(1, "Fenced at", p.when(r.FencedAt))
		p.field(1, "Evidence", orDash(r.Evidence))
		p.field(1, "Method", orDash(string(r.Method)))
		p.field(1, "Affected pods", itoa(r.AffectedPods))
		p.field(1, "Message", oneLine(r.Message))
	}
	p.records(e.Records)
	if e.Policy != "" {
		p.storm(e.Storm)
	}
	p.machine(e.Machine)
	p.fencing(e.Fencing, e.Machine)
	p.decisions(e.Decisions)
	p.list(0, "Notes", e.Notes)
	return p.err
}

// describer writes aligned "Key:  value" lines, remembering the first error.
type describer struct {
	w   io.Writer
	now time.Time
	err error
}

func (d *describer) line(indent int, s string) {
	if d.err == nil {
		_, d.err = fmt.Fprintln(d.w, strings.Repeat("  ", indent)+s)
	}
}

func (d *describer) field(indent int, key, value string) {
	d.line(indent, fmt.Sprintf("%-*s %s", max(17-2*indent, len(key)+1), key+":", value))
}

func (d *describer) list(indent int, key string, items []string) {
	if len(items) == 0 {
		return
	}
	d.line(indent, key+":")
	for _, it := range items {
		d.line(indent+1, "- "+oneLine(it))
	}
}

func (d *describer) when(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age(t, d.now))
}

func (d *describer) storm(s StormView) {
	state := "inactive"
	if s.Active {
		state = "ACTIVE: recovery suspended in this member"
	}
	d.line(0, "Storm guard:")
	d.field(1, "State", state)
	d.field(1, "Lost nodes", fmt.Sprintf("%d of %d (maxUnhealthy %s, cooldown %s)", s.LostNodes, s.NodesTotal, orDash(s.MaxUnhealthy), orDash(s.Cooldown)))
	if s.Guard == "" {
		d.field(1, "RecoveryGuard", "none (no storm recorded in this member)")
	} else {
		d.field(1, "RecoveryGuard", s.Guard)
	}
	if s.EndedAt != nil {
		d.field(1, "Storm ended", d.when(s.EndedAt))
	}
	if s.Message != "" {
		d.field(1, "Message", oneLine(s.Message))
	}
}

func (d *describer) machine(m *MachineView) {
	if m == nil {
		return
	}
	d.line(0, "Machine:")
	d.field(1, "Name", m.Name)
	if m.Source != "" {
		d.field(1, "Read from", m.Source)
	}
	d.field(1, "Deleting since", d.when(m.Deleting))
	d.list(1, "Conditions", m.Conditions)
}

func (d *describer) fencing(f *FencingView, m *MachineView) {
	if f == nil {
		return
	}
	from := "the host's Machine"
	if m != nil && m.Source != "" {
		from = "the Machine in the " + m.Source
	}
	d.line(0, "Fencing verdict (now, from "+from+", node assumed not Ready):")
	d.field(1, "Fenced", fmt.Sprintf("%s (%s)", yesNo(f.Fenced), f.Reason))
	if f.AssumeFencedAt != nil {
		t := metav1.NewTime(*f.AssumeFencedAt)
		d.field(1, "Assumed at", d.when(&t))
	}
	d.list(1, "Found", f.Found)
	d.list(1, "Missing", f.Missing)
}

func (d *describer) decisions(rows []DecisionRow) {
	if len(rows) == 0 {
		d.field(0, "Decisions", "none recorded for this node")
		return
	}
	d.line(0, "Decisions:")
	for _, r := range rows {
		dry := ""
		if r.DryRun {
			dry = " [dry-run]"
		}
		d.line(1, fmt.Sprintf("%s ago  %s (%s)%s: %s", age(&r.Time, d.now), r.Action, r.Reason, dry, oneLine(r.Message)))
	}
}

// records writes the node's NodeRecovery records, one block each.
func (d *describer) records(recs []RecordView) {
	if len(recs) == 0 {
		d.field(0, "Records", "no NodeRecovery record for this node")
		return
	}
	d.line(0, "Records (NodeRecovery, active first, then finished, newest first):")
	for _, r := range recs {
		state := "finished"
		if r.Active {
			state = "active"
		}
		d.line(1, fmt.Sprintf("- %s (%s)", r.Name, state))
		d.record(r)
	}
}

func (d *describer) record(r RecordView) {
	sp, st := r.Spec, r.Status
	d.field(2, "Phase", string(st.Phase))
	if !r.Active {
		d.field(2, "Reason", orDash(st.FinishReason))
	}
	if st.Detection != "" {
		d.field(2, "Detected", orDash(oneLine(st.DetectedBy))+" ("+string(st.Detection)+")")
	}
	if rr := st.Remediation; rr != nil {
		d.field(2, "Remediation", remediationLine(rr, d.when(&rr.RequestedAt)))
	}
	d.field(2, "Evidence", orDash(st.Evidence))
	d.field(2, "Method", orDash(string(st.Method)))
	if len(st.Claims) > 0 {
		d.field(2, "Claims", strings.Join(st.Claims, ", "))
	}
	d.field(2, "Node UID", orDash(sp.NodeUID))
	if sp.ProviderID != "" {
		d.field(2, "Provider ID", sp.ProviderID)
	}
	if m := sp.Machine; m != nil {
		d.field(2, "Machine", fmt.Sprintf("%s/%s (uid %s)", m.Namespace, m.Name, orDash(m.UID)))
	}
	d.field(2, "Lost since", memberTime(sp.LostSince))
	d.field(2, "Seen lost", d.when(st.ObservedAt))
	d.field(2, "Intent", d.when(st.IntentAt))
	d.field(2, "Acted", d.when(st.ActedAt))
	d.field(2, "Recovered", d.when(st.RecoveredAt))
	if !r.Active {
		d.field(2, "Finished", d.when(st.FinishedAt))
	}
	if flags := recordFlags(st); len(flags) > 0 {
		d.field(2, "Flags", strings.Join(flags, "; "))
	}
	d.field(2, "Message", oneLine(st.Message))
}

// remediationLine says where a record's remediation stands: "waiting for
// remediation Kind ns/name (requested by fedfailover) since ...", or how it
// ended.
func remediationLine(rr *v1alpha1.RemediationRecord, since string) string {
	who := "requested by fedfailover"
	if rr.Foreign {
		who = "another party's, waited for"
	}
	ref := fmt.Sprintf("%s %s/%s (%s)", rr.Kind, rr.Namespace, rr.Name, who)
	if rr.Result == "" {
		return "waiting for remediation " + ref + " since " + since
	}
	return fmt.Sprintf("remediation %s %s: %s", ref, rr.Result, orDash(oneLine(rr.Message)))
}

// memberTime shows a time of the member's clock: never as an age, which
// would compare it with this machine's clock.
func memberTime(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (member's clock)"
}

func recordFlags(st v1alpha1.NodeRecoveryRecordStatus) []string {
	var out []string
	if st.DryRun {
		out = append(out, "dry run: decided and reported, nothing written to the member")
	}
	if st.Migrated {
		out = append(out, "migrated from an older fedfailover's node annotations: its taint is never removed by fedfailover")
	}
	if st.TaintPreexisting {
		out = append(out, "out-of-service taint not added by fedfailover (there before its act, or added by someone else before its patch): never removed by it")
	}
	switch st.LostTaint {
	case v1alpha1.LostTaintOwned:
		out = append(out, "NoSchedule taint "+contract.TaintLost+" added by fedfailover before the force deletion: removed by it when the node returns")
	case v1alpha1.LostTaintPreexisting:
		out = append(out, "NoSchedule taint "+contract.TaintLost+" was there before fedfailover: never removed by it")
	}
	return out
}
