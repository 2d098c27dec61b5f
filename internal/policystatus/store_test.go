package policystatus

import (
	"testing"
)

func drain(s *Store[string, int]) []string {
	var out []string
	for s.Pending() > 0 {
		out = append(out, (<-s.notify).Object.GetName())
	}
	return out
}

func TestStoreWakesTheWriterOnChangesOnly(t *testing.T) {
	s := NewStore[string](func(a, b int) bool { return a == b }, 16)
	s.Set("m1", "p", 1)
	s.Set("m1", "p", 1)
	if got := drain(s); len(got) != 1 || got[0] != "p" {
		t.Fatalf("first report: woke %v, want [p]", got)
	}
	s.Set("m1", "p", 2)
	s.Set("m2", "", 5) // governed by no policy: nobody to wake
	if got := drain(s); len(got) != 1 || got[0] != "p" {
		t.Fatalf("changed report: woke %v, want [p]", got)
	}
	s.Set("m1", "q", 2) // the member moved to another policy: both rewrite
	if got := drain(s); len(got) != 2 || got[0] != "q" || got[1] != "p" {
		t.Fatalf("policy change: woke %v, want [q p]", got)
	}
	if p, _ := s.Snapshot("p"); len(p) != 0 {
		t.Errorf("old policy still has %v", p)
	}
	if q, _ := s.Snapshot("q"); len(q) != 1 || q["m1"] != 2 {
		t.Errorf("new policy has %v", q)
	}
	s.Delete("m1")
	if got := drain(s); len(got) != 1 || got[0] != "q" {
		t.Fatalf("delete: woke %v, want [q]", got)
	}
	if q, _ := s.Snapshot("q"); len(q) != 0 {
		t.Errorf("deleted entry still there: %v", q)
	}
}

func TestStoreDecisionsBoundedNewestFirst(t *testing.T) {
	s := NewStore[string](func(a, b int) bool { return a == b }, 64)
	for i := range MaxDecisions + 5 {
		s.Decide("p", d(i, "o", "A"))
	}
	_, got := s.Snapshot("p")
	if len(got) != MaxDecisions || got[0].Time.Unix() != t0.Unix()+int64(MaxDecisions+4) {
		t.Fatalf("%d decisions, first at %v", len(got), got[0].Time)
	}
	if _, other := s.Snapshot("q"); len(other) != 0 {
		t.Errorf("another policy sees %v", other)
	}
}

func TestStoreQueueFullDoesNotBlock(t *testing.T) {
	s := NewStore[string](func(a, b int) bool { return a == b }, 1)
	for i := range 5 {
		s.Set("m", "p", i)
	}
	if s.Pending() != 1 {
		t.Fatalf("%d pending, want 1", s.Pending())
	}
}

// TestStoreEachVisitsThePolicysEntries: Each sees what Snapshot returns,
// the policy's entries only, as last set.
func TestStoreEachVisitsThePolicysEntries(t *testing.T) {
	s := NewStore[string](func(a, b int) bool { return a == b }, 16)
	s.Set("m1", "p", 1)
	s.Set("m2", "p", 2)
	s.Set("m3", "q", 3)
	s.Set("m2", "p", 4)
	s.Delete("m1")
	got := map[string]int{}
	s.Each("p", func(k string, e int) { got[k] = e })
	want, _ := s.Snapshot("p")
	if len(got) != 1 || got["m2"] != 4 || len(want) != len(got) || want["m2"] != got["m2"] {
		t.Errorf("Each(p) visited %v, want %v (m2 = 4 only)", got, want)
	}
}
