package metrics

import "github.com/prometheus/client_golang/prometheus"

// Sharding metrics, maintained by controllers/member when members are
// sharded across replicas. Each replica serves its own values.
var (
	// ShardOwnedMembers is the number of members whose Lease this replica
	// holds right now.
	ShardOwnedMembers = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: "shard",
		Name:      "owned_members",
		Help:      "Member clusters whose Lease this replica holds.",
	})

	// ShardPeers is the number of live replicas this replica sees, itself
	// included.
	ShardPeers = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: "shard",
		Name:      "peers",
		Help:      "Live manager replicas seen through their peer Leases, this one included.",
	})

	// ShardLeaseTransitions counts this replica's member Lease transitions:
	// acquired, released (handed over on purpose) or lost (not renewed in
	// time).
	ShardLeaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Subsystem: "shard",
		Name:      "lease_transitions_total",
		Help:      "Member Lease transitions of this replica, by transition (acquired, released, lost).",
	}, []string{ClusterLabel, "transition"})

	// ShardSummaryUnknown is 1 while the leader reads a member another
	// replica holds as Unknown: no MemberSummary, one by a replica that
	// does not hold the member, a holder whose Lease is not live, or one
	// not renewed within the stale-after period (sharded rebalance).
	ShardSummaryUnknown = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: "shard",
		Name:      "summary_unknown",
		Help:      "1 while the leader reads a member held by another replica as Unknown (no live, fresh MemberSummary).",
	}, []string{ClusterLabel})

	// ShardSummariesDeleted counts MemberSummaries the leader deleted
	// because their member left the federation.
	ShardSummariesDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace,
		Subsystem: "shard",
		Name:      "summaries_deleted_total",
		Help:      "MemberSummaries deleted because their member's KubeFedCluster is gone.",
	})
)

// Transitions for ShardLeaseTransitions.
const (
	LeaseAcquired = "acquired"
	LeaseReleased = "released"
	LeaseLost     = "lost"
)

func init() {
	mustRegister(ShardOwnedMembers, ShardPeers, ShardLeaseTransitions, ShardSummaryUnknown, ShardSummariesDeleted)
}
