// Package wake computes when a reconciler looks again: the soonest of the
// time-based transitions a pass found, bounded by a periodic resync that
// catches what no watch reports. Every controller requeues through it, so
// the bounds are the same everywhere.
package wake

import "time"

// Soonest keeps the earliest of several wake-up times; zero times are
// ignored. The zero value has none.
type Soonest struct{ at time.Time }

// At adds a wake-up time.
func (s *Soonest) At(t time.Time) {
	if !t.IsZero() && (s.at.IsZero() || t.Before(s.at)) {
		s.at = t
	}
}

// In adds a wake-up d after now; d ≤ 0 means none.
func (s *Soonest) In(now time.Time, d time.Duration) {
	if d > 0 {
		s.At(now.Add(d))
	}
}

// Time is the soonest wake-up, zero when none was added.
func (s Soonest) Time() time.Time { return s.at }

// After returns how long to wait from now: until the soonest wake-up, at
// least floor (a due transition is not spun on) and at most resync (also
// the wait when none was added).
func (s Soonest) After(now time.Time, floor, resync time.Duration) time.Duration {
	if s.at.IsZero() {
		return resync
	}
	return min(max(s.at.Sub(now), floor), resync)
}

// Earliest is the earliest non-zero time of ts (zero when all are).
func Earliest(ts ...time.Time) time.Time {
	var s Soonest
	for _, t := range ts {
		s.At(t)
	}
	return s.Time()
}
