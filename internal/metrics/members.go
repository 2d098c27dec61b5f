package metrics

import "github.com/prometheus/client_golang/prometheus"

// Member connection metrics, maintained by controllers/member.
var (
	// MemberConnected is 1 while fedfailover holds a healthy connection to the
	// member, 0 while it knows the member but is not connected.
	MemberConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: "member",
		Name:      "connected",
		Help:      "1 if the member cluster is connected, 0 if not.",
	}, []string{ClusterLabel})

	// MemberProbeDuration is the latency of health probes, by result
	// ("success" or "failure").
	MemberProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Subsystem: "member",
		Name:      "probe_duration_seconds",
		Help:      "Latency of member cluster health probes.",
		Buckets:   []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{ClusterLabel, "result"})

	// MemberCacheObjects counts the objects held in a member's cache, by kind.
	MemberCacheObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: "member",
		Name:      "cache_objects",
		Help:      "Objects held in the member cluster cache, by kind.",
	}, []string{ClusterLabel, "kind"})

	// MemberCacheSyncDuration is how long a connection's cache took to sync
	// (its first list of every cached kind), observed when it has synced.
	MemberCacheSyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Subsystem: "member",
		Name:      "cache_sync_duration_seconds",
		Help:      "Time from connecting to a member cluster until its cache had synced.",
		Buckets:   []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{ClusterLabel})

	// MemberDisconnects counts connections torn down, by reason.
	MemberDisconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Subsystem: "member",
		Name:      "disconnects_total",
		Help:      "Member cluster connections torn down, by reason.",
	}, []string{ClusterLabel, "reason"})
)

// Probe results for MemberProbeDuration.
const (
	ProbeSuccess = "success"
	ProbeFailure = "failure"
)

func init() {
	mustRegister(MemberConnected, MemberProbeDuration, MemberCacheObjects, MemberCacheSyncDuration, MemberDisconnects)
}
