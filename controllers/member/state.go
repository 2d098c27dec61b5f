package member

import "time"

// memberState is what the Cache knows of one KubeFedCluster. Only Cache
// methods read or change it, under Cache.mu; the reconciler decides and
// calls them (as cluster-api's clusterAccessor keeps its lockedState).
type memberState struct {
	conn            *connection // nil while not connected; its cache may still be syncing
	synced          bool        // conn's cache has synced: only then is the member connected
	fingerprint     string      // of the inputs conn was built from
	token           string      // only to redact messages
	reason, message string
	denied          string // the refused permissions reason and message name (deniedKey)
	lastProbe       time.Time
	failures        int // consecutive failed probes of conn
	// unanswered: conn had synced, then FailureThreshold probes in a row
	// failed. The member is not connected, but its cache is kept while
	// its watches still read (probe), so a busy API server that answers
	// again costs no relist.
	unanswered bool
	// brokenSeen is conn.brokenStreams() when the cache was last known
	// current: at its sync, then at each answered probe.
	brokenSeen    int64
	connectedOnce bool // by this process: before that, nothing is known of the member
	// While conn syncs: since when, and its last progress (syncprogress.go).
	syncStart time.Time
	progress  syncProgress
	// Backoff: consecutive failed attempts since the last synced cache, and
	// when the inputs they were made with may be tried again.
	attempts         int
	retryAt          time.Time
	retryFingerprint string
}

// connected is true once a connection's cache has synced.
func (m *memberState) connected() bool { return m.conn != nil && m.synced && !m.unanswered }

// syncing is true while a connection's cache lists: nothing is known of the
// member's objects yet.
func (m *memberState) syncing() bool { return m.conn != nil && !m.synced }

// connState is the part of a member's state whose changes are reported
// (log, event, metric, subscribers).
type connState struct {
	connected       bool
	reason, message string
	denied          string
}

func (m *memberState) snapshot() connState {
	return connState{connected: m.connected(), reason: m.reason, message: m.message, denied: m.denied}
}

// changed is true when subscribers must hear about the transition: a
// permission the member refuses, or grants again, is one.
func (s connState) changed(prev connState) bool {
	return s.connected != prev.connected || s.reason != prev.reason || s.denied != prev.denied
}

// connectedStatus is the reason and message of a synced connection that
// answers its probes: Connected, or MemberPermissionDenied naming what
// the member refused.
func connectedStatus(conn *connection) (reason, message, denied string) {
	msg := connectedMessage(conn)
	if ds := conn.denials.list(); len(ds) > 0 {
		return ReasonMemberPermissionDenied, deniedMessage(ds) + "; " + msg, deniedKey(ds)
	}
	return ReasonConnected, msg, ""
}

// syncingStatus is the reason and message of a connection whose cache
// syncs: Syncing, or MemberPermissionDenied when the member refused
// something (an informer's list, typically); either way it is unknown
// until it has synced.
func syncingStatus(conn *connection, progress string) (reason, message, denied string) {
	if ds := conn.denials.list(); len(ds) > 0 {
		return ReasonMemberPermissionDenied, deniedMessage(ds) + "; " + progress, deniedKey(ds)
	}
	return ReasonSyncing, progress, ""
}

// state returns a copy of the member's state (zero if unknown).
func (c *Cache) state(cluster string) memberState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m, ok := c.members[cluster]; ok {
		return *m
	}
	return memberState{}
}

func (c *Cache) stateLocked(cluster string) *memberState {
	m, ok := c.members[cluster]
	if !ok {
		m = &memberState{reason: ReasonPending}
		c.members[cluster] = m
	}
	return m
}

// setConnected installs a new connection whose cache syncs until
// setSynced. After the Cache stopped, or when this replica no longer holds
// the member's Lease, it is refused (ok false) and the caller must stop conn.
func (c *Cache) setConnected(cluster string, conn *connection, fingerprint, token, message string) (prev, next connState, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Checked under mu: a hold that ends after this is torn down by
	// ownershipChanged, which takes mu too.
	if c.stopped || !c.keepsConnection(cluster) {
		return connState{}, connState{}, false
	}
	m := c.stateLocked(cluster)
	prev = m.snapshot()
	now := c.now()
	m.conn, m.synced, m.fingerprint, m.token = conn, false, fingerprint, token
	m.failures, m.lastProbe = 0, now
	m.syncStart, m.progress = now, syncProgress{at: now}
	m.reason, m.message, m.denied = ReasonSyncing, message, ""
	return prev, m.snapshot(), true
}

// setSynced makes conn, whose cache has synced, the member's connection.
// ok is false when conn was torn down meanwhile.
func (c *Cache) setSynced(cluster string, conn *connection) (prev, next connState, syncTime time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, found := c.members[cluster]
	if !found || m.conn != conn || m.synced {
		return connState{}, connState{}, 0, false
	}
	prev = m.snapshot()
	m.synced, m.connectedOnce, m.attempts = true, true, 0
	m.brokenSeen = conn.brokenStreams()
	m.setStatus(connectedStatus(conn))
	return prev, m.snapshot(), c.now().Sub(m.syncStart), true
}

