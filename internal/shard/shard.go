// Package shard decides which manager replica owns which member cluster,
// and when a Lease seen from this replica still counts as held. It is pure:
// no clients, no clocks (time is passed in).
//
// Ownership is rendezvous (highest random weight) hashing: every replica
// scores each (peer, member) pair with the same hash and the highest-scoring
// live peer owns the member. All replicas that see the same peers agree
// without talking to each other, and when a peer joins or leaves only the
// members it gains or held move.
package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"regexp"
	"time"
)

// score is the weight of peer for member: the first 8 bytes of
// sha256(peer NUL member). The NUL keeps ("ab","c") and ("a","bc") apart.
func score(peer, member string) uint64 {
	h := sha256.New()
	h.Write([]byte(peer))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Owner returns the peer that owns member among peers, "" when there is no
// peer. Equal scores (practically never) go to the smaller name, so the
// answer does not depend on the order of peers.
func Owner(member string, peers []string) string {
	best, bestScore := "", uint64(0)
	for _, p := range peers {
		s := score(p, member)
		if best == "" || s > bestScore || (s == bestScore && p < best) {
			best, bestScore = p, s
		}
	}
	return best
}

// Owned returns the members, in the order given, that self owns among
// peers. self must be in peers to own anything: a replica that does not
// see itself live owns nothing.
func Owned(self string, members, peers []string) []string {
	var out []string
	for _, m := range members {
		if Owner(m, peers) == self {
			out = append(out, m)
		}
	}
	return out
}

// Observation is what a replica saw of another's Lease: the Lease's own
// record (compared for equality only, never with a clock) and when, on the
// observer's clock, that record was first seen.
type Observation struct {
	Record     string
	ObservedAt time.Time
}

// Observe returns the observation after seeing record at now: unchanged if
// it is the record already seen, else a new one starting now. This is how
// client-go's leader election judges another holder: another process's
// renewTime is never compared with this clock.
func Observe(prev Observation, record string, now time.Time) Observation {
	if prev.Record == record && !prev.ObservedAt.IsZero() {
		return prev
	}
	return Observation{Record: record, ObservedAt: now}
}

// Fresh is true while the observed record has changed within leaseDuration
// of now: its holder may still be alive and renewing.
func Fresh(o Observation, leaseDuration time.Duration, now time.Time) bool {
	return !o.ObservedAt.IsZero() && now.Before(o.ObservedAt.Add(leaseDuration))
}

// HoldValid is true while a Lease this replica renewed at lastRenew (its own
// clock, taken before the renewal was sent) may still be acted on at now
// with margin left: now+margin is before lastRenew+renewDeadline. Another
// replica can take the Lease over only leaseDuration after it saw that
// renewal, so with renewDeadline < leaseDuration the holder always stops
// first.
func HoldValid(lastRenew, now time.Time, renewDeadline, margin time.Duration) bool {
	return !lastRenew.IsZero() && now.Add(margin).Before(lastRenew.Add(renewDeadline))
}

// maxNameLen is the longest Lease name produced: a DNS label, so names also
// fit where labels are required.
const maxNameLen = 63

// plainName matches keys usable in a Lease name as they are.
var plainName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// LeaseName is the Lease name for key under prefix (e.g. "fedfailover-member-"):
// prefix+key when that is short enough and a valid name, else prefix plus a
// hash of key.
func LeaseName(prefix, key string) string {
	if n := prefix + key; len(n) <= maxNameLen && plainName.MatchString(key) {
		return n
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + hex.EncodeToString(sum[:])[:maxNameLen-len(prefix)]
}
