package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fedfailover/fedfailover/controllers/member"
)

// shardFlags turn on sharding of members across replicas. Off by default:
// one replica (or one leader) connects to every member, as without them.
type shardFlags struct {
	enabled       bool
	namespace     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	// rebalance: plan on every member with summaries (experimental).
	rebalance bool
}

func (f *shardFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "shard", false, "Shard member clusters across replicas: each replica connects to and recovers only the members whose Lease it holds (rebalance stays with the elected leader).")
	fs.StringVar(&f.namespace, "shard-lease-namespace", "", "Namespace of the shard Leases; setting it turns --shard on (default: --leader-election-namespace, else the pod's namespace).")
	fs.DurationVar(&f.leaseDuration, "shard-lease-duration", 15*time.Second, "How long another replica waits, after it last saw a Lease change, before taking it over (whole seconds).")
	fs.DurationVar(&f.renewDeadline, "shard-renew-deadline", 10*time.Second, "How long after its last successful renewal a replica still acts on a member; shorter than --shard-lease-duration.")
	fs.DurationVar(&f.retryPeriod, "shard-retry-period", 2*time.Second, "How often the shard Leases are renewed and peers re-read.")
	fs.BoolVar(&f.rebalance, "sharded-rebalance", false, "Experimental, with --shard: rebalance on every member, each replica publishing what it sees of the members it holds in a MemberSummary that the leader reads. Off: a sharded manager holds every RSP a policy would rebalance (ShardedRebalanceUnsupported).")
}

// podNamespaceFile is where Kubernetes mounts the pod's namespace.
const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// options returns the member cache's shard options: zero when sharding is
// off.
func (f shardFlags) options(leaderElectionNS string) (member.ShardOptions, error) {
	if !f.enabled && f.namespace == "" {
		return member.ShardOptions{}, nil
	}
	ns := f.namespace
	if ns == "" {
		ns = leaderElectionNS
	}
	if ns == "" {
		b, err := os.ReadFile(podNamespaceFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return member.ShardOptions{}, fmt.Errorf("reading the pod's namespace: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	if ns == "" {
		return member.ShardOptions{}, errors.New("--shard: not running in a pod; set --shard-lease-namespace")
	}
	return member.ShardOptions{Namespace: ns, LeaseDuration: f.leaseDuration,
		RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod}, nil
}

// checkWriteTimeout refuses a --member-write-timeout that lets a write
// outlive the hold it was sent under: it must be shorter than the gap
// between the renew deadline (no write is admitted after it) and the lease
// duration (another replica may take over then). 0 takes the default.
func (f shardFlags) checkWriteTimeout(d time.Duration, le leaderElectionTimings) error {
	switch {
	case d == 0:
		return nil // the member cache derives it from the timings in use
	case d < 0:
		return fmt.Errorf("--member-write-timeout (%s) must not be negative", d)
	}
	if f.enabled || f.namespace != "" {
		if gap := f.leaseDuration - f.renewDeadline; d >= gap {
			return fmt.Errorf("--member-write-timeout (%s) must be shorter than --shard-lease-duration (%s) minus --shard-renew-deadline (%s) = %s: a write could land after another replica took the member over",
				d, f.leaseDuration, f.renewDeadline, gap)
		}
		return nil
	}
	if gap := le.leaseDuration - le.renewDeadline; d >= gap {
		return fmt.Errorf("--member-write-timeout (%s) must be shorter than --leader-elect-lease-duration (%s) minus --leader-elect-renew-deadline (%s) = %s: a write could land after another replica took over",
			d, le.leaseDuration, le.renewDeadline, gap)
	}
	return nil
}
