package member

import (
	"fmt"
	"time"

	"k8s.io/client-go/transport"

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
	// SyncStallTimeout tears down a connection whose cache has not synced
	// and whose list and watch requests read nothing for this long. A first
	// list that keeps reading is never cut short, however long it takes
	// (20,000 pods on a loaded member can take minutes).
	SyncStallTimeout time.Duration
	// RetryPeriod is how long to wait before connecting again after a
	// failure; it doubles with each consecutive failed attempt (connect
	// error, stalled sync, failed probes) up to MaxRetryPeriod, and starts
	// again once a cache has synced or the member's configuration changed.
	RetryPeriod    time.Duration
	MaxRetryPeriod time.Duration
	// StatusRefresh, when set, is how stale status.members[].lastProbeTime
	// may get before a FailoverPolicy status is rewritten only to refresh
	// it. Unset (the default), lastProbeTime moves only with the rest of
	// the member's entry: a status write per policy every minute is load a
	// federation at rest should not pay.
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
	// WriteTimeout bounds every write to a member, from its admission by
	// the write fence until its response: the request is cancelled then.
	// It must be shorter than the gap between the Lease duration and the
	// renew deadline (the shard Lease's, or, unsharded, the leader
	// election's, controller-runtime's 15 s and 10 s), so no write sent
	// under a hold can land after another replica took the member over.
	// Default: four fifths of that gap (4 s at the default timings).
	WriteTimeout time.Duration
	// LeaderElectionGap is, unsharded, the leader election's lease duration
	// minus its renew deadline (the manager's --leader-elect-* flags).
	// Default: controller-runtime's 15 s - 10 s.
	LeaderElectionGap time.Duration
	// WrapTransport, if set, wraps the transport of every member connection
	// (closest to the network), e.g. to trace or to slow requests in tests.
	WrapTransport transport.WrapperFunc
}

func (o Options) withDefaults() Options {
	defaults.String(&o.Namespace, DefaultNamespace)
	defaults.Set(&o.ProbePeriod, 2*time.Second)
	defaults.Set(&o.ProbeTimeout, 3*time.Second)
	defaults.Set(&o.ConnectTimeout, 10*time.Second)
	defaults.Set(&o.SyncStallTimeout, time.Minute)
	defaults.Set(&o.RetryPeriod, o.ProbePeriod)
	// A member that comes back is seen within 10 s, kubefed's own health
	// check period: backoff must not delay failback more than kubefed would.
	defaults.Set(&o.MaxRetryPeriod, 10*time.Second)
	defaults.Set(&o.FailureThreshold, 2)
	defaults.Set(&o.MaxConcurrentReconciles, 10)
	defaults.Set(&o.QPS, 50)
	defaults.Set(&o.Burst, 100)
	defaults.Set(&o.WriteTimeout, o.writeTimeoutGap()*4/5)
	return o
}

// Unsharded, writes to members are sent by the elected leader only; these
// are controller-runtime's default leader election timings, used when
// LeaderElectionGap is not set.
const (
	leaderElectionLeaseDuration = 15 * time.Second
	leaderElectionRenewDeadline = 10 * time.Second
)

// writeTimeoutGap is the time between the renew deadline, after which this
// replica sends no more writes to a member, and the earliest moment
// another replica may take the member over (the Lease duration): every
// write must have returned within it.
func (o Options) writeTimeoutGap() time.Duration {
	if o.Shard.Enabled() {
		s := o.Shard
		defaults.Set(&s.LeaseDuration, defaultShardLeaseDuration)
		defaults.Set(&s.RenewDeadline, defaultShardRenewDeadline)
		return s.LeaseDuration - s.RenewDeadline
	}
	if o.LeaderElectionGap > 0 {
		return o.LeaderElectionGap
	}
	return leaderElectionLeaseDuration - leaderElectionRenewDeadline
}

// checkWriteTimeout refuses a write timeout that lets a write outlive the
// hold it was sent under.
func (o Options) checkWriteTimeout() error {
	gap := o.writeTimeoutGap()
	if o.WriteTimeout <= 0 || o.WriteTimeout >= gap {
		if o.Shard.Enabled() {
			return fmt.Errorf("member write timeout %s: must be > 0 and shorter than the shard lease duration minus the renew deadline (%s)", o.WriteTimeout, gap)
		}
		return fmt.Errorf("member write timeout %s: must be > 0 and shorter than the leader election's lease duration minus its renew deadline (%s)",
			o.WriteTimeout, gap)
	}
	return nil
}

// retryDelay is how long to wait before attempt+1 after attempt consecutive
// failed attempts (attempt >= 1): RetryPeriod doubled per failure, capped.
func (o Options) retryDelay(attempt int) time.Duration {
	d := o.RetryPeriod
	for i := 1; i < attempt && d < o.MaxRetryPeriod; i++ {
		d *= 2
	}
	return min(d, max(o.MaxRetryPeriod, o.RetryPeriod))
}
