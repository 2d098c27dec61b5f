package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// RenderStatus writes the status view as tables; wide adds columns.
func RenderStatus(w io.Writer, v StatusView, wide bool) error {
	sections := []func(io.Writer, StatusView, bool) error{
		renderMembers, renderPolicies, renderRSPs, renderRecoveries, renderDecisions,
	}
	for i, render := range sections {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := render(w, v, wide); err != nil {
			return err
		}
	}
	return nil
}

func renderMembers(w io.Writer, v StatusView, wide bool) error {
	if len(v.Members) == 0 {
		_, err := fmt.Fprintln(w, "No member clusters: no KubeFedCluster in the host (register members with `kubefedctl join`).")
		return err
	}
	headers := []string{"MEMBER", "CONNECTED", "KUBEFED-READY", "NODES", "LOST", "FENCED", "STORM", "SINCE"}
	if wide {
		headers = append(headers, "VERSION", "POLICIES", "REASON", "MESSAGE")
	}
	t := newTable(w, headers...)
	for _, m := range v.Members {
		row := []string{m.Name, connected(m.Connected), m.KubefedReady, fmt.Sprintf("%d/%d", m.NodesReady, m.NodesTotal),
			itoa(m.LostNodes), itoa(m.FencedNodes), yesNo(m.StormActive), age(m.LastProbeTime, v.Time)}
		if wide {
			row = append(row, orDash(m.ServerVersion), orDash(strings.Join(m.Policies, ",")), orDash(m.Reason), oneLine(m.Message))
		}
		t.add(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return deniedHint(w, v.Members)
}

// deniedHint names, under the members, each member that refuses requests
// fedfailover makes: connected or not, what needs the permission fails.
func deniedHint(w io.Writer, members []MemberRow) error {
	for _, m := range members {
		if m.Reason != v1alpha1.ReasonMemberPermissionDenied {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s refuses requests of fedfailover's (%s): %s\n", m.Name, m.Reason, oneLine(m.Message)); err != nil {
			return err
		}
	}
	return nil
}

func connected(c *bool) string {
	if c == nil {
		return "Unknown"
	}
	return yesNo(*c)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func renderPolicies(w io.Writer, v StatusView, wide bool) error {
	if len(v.Policies) == 0 {
		_, err := fmt.Fprintln(w, "No FailoverPolicy in the host cluster.")
		return err
	}
	headers := []string{"POLICY", "MODE", "DRY-RUN", "MEMBERS", "READY", "MEMBERS-CONNECTED", "STORM", "FENCING-BLOCKED", "N+1"}
	if wide {
		headers = append(headers, "MESSAGE")
	}
	t := newTable(w, headers...)
	for _, p := range v.Policies {
		row := []string{p.Name, p.Mode, yesNo(p.DryRun), fmt.Sprintf("%d/%d", p.ConnectedMembers, p.Members),
			conditionStatus(p.Conditions, v1alpha1.ConditionReady), conditionStatus(p.Conditions, v1alpha1.ConditionMembersConnected),
			conditionStatus(p.Conditions, v1alpha1.ConditionStormActive), conditionStatus(p.Conditions, v1alpha1.ConditionFencingBlocked),
			orDash(p.FailoverReadiness)}
		if wide {
			row = append(row, conditionMessages(p))
		}
		t.add(row...)
	}
	return t.flush()
}

// conditionMessages lists the messages of conditions that are not in their
// good state (Ready/MembersConnected True; the others False).
func conditionMessages(p PolicyRow) string {
	good := map[string]string{v1alpha1.ConditionReady: "True", v1alpha1.ConditionMembersConnected: "True",
		v1alpha1.ConditionStormActive: "False", v1alpha1.ConditionFencingBlocked: "False", v1alpha1.ConditionRemediating: "False", v1alpha1.ConditionRebalancing: "False",
		v1alpha1.ConditionOverlapping: "False", v1alpha1.ConditionRebalanceSuspended: "False",
		v1alpha1.ConditionTaintRemovalPending: "False", v1alpha1.ConditionMachineEvidenceUnavailable: "False",
		v1alpha1.ConditionFailoverReady: "True", v1alpha1.ConditionMemberPermissionDenied: "False"}
	var parts []string
	for _, c := range p.Conditions {
		if want, known := good[c.Type]; (!known || string(c.Status) != want) && c.Message != "" {
			parts = append(parts, c.Type+": "+c.Message)
		}
	}
	return oneLine(strings.Join(parts, "; "))
}

func renderRSPs(w io.Writer, v StatusView, wide bool) error {
	if len(v.RSPs) == 0 {
		_, err := fmt.Fprintln(w, "No ReplicaSchedulingPreference in the host cluster.")
		return err
	}
	headers := []string{"RSP", "POLICY", "CLUSTER", "BASELINE", "CURRENT", "REPLICAS", "SHIFTED"}
	if wide {
		headers = append(headers, "TOTAL", "REASON", "CHANGED")
	}
	t := newTable(w, headers...)
	for _, r := range v.RSPs {
		for _, c := range r.Clusters {
			row := []string{r.Namespace + "/" + r.Name, orDash(r.Policy), c.Cluster, formatPrefs(c.Baseline),
				formatPrefs(c.Current), replicas(c.Replicas), yesNo(r.Shifted)}
			if wide {
				row = append(row, fmt.Sprintf("%d/%d", r.TotalReplicas, r.BaselineTotal), orDash(r.Reason), age(r.LastChange, v.Time))
			}
			t.add(row...)
		}
	}
	return t.flush()
}

func replicas(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

func renderRecoveries(w io.Writer, v StatusView, wide bool) error {
	if len(v.Recoveries) == 0 {
		if _, err := fmt.Fprintln(w, "No node recoveries in progress."); err != nil {
			return err
		}
		return finishedHint(w, v.FinishedRecoveries)
	}
	headers := []string{"NODE", "PHASE", "EVIDENCE", "METHOD", "PODS", "LOST", "ACTED", "RECOVERED", "MESSAGE"}
	if wide {
		headers = append(headers, "POLICY", "MACHINE", "DRY-RUN", "MIGRATED", "RECORD")
	}
	t := newTable(w, headers...)
	for _, r := range v.Recoveries {
		row := []string{r.Cluster + "/" + r.Node, string(r.Phase), orDash(r.Evidence), orDash(string(r.Method)),
			itoa(r.AffectedPods), age(r.LostSeenAt, v.Time), age(r.ActedAt, v.Time), age(r.RecoveredAt, v.Time), oneLine(r.Message)}
		if wide {
			row = append(row, orDash(r.Policy), orDash(r.Machine), yesNo(r.DryRun), yesNo(r.Migrated), orDash(r.Record))
		}
		t.add(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return finishedHint(w, v.FinishedRecoveries)
}

// finishedHint points at the history kept in finished records.
func finishedHint(w io.Writer, n int) error {
	if n == 0 {
		return nil
	}
	noun := "recoveries are"
	if n == 1 {
		noun = "recovery is"
	}
	_, err := fmt.Fprintf(w, "%d finished %s kept on the host: `kubectl get noderecoveries`, `kubectl failover explain node CLUSTER/NODE`.\n", n, noun)
	return err
}

func renderDecisions(w io.Writer, v StatusView, wide bool) error {
	if len(v.Decisions) == 0 {
		_, err := fmt.Fprintln(w, "No recent decisions.")
		return err
	}
	headers := []string{"AGE", "CLUSTER", "OBJECT", "ACTION", "REASON", "DRY-RUN", "MESSAGE"}
	if wide {
		headers = append(headers, "POLICY")
	}
	t := newTable(w, headers...)
	for _, d := range v.Decisions {
		row := []string{age(&d.Time, v.Time), orDash(d.Cluster), d.Object, d.Action, d.Reason, yesNo(d.DryRun), oneLine(d.Message)}
		if wide {
			row = append(row, d.Policy)
		}
		t.add(row...)
	}
	return t.flush()
}
