package planner

import (
	"fmt"
	"strings"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Admission is the answer to a request to empty a member for maintenance.
type Admission struct {
	// Accept: the drain may start.
	Accept bool
	// Reason is one of v1alpha1.ReasonMaintenance*.
	Reason string
	// Message names the RSPs the others lack room for, and how many
	// replicas would stay on the member.
	Message string
}

// AdmitMaintenance decides whether member may be emptied: the others must
// have room for its replicas of every RSP, by the published N+1 estimates
// (rsps, the policies' status.failoverReadiness) read through
// FailoverReadiness: a member's drain needs what its failure would, and
// the figures are those of `kubectl failover plan --fail`. Members in
// draining (other accepted maintenances) take nothing more: their room
// counts only what they hold, as in ReadinessInputOf. A shortfall refuses
// it (InsufficientRoom); an unknown room too (RoomUnknown): when in doubt,
// nothing starts. force accepts it whatever the figures say (the drain
// itself still moves only what fits).
func AdmitMaintenance(member string, force bool, rsps []v1alpha1.RSPReadiness, draining map[string]bool) Admission {
	var short, unknown []string
	for _, st := range rsps {
		in := ReadinessInputFromStatus(st)
		if _, ok := in.Members[member]; !ok {
			continue
		}
		for n, m := range in.Members {
			if draining[n] && n != member {
				m.Room = min(m.Room, m.Replicas)
				in.Members[n] = m
			}
		}
		r := FailoverReadiness(in)[member]
		key := st.Namespace + "/" + st.Name
		switch {
		case !r.Known:
			unknown = append(unknown, key)
		case r.Shortfall > 0:
			short = append(short, fmt.Sprintf("%s: %d of its %d replicas", key, r.Shortfall, in.TotalReplicas))
		}
	}
	switch {
	case force && (len(short) > 0 || len(unknown) > 0):
		return Admission{Accept: true, Reason: v1alpha1.ReasonMaintenanceForced, Message: "forced (spec.force): " +
			refusal(member, short, unknown) + "; what fits nowhere else stays on " + member}
	case force:
		return Admission{Accept: true, Reason: v1alpha1.ReasonMaintenanceForced, Message: "forced (spec.force); the other members have room for " + member + "'s replicas"}
	case len(short) > 0:
		return Admission{Reason: v1alpha1.ReasonMaintenanceNoRoom, Message: refusal(member, short, unknown) + "; set spec.force to drain what fits"}
	case len(unknown) > 0:
		return Admission{Reason: v1alpha1.ReasonMaintenanceRoomUnknown, Message: refusal(member, short, unknown) + "; set spec.force to drain what fits"}
	}
	return Admission{Accept: true, Reason: v1alpha1.ReasonMaintenanceAccepted,
		Message: "the other members have room for " + member + "'s replicas of every managed RSP"}
}

func refusal(member string, short, unknown []string) string {
	var parts []string
	if len(short) > 0 {
		parts = append(parts, "the other members have no room for "+strings.Join(short, ", "))
	}
	if len(unknown) > 0 {
		parts = append(parts, "the room of some member is unknown now for "+strings.Join(unknown, ", "))
	}
	return "draining " + member + ": " + strings.Join(parts, "; ")
}
