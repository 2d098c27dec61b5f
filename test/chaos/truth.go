package chaos

import (
	"sync"
	"time"
)

// Truth is the lab's ground truth over time, as the runner made it: which
// node processes were alive, when fedfailover ran and reached each member,
// and which faults affected each member. Spans are recorded conservatively
// for the checks: a node counts as alive from the moment its power-on
// starts until its power-off has returned.
type Truth struct {
	mu    sync.Mutex
	start time.Time
	spans map[string][]span
}

type span struct{ from, to time.Time } // to is zero while open

// Span keys.
const (
	// keyAlive + node: its kwok process exists (running or frozen).
	keyAlive = "alive/"
	// keyEvidence + node: the lab's power-off evidence may be on its
	// Machine (from before it is written until after it is cleared).
	keyEvidence = "evidence/"
	// keyFrozen + node: its kwok process is partitioned (stopped): alive,
	// but it does not run, so it renews no Lease (from after the stop took
	// effect until before it continues).
	keyFrozen = "frozen/"
	// keyFenced + node: the lab's fence agent powered it off and reports
	// so (from after the kill returned until before its power-on).
	keyFenced = "fenced/"
	// keyManagerDown: fedfailover is not running.
	keyManagerDown = "manager-down"
	// keyCut + member: fedfailover alone is cut off the member.
	keyCut = "cut/"
	// keyDown + member: the member's API server or etcd is down.
	keyDown = "down/"
	// keyFault + member: any fault that takes capacity from the member
	// (node off or partitioned, control plane down, capacity exhausted).
	keyFault = "fault/"
	// keyCredential + member: its Secret just got a new token (instant).
	keyCredential = "credential/"
	// keyNoWrites: the live policy is paused or in dry run: the user asked
	// fedfailover to write nothing to members, taint removals included.
	keyNoWrites = "no-writes"
)

// NewTruth starts a timeline in which every node of top is alive.
func NewTruth(start time.Time, top Topology) *Truth {
	t := &Truth{start: start, spans: map[string][]span{}}
	for _, nodes := range top.Nodes {
		for _, n := range nodes {
			t.spans[keyAlive+n] = []span{{from: start}}
		}
	}
	return t
}

// Open starts a span of key at at (a no-op when one is open).
func (t *Truth) Open(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.spans[key]
	if len(s) > 0 && s[len(s)-1].to.IsZero() {
		return
	}
	t.spans[key] = append(s, span{from: at})
}

// Close ends the open span of key at at (a no-op when none is open).
func (t *Truth) Close(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.spans[key]
	if len(s) > 0 && s[len(s)-1].to.IsZero() {
		s[len(s)-1].to = at
	}
}

// Mark records an instant event of key.
func (t *Truth) Mark(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spans[key] = append(t.spans[key], span{from: at, to: at})
}

// covered reports whether a span of key contains at.
func (t *Truth) covered(key string, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans[key] {
		if !at.Before(s.from) && (s.to.IsZero() || !at.After(s.to)) {
			return true
		}
	}
	return false
}

// Alive reports whether node's process may have been alive at at.
func (t *Truth) Alive(node string, at time.Time) bool { return t.covered(keyAlive+node, at) }

// RanWithin reports whether node's process may have run (alive and not
// frozen) at any moment of [from, to].
func (t *Truth) RanWithin(node string, from, to time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans[keyAlive+node] {
		if s.from.After(to) || (!s.to.IsZero() && s.to.Before(from)) {
			continue
		}
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.IsZero() || b.After(to) {
			b = to
		}
		if !t.coveredLocked(keyFrozen+node, a, b) {
			return true
		}
	}
	return false
}

// coveredLocked reports whether one span of key contains all of [a, b].
func (t *Truth) coveredLocked(key string, a, b time.Time) bool {
	for _, s := range t.spans[key] {
		if !s.from.After(a) && (s.to.IsZero() || !s.to.Before(b)) {
			return true
		}
	}
	return false
}

// Fenced reports whether the lab's fence agent had powered node off, and
// said so, at at.
func (t *Truth) Fenced(node string, at time.Time) bool { return t.covered(keyFenced+node, at) }

// Evidence reports whether the lab's power-off evidence may have been on
// node's Machine at at.
func (t *Truth) Evidence(node string, at time.Time) bool { return t.covered(keyEvidence+node, at) }

// quietSince returns when the last span of any key ended before at, or the
// start of the timeline; ok is false while one of them covers at.
func (t *Truth) quietSince(at time.Time, keys ...string) (since time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	since = t.start
	for _, k := range keys {
		for _, s := range t.spans[k] {
			if s.from.After(at) {
				continue
			}
			if s.to.IsZero() || s.to.After(at) {
				return time.Time{}, false
			}
			if s.to.After(since) {
				since = s.to
			}
		}
	}
	return since, true
}

// Reaches returns since when fedfailover has been running, reaching member
// and allowed to write to it, without interruption at at (ok false: not
// now).
func (t *Truth) Reaches(member string, at time.Time) (time.Time, bool) {
	return t.quietSince(at, keyManagerDown, keyCut+member, keyDown+member, keyCredential+member, keyNoWrites)
}

// Undisturbed returns since when no fault has taken capacity from member.
func (t *Truth) Undisturbed(member string, at time.Time) (time.Time, bool) {
	return t.quietSince(at, keyFault+member)
}
