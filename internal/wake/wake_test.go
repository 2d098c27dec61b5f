package wake

import (
	"testing"
	"time"
)

func TestSoonestAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const floor, resync = 100 * time.Millisecond, 30 * time.Second
	for _, tc := range []struct {
		name  string
		add   func(*Soonest)
		want  time.Duration
		wantT time.Time
	}{
		{"nothing added: resync", func(*Soonest) {}, resync, time.Time{}},
		{"zero time and non-positive delays ignored", func(s *Soonest) { s.At(time.Time{}); s.In(now, 0); s.In(now, -time.Second) }, resync, time.Time{}},
		{"soonest of several", func(s *Soonest) { s.In(now, 5*time.Second); s.In(now, 2*time.Second); s.At(now.Add(9 * time.Second)) }, 2 * time.Second, now.Add(2 * time.Second)},
		{"later than resync: resync", func(s *Soonest) { s.In(now, time.Hour) }, resync, now.Add(time.Hour)},
		{"already due: floor", func(s *Soonest) { s.At(now.Add(-time.Minute)) }, floor, now.Add(-time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Soonest
			tc.add(&s)
			if got := s.After(now, floor, resync); got != tc.want {
				t.Errorf("After = %v, want %v", got, tc.want)
			}
			if !s.Time().Equal(tc.wantT) {
				t.Errorf("Time = %v, want %v", s.Time(), tc.wantT)
			}
		})
	}
}

func TestEarliest(t *testing.T) {
	a := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Earliest(time.Time{}, a.Add(time.Second), a, time.Time{}); !got.Equal(a) {
		t.Errorf("Earliest = %v, want %v", got, a)
	}
	if got := Earliest(time.Time{}); !got.IsZero() {
		t.Errorf("Earliest of zeros = %v, want zero", got)
	}
}
