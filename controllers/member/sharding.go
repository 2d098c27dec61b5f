package member

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fedfailover/fedfailover/internal/metrics"
)

// ReasonNotOwned: with sharding on, another replica owns the member; this
// one holds no connection to it and does not act on it.
const ReasonNotOwned = "NotOwned"

const notOwnedMessage = "owned by another replica (members are sharded across replicas)"

// memberAgent is the user agent of the member clients. Audit checkers (the
// chaos campaign, the sharding lab tests) find fedfailover's writes to a
// member by this prefix.
const memberAgent = "fedfailover-member"

// memberUserAgent is the user agent of this replica's member clients. With
// sharding on it carries the shard identity: replicas share the member
// credentials (and, behind a proxy, the source address), so only the agent
// tells their writes apart in a member's audit log.
func (c *Cache) memberUserAgent() string {
	if c.shard == nil {
		return memberAgent
	}
	return memberAgent + "/" + c.shard.o.Identity
}

// Sharded reports whether members are sharded across replicas.
func (c *Cache) Sharded() bool { return c.shard != nil }

// HoldsMember reports whether this replica may act on the member right now:
// always with sharding off; with sharding on, only while it holds the
// member's Lease with margin before its renew deadline. Every destructive
// write to a member checks it right before the write.
func (c *Cache) HoldsMember(cluster string) bool {
	return c.shard == nil || c.shard.HoldsMember(cluster)
}

// keepsConnection reports whether this replica connects to the member: with
// sharding on, from acquiring its Lease until the hold is dropped (at the
// renew deadline at the latest). Writes need HoldsMember, which ends sooner.
func (c *Cache) keepsConnection(cluster string) bool {
	return c.shard == nil || c.shard.isHeld(cluster)
}

// memberNames lists the joined members (not being deleted), for the shard
// coordinator.
func (c *Cache) memberNames(ctx context.Context) ([]string, error) {
	kfcs, err := c.KubeFedClusters(ctx, labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(kfcs))
	for i := range kfcs {
		if kfcs[i].DeletionTimestamp.IsZero() {
			out = append(out, kfcs[i].Name)
		}
	}
	return out, nil
}

// ownershipChanged is the coordinator's callback. A hold that ends stops the
// member's connection at once, after its writes in flight returned (waiting
// up to one retry period); it reports whether they did, and the coordinator
// releases the Lease only then. A hold that starts asks the member
// controller, and every subscriber, to look at the member again.
func (c *Cache) ownershipChanged(cluster string, held bool) (drained bool) {
	drained = true
	if !held {
		var prev, next connState
		var stopped, known bool
		prev, next, stopped, known, drained = c.setNotOwned(cluster, false)
		if known {
			recordNotOwned(cluster, stopped)
			if next.changed(prev) {
				c.log.Info("Member lease no longer held: connection torn down", "cluster", cluster, "wasConnected", stopped)
			}
		}
	} else {
		c.log.Info("Member lease acquired", "cluster", cluster)
	}
	c.notify(cluster)
	return drained
}

func recordNotOwned(cluster string, stopped bool) {
	if stopped {
		metrics.MemberDisconnects.WithLabelValues(cluster, ReasonNotOwned).Inc()
		metrics.MemberCacheObjects.DeletePartialMatch(map[string]string{metrics.ClusterLabel: cluster})
	}
	metrics.MemberConnected.WithLabelValues(cluster).Set(0)
}

// setNotOwned records that another replica owns the member and stops its
// connection, if any, once its writes in flight returned (drained) or one
// retry period passed. Unlike a disconnect it forgets that this process was
// ever connected: the member is unknown here, not failed. With create
// false a member the Cache does not know (it left) stays unknown.
func (c *Cache) setNotOwned(cluster string, create bool) (prev, next connState, stopped, known, drained bool) {
	c.mu.Lock()
	if _, ok := c.members[cluster]; !ok && !create {
		c.mu.Unlock()
		return prev, next, false, false, true
	}
	m := c.stateLocked(cluster)
	prev = m.snapshot()
	conn := m.conn
	m.reason, m.message, m.failures, m.connectedOnce = ReasonNotOwned, notOwnedMessage, 0, false
	m.conn, m.fingerprint, m.token = nil, "", ""
	next = m.snapshot()
	c.mu.Unlock()
	drained = true
	if conn != nil {
		drained = conn.fence.close(c.drainWithin())
		conn.stop()
	}
	return prev, next, conn != nil, true, drained
}

// drainWithin is how long a hand-over waits for the member's writes in
// flight: one retry period, as long as a renewal may take.
func (c *Cache) drainWithin() time.Duration {
	if c.shard == nil {
		return 0
	}
	return c.shard.o.RetryPeriod
}

// requestForKubeFedCluster maps a member to the member controller's request.
func (c *Cache) requestForKubeFedCluster(_ context.Context, cluster string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.opts.Namespace, Name: cluster}}}
}

// ShardIdentity is this replica's shard identity; empty unsharded.
func (c *Cache) ShardIdentity() string {
	if c.shard == nil {
		return ""
	}
	return c.shard.o.Identity
}

// ShardNamespace is where the shard Leases (and the member summaries) are;
// empty unsharded.
func (c *Cache) ShardNamespace() string {
	if c.shard == nil {
		return ""
	}
	return c.shard.o.Namespace
}

// MemberHolder is the replica that holds the member (sharded), as this
// replica last saw the member's Lease, and whether that hold is live on
// this replica's clock. Unsharded: this replica, always live.
func (c *Cache) MemberHolder(cluster string) (string, bool) {
	if c.shard == nil {
		return "", true
	}
	return c.shard.holderOf(cluster)
}
