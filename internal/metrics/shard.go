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
)

// Transitions for ShardLeaseTransitions.
const (
	LeaseAcquired = "acquired"
	LeaseReleased = "released"
	LeaseLost     = "lost"
)

func init() {
	mustRegister(ShardOwnedMembers, ShardPeers, ShardLeaseTransitions)
}
