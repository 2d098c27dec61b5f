package metrics

import "github.com/prometheus/client_golang/prometheus"

// Rebalance metrics, maintained by controllers/rebalance.
var (
	// RSPWeight is the weight fedfailover last saw or wrote for a member in
	// a managed ReplicaSchedulingPreference.
	RSPWeight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "rsp_weight",
		Help:      "Weight of a member cluster in a managed ReplicaSchedulingPreference.",
	}, []string{"namespace", "rsp", ClusterLabel})

	// RSPShifted is 1 while a managed ReplicaSchedulingPreference differs
	// from the user's baseline, 0 while it is at its baseline.
	RSPShifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "rsp_shifted",
		Help:      "1 while a managed ReplicaSchedulingPreference is shifted from its baseline, 0 at the baseline.",
	}, []string{"namespace", "rsp"})

	// RSPGuardHeld is 1 while the federation guard (too many members
	// failed at once, spec.rebalance.maxFailedMembers) holds a managed
	// ReplicaSchedulingPreference as it is, 0 otherwise.
	RSPGuardHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "rsp_guard_held",
		Help:      "1 while the federation guard holds a managed ReplicaSchedulingPreference unchanged because too many members failed at once.",
	}, []string{"namespace", "rsp"})

	// RebalanceSuspended is 1 while a safety rule holds some RSP of a
	// policy for the reason (TooManyMembersFailed, NoCapacityAnywhere,
	// MemberFailureUnconfirmed), 0 otherwise.
	RebalanceSuspended = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "rebalance_suspended",
		Help:      "1 while a safety rule (federation guard, no capacity anywhere, a member failed to fedfailover alone) holds a policy's ReplicaSchedulingPreferences as they are, by reason.",
	}, []string{"policy", "reason"})

	// RebalanceFailbackBackoff is a member's failback backoff level for a
	// managed RSP: 0 none; n: its next failback waits the stabilization
	// window doubled n times, because it ran out of capacity right after
	// its last n failbacks.
	RebalanceFailbackBackoff = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "rebalance_failback_backoff",
		Help:      "Failback backoff level of a member for a managed ReplicaSchedulingPreference (its stabilization window doubles per level).",
	}, []string{"namespace", "rsp", ClusterLabel})

	// FailoverShortfall is the N+1 estimate of a managed RSP: how many of
	// its replicas the other members have no room for, so they would stay
	// Pending, if the member failed now (planner.FailoverReadiness). A
	// series exists while the figure is known: not for a held RSP, nor
	// while another member's room is unknown.
	FailoverShortfall = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "failover_shortfall_replicas",
		Help:      "Replicas of a managed ReplicaSchedulingPreference that would find no room on the other members (and stay Pending) if the member failed now.",
	}, []string{"policy", "namespace", "rsp", MemberLabel})

	// Rebalances counts changes of managed RSPs (or, in dry-run, changes
	// that would have been written), by planner reason.
	Rebalances = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "rebalances_total",
		Help:      "Changes of managed ReplicaSchedulingPreferences, by reason.",
	}, []string{"reason"})

	// MemberFreeCapacity is allocatable minus requests of non-terminal pods
	// over the nodes eligible for the last workload planned for the member.
	MemberFreeCapacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "member_free_capacity",
		Help:      "Free allocatable resources of a member cluster's eligible nodes (CPU in cores, pods as a count).",
	}, []string{ClusterLabel, "resource"})

	// RebalanceSeconds measures, per reason, the time from the onset of the
	// problem (member unhealthy, pods Unschedulable) until every replica of
	// the workload ran again.
	RebalanceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "rebalance_seconds",
		Help:      "Time from a member failing or running out of capacity until all replicas of a workload ran again.",
		Buckets:   []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 120, 300, 600},
	}, []string{"reason"})
)

// DeleteRSP removes the series of a ReplicaSchedulingPreference that is no
// longer managed.
func DeleteRSP(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "rsp": name}
	RSPWeight.DeletePartialMatch(l)
	RSPShifted.DeletePartialMatch(l)
	RSPGuardHeld.DeletePartialMatch(l)
	RebalanceFailbackBackoff.DeletePartialMatch(l)
	FailoverShortfall.DeletePartialMatch(l)
}

// MaintenanceReplicas is the drain of a member under a MemberMaintenance,
// summed over the managed RSPs, by state: "share" (its share under the
// users' weights), "moved" (off it so far), "pending" (started on other
// members for the drain, not Ready yet), "waiting_for_room" (fit on no
// other member now). A series exists while the maintenance is accepted.
var MaintenanceReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: Namespace,
	Name:      "maintenance_replicas",
	Help:      "Replicas of the drain of a member under maintenance, by state (share, moved, pending, waiting_for_room).",
}, []string{"maintenance", MemberLabel, "state"})

// MaintenanceRefused is 1 while a MemberMaintenance is refused (the other
// members lack room, or their room is unknown), 0 once accepted.
var MaintenanceRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: Namespace,
	Name:      "maintenance_refused",
	Help:      "1 while a MemberMaintenance is refused for lack of room elsewhere (or room unknown), 0 once accepted.",
}, []string{"maintenance", MemberLabel})

// DeleteMaintenance drops the series of a maintenance that is gone.
func DeleteMaintenance(name string) {
	l := prometheus.Labels{"maintenance": name}
	MaintenanceReplicas.DeletePartialMatch(l)
	MaintenanceRefused.DeletePartialMatch(l)
}

func init() {
	mustRegister(RSPWeight, RSPShifted, RSPGuardHeld, RebalanceSuspended, RebalanceFailbackBackoff, FailoverShortfall, Rebalances, MemberFreeCapacity, RebalanceSeconds,
		MaintenanceReplicas, MaintenanceRefused)
}
