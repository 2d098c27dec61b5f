package member

import (
	"time"

	"github.com/fedfailover/fedfailover/internal/defaults"
)

// DefaultNamespace is where kubefed keeps KubeFedCluster objects and Secrets.
const DefaultNamespace = "kube-federation-system"

// Options configure member connections. Zero values take the defaults below.
type Options struct {
	// Namespace holds the KubeFedClusters and their Secrets.
	Namespace string
	// ProbePeriod is how often a connected member is probed.
	ProbePeriod time.Duration
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
	// FailureThreshold consecutive failed probes tear the connection down.
	// 401 and 403 tear it down at once.
	FailureThreshold int
	// The defaults notice a member whose API server died within
	// FailureThreshold x ProbePeriod (4 s): the rebalance hysteresis is the
	// policy's clusterFailedAfter, counted from the teardown, and the member
	// failure target (replicas elsewhere within 30 s, kubefed alone ~74 s at
	// its default timings) leaves no room for a slow probe on top of it. A
	// false teardown costs a reconnect and a relist, nothing more.
	// ConnectTimeout bounds the first requests of a new connection.
	ConnectTimeout time.Duration
	// CacheSyncTimeout bounds the initial list of the member's cache.
	CacheSyncTimeout time.Duration
	// RetryPeriod is how long to wait before connecting again after a failure.
	RetryPeriod time.Duration
	// StatusRefresh is how stale status.members[].lastProbeTime may get
	// before a FailoverPolicy status is rewritten only to refresh it.
	StatusRefresh time.Duration
	// MaxConcurrentReconciles lets a slow or unreachable member not hold up
	// the others.
	MaxConcurrentReconciles int
	// QPS and Burst limit requests to each member.
	QPS   float32
	Burst int
	// AllowInsecureEndpoints accepts http:// member endpoints, whose bearer
	// token travels in clear. Off by default.
	AllowInsecureEndpoints bool
	// DisablePolicyStatus turns off the FailoverPolicy status controller
	// (for when another controller owns that status).
	DisablePolicyStatus bool
	// Shard shards members across replicas (off unless its Namespace is set).
	Shard ShardOptions
}

func (o Options) withDefaults() Options {
	defaults.String(&o.Namespace, DefaultNamespace)
	defaults.Set(&o.ProbePeriod, 2*time.Second)
	defaults.Set(&o.ProbeTimeout, 3*time.Second)
	defaults.Set(&o.ConnectTimeout, 10*time.Second)
	defaults.Set(&o.CacheSyncTimeout, 2*time.Minute)
	defaults.Set(&o.RetryPeriod, o.ProbePeriod)
	defaults.Set(&o.StatusRefresh, time.Minute)
	defaults.Set(&o.FailureThreshold, 2)
	defaults.Set(&o.MaxConcurrentReconciles, 10)
	defaults.Set(&o.QPS, 50)
	defaults.Set(&o.Burst, 100)
	return o
}
