package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// RenderPlan writes the what-if preview as a table, one row per RSP member.
func RenderPlan(w io.Writer, v PlanView, wide bool) error {
	if _, err := fmt.Fprintf(w, "What if %s (preview only: nothing is written)\n\n", v.Scenario); err != nil {
		return err
	}
	if len(v.RSPs) > 0 {
		if err := planTable(w, v, wide); err != nil {
			return err
		}
		if err := readinessLines(w, v); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintln(w, "No ReplicaSchedulingPreference is managed by a FailoverPolicy with rebalance enabled."); err != nil {
		return err
	}
	if len(v.Unmanaged) > 0 {
		if _, err := fmt.Fprintf(w, "\nNot managed (unchanged): %s\n", strings.Join(v.Unmanaged, ", ")); err != nil {
			return err
		}
	}
	for _, h := range v.Held {
		if _, err := fmt.Fprintf(w, "\nHeld as it is (policy %s cannot be applied): %s: %s\n", h.Policy, h.RSP, h.Reason); err != nil {
			return err
		}
	}
	return nil
}

func planTable(w io.Writer, v PlanView, wide bool) error {
	headers := []string{"RSP", "CLUSTER", "STATE", "REPLICAS", "PLANNED", "CHANGE", "WRITE", "REASON"}
	if wide {
		headers = append(headers, "CURRENT-PREFS", "PLANNED-PREFS", "TOTAL", "POLICY")
	}
	t := newTable(w, headers...)
	for _, r := range v.RSPs {
		for _, c := range r.Clusters {
			row := []string{r.Namespace + "/" + r.Name, c.Cluster, string(c.State), strconv.FormatInt(c.Replicas, 10),
				strconv.FormatInt(c.Planned, 10), change(c.Replicas, c.Planned), yesNo(r.Changed), planReason(r)}
			if wide {
				row = append(row, formatPrefs(c.Current), formatPrefs(c.Written),
					fmt.Sprintf("%d->%d", r.TotalReplicas, r.PlannedTotal), r.Policy)
			}
			t.add(row...)
		}
	}
	return t.flush()
}

// readinessLines says, for a failure, what the other members have no room
// for (N+1 readiness, as the manager last published it).
func readinessLines(w io.Writer, v PlanView) error {
	if v.Scenario.Full {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nIf %s failed now, by the room the manager last observed (requests against allocatable, an estimate):\n", v.Scenario.Cluster); err != nil {
		return err
	}
	for _, r := range v.RSPs {
		var line string
		switch {
		case r.Shortfall == nil:
			line = r.ShortfallNote
		case *r.Shortfall == 0:
			line = "ok: the other members have room for every replica"
		default:
			line = fmt.Sprintf("%d short: %s would find no room on the other members and stay Pending", *r.Shortfall, plural(*r.Shortfall, "replica"))
		}
		if _, err := fmt.Fprintf(w, "  %s/%s: %s\n", r.Namespace, r.Name, line); err != nil {
			return err
		}
	}
	return nil
}

func change(before, after int64) string {
	switch {
	case after > before:
		return fmt.Sprintf("+%d", after-before)
	case after < before:
		return strconv.FormatInt(after-before, 10)
	}
	return "="
}

func planReason(r PlanRow) string {
	if r.RetryAt != nil {
		return fmt.Sprintf("%s (until %s)", r.Reason, r.RetryAt.Format(time.RFC3339))
	}
	return r.Reason
}

// plural is "1 replica", "2 replicas".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