// setStatus sets the reason, the message (without the token) and the
// refused permissions.
func (m *memberState) setStatus(reason, message, denied string) {
	m.reason, m.message, m.denied = reason, redact(message, m.token), denied
}

// syncProgressed records a look at a syncing conn; progress says what its
// cache received so far.
func (c *Cache) syncProgressed(cluster string, conn *connection, p syncProgress, progress string) (prev, next connState) {
	c.update(cluster, conn, func(s *memberState) {
		prev = s.snapshot()
		s.progress = p
		s.setStatus(syncingStatus(conn, progress))
		next = s.snapshot()
	})
	return prev, next
}

// refreshPermissions makes a synced, answering connection's reason and
// message follow the permissions the member refuses now.
func (c *Cache) refreshPermissions(cluster string, conn *connection) (prev, next connState) {
	c.update(cluster, conn, func(s *memberState) {
		prev = s.snapshot()
		if s.synced && !s.unanswered {
			s.setStatus(connectedStatus(conn))
		}
		next = s.snapshot()
	})
	return prev, next
}

// retryWait is how long a connection attempt with these inputs must still
// wait after earlier failures (zero: try now). New inputs are tried at once.
func (c *Cache) retryWait(cluster, fingerprint string) time.Duration {
	m := c.state(cluster)
	if m.attempts == 0 || m.retryFingerprint != fingerprint {
		return 0
	}
	return max(m.retryAt.Sub(c.now()), 0)
}

// backOff counts a failed attempt made with fingerprint and returns how long
// to wait before the next one.
func (c *Cache) backOff(cluster, fingerprint string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.stateLocked(cluster)
	if m.retryFingerprint != fingerprint {
		m.attempts = 0
	}
	m.attempts++
	d := c.opts.retryDelay(m.attempts)
	m.retryAt, m.retryFingerprint = c.now().Add(d), fingerprint
	return d
}

// setDisconnected records why the member is not connected and stops its
// connection, if any, outside the lock. It returns whether one was stopped.
func (c *Cache) setDisconnected(cluster, reason, message string) (prev, next connState, stopped bool) {
	c.mu.Lock()
	m := c.stateLocked(cluster)
	prev = m.snapshot()
	conn := m.conn
	m.reason, m.message, m.denied, m.failures = reason, redact(message, m.token), "", 0
	m.conn, m.synced, m.unanswered, m.fingerprint, m.token = nil, false, false, "", ""
	next = m.snapshot()
	c.mu.Unlock()
	if conn != nil {
		conn.stop()
	}
	return prev, next, conn != nil
}

// forget drops a member that left the federation and stops its connection.
// known is false when the Cache never heard of it.
func (c *Cache) forget(cluster string) (known, wasConnected bool) {
	c.mu.Lock()
	m, ok := c.members[cluster]
	delete(c.members, cluster)
	c.mu.Unlock()
	if !ok {
		return false, false
	}
	if m.conn != nil {
		m.conn.stop()
	}
	return true, m.conn != nil
}

// probeSucceeded and probeFailed record a probe of conn; a concurrent
// teardown or reconnect wins (the probe was of a connection now gone).
// probeSucceeded records an answered probe; a member whose probes had gone
// unanswered is connected again (prev and next say whether it changed).
func (c *Cache) probeSucceeded(cluster string, conn *connection, at time.Time, broken int64) (prev, next connState) {
	c.update(cluster, conn, func(s *memberState) {
		prev = s.snapshot()
		s.lastProbe, s.failures, s.unanswered, s.brokenSeen = at, 0, false, broken
		if s.synced {
			s.setStatus(connectedStatus(conn))
		}
		next = s.snapshot()
	})
	return prev, next
}

// setUnanswered makes a synced member not connected after its probes
// failed, keeping conn and its cache; progress is the mark its watches'
// reads are measured from. ok is false when conn is no longer the
// member's synced connection.
func (c *Cache) setUnanswered(cluster string, conn *connection, reason, message string, at time.Time, failures int, progress syncProgress) (prev, next connState, ok bool) {
	c.update(cluster, conn, func(s *memberState) {
		if !s.synced {
			return
		}
		prev = s.snapshot()
		s.unanswered, s.lastProbe, s.failures, s.progress = true, at, failures, progress
		s.reason, s.message, s.denied = reason, redact(message, s.token), ""
		next, ok = s.snapshot(), true
	})
	return prev, next, ok
}

func (c *Cache) probeFailed(cluster string, conn *connection, at time.Time, failures int) {
	c.update(cluster, conn, func(s *memberState) { s.lastProbe, s.failures = at, failures })
}

func (c *Cache) update(cluster string, conn *connection, f func(*memberState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.members[cluster]; ok && m.conn == conn {
		f(m)
	}
}
