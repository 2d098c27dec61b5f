package metrics

import "github.com/prometheus/client_golang/prometheus"

// Node recovery metrics, maintained by controllers/noderecovery.
var (
	// NodeRecoveries counts node recoveries by member, method and result
	// (see the NodeRecoveryResult* constants).
	NodeRecoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "node_recoveries_total",
		Help:      "Node recoveries by member cluster, method and result.",
	}, []string{ClusterLabel, "method", "result"})

	// NodeRecoverySeconds measures how long the replacements of a lost
	// node's pods took to run elsewhere, from the node being lost ("lost")
	// and from the fencing action ("fenced").
	NodeRecoverySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "node_recovery_seconds",
		Help:      "Time until the replacements of a lost node's pods ran elsewhere, from the node being lost or from its fencing.",
		Buckets:   []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200},
	}, []string{ClusterLabel, "from"})

	// FencingBlocked counts lost nodes left alone for lack of fencing
	// evidence, once per node loss, by reason.
	FencingBlocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "fencing_blocked_total",
		Help:      "Lost nodes not recovered for lack of fencing evidence, by reason.",
	}, []string{"reason"})

	// StormActive is 1 while recovery is suspended in the member.
	StormActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "storm_active",
		Help:      "1 while node recovery is suspended in the member cluster because too many nodes are lost.",
	}, []string{ClusterLabel})

	// LostNodes counts the lost nodes that the member's last node recovery
	// pass reported, by recovery phase (every phase has a series, 0 when
	// none), so alerts can tell how long a node has been Blocked.
	LostNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "lost_nodes",
		Help:      "Lost nodes of the member cluster by recovery phase, as of the last node recovery pass.",
	}, []string{ClusterLabel, "phase"})

	// OutOfServiceReadyNodes counts Ready nodes that still carry the
	// out-of-service taint fedfailover added. It removes the taint when a
	// node returns, so a lasting non-zero value means the removal fails.
	OutOfServiceReadyNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "out_of_service_ready_nodes",
		Help:      "Ready nodes of the member cluster that still carry the out-of-service taint fedfailover added, as of the last node recovery pass.",
	}, []string{ClusterLabel})
)

// NodeRemediations counts the remediations (fence agents) node recovery
// requested, adopted from another party, or saw end, by member and event
// (see the Remediation* constants).
var NodeRemediations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace,
	Name:      "node_remediations_total",
	Help:      "Remediations of lost nodes requested, adopted or ended, by member cluster and event.",
}, []string{ClusterLabel, "event"})

// Events of NodeRemediations.
const (
	RemediationRequested = "requested"
	RemediationAdopted   = "adopted"
	RemediationSucceeded = "succeeded"
	RemediationFailed    = "failed"
	RemediationTimedOut  = "timed_out"
	RemediationDryRun    = "dry_run"
)

// Results of NodeRecoveries.
const (
	// NodeRecoveryResultSucceeded: every tracked workload runs elsewhere.
	NodeRecoveryResultSucceeded = "succeeded"
	// NodeRecoveryResultNodeReturned: the node came back before that.
	NodeRecoveryResultNodeReturned = "node_returned"
	// NodeRecoveryResultDryRun: the action was only reported.
	NodeRecoveryResultDryRun = "dry_run"
)

// Values of the "from" label of NodeRecoverySeconds.
const (
	RecoveryFromLost   = "lost"
	RecoveryFromFenced = "fenced"
)

func init() {
	mustRegister(NodeRecoveries, NodeRecoverySeconds, FencingBlocked, StormActive, LostNodes, OutOfServiceReadyNodes, NodeRemediations)
}
