package chaos

import (
	"testing"
	"time"
)

func TestTruthSpans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr := NewTruth(t0, testTopology)
	if !tr.Alive("member1-node-0", at(5)) {
		t.Fatal("a node is alive from the start")
	}
	tr.Close(keyAlive+"member1-node-0", at(10)) // powered off
	tr.Open(keyAlive+"member1-node-0", at(30))  // powered on
	for s, want := range map[int]bool{9: true, 10: true, 11: false, 29: false, 30: true, 99: true} {
		if got := tr.Alive("member1-node-0", at(s)); got != want {
			t.Errorf("Alive at +%ds = %v, want %v", s, got, want)
		}
	}
	if tr.Alive("member3-node-0", at(5)) {
		t.Error("an unknown node is never alive")
	}

	tr.Open(keyCut+"member1", at(20))
	tr.Close(keyCut+"member1", at(40))
	tr.Open(keyManagerDown, at(50))
	tr.Close(keyManagerDown, at(55))
	cases := []struct {
		at    int
		since int
		ok    bool
	}{{10, 0, true}, {25, 0, false}, {45, 40, true}, {52, 0, false}, {60, 55, true}}
	for _, c := range cases {
		since, ok := tr.Reaches("member1", at(c.at))
		if ok != c.ok || (ok && !since.Equal(at(c.since))) {
			t.Errorf("Reaches(member1, +%ds) = %v, %v; want +%ds, %v", c.at, since.Sub(t0), ok, c.since, c.ok)
		}
	}
	if since, ok := tr.Reaches("member2", at(45)); !ok || !since.Equal(t0) {
		t.Errorf("member2 was never cut: got %v %v", since, ok)
	}
	if since, ok := tr.Reaches("member2", at(60)); !ok || !since.Equal(at(55)) {
		t.Errorf("the manager restart counts for every member: got %v %v", since.Sub(t0), ok)
	}
	tr.Open(keyNoWrites, at(62))
	tr.Close(keyNoWrites, at(65))
	if _, ok := tr.Reaches("member2", at(63)); ok {
		t.Error("a paused policy writes nothing: fedfailover does not act on members then")
	}
	tr.Mark(keyCredential+"member2", at(70))
	if since, ok := tr.Reaches("member2", at(80)); !ok || !since.Equal(at(70)) {
		t.Errorf("a rotated credential restarts the clock: got %v %v", since.Sub(t0), ok)
	}
}

func TestTruthRanWithinAndEvidence(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr := NewTruth(t0, testTopology)
	tr.Close(keyAlive+"member1-node-0", at(10)) // powered off
	tr.Open(keyAlive+"member1-node-0", at(30))  // powered on
	for _, c := range []struct {
		from, to int
		want     bool
	}{{0, 5, true}, {10, 12, true}, {11, 29, false}, {20, 30, true}, {40, 50, true}} {
		if got := tr.RanWithin("member1-node-0", at(c.from), at(c.to)); got != c.want {
			t.Errorf("RanWithin [+%ds, +%ds] = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	// member1-node-1 partitioned from +40s, killed by the fence agent at
	// +70s: it last ran at +40s, though its process lived until +70s.
	tr.Open(keyFrozen+"member1-node-1", at(40))
	tr.Close(keyAlive+"member1-node-1", at(70))
	tr.Close(keyFrozen+"member1-node-1", at(70))
	tr.Open(keyFenced+"member1-node-1", at(70))
	for _, c := range []struct {
		from, to int
		want     bool
	}{{30, 40, true}, {41, 69, false}, {60, 80, false}, {39, 41, true}} {
		if got := tr.RanWithin("member1-node-1", at(c.from), at(c.to)); got != c.want {
			t.Errorf("member1-node-1 RanWithin [+%ds, +%ds] = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if !tr.Alive("member1-node-1", at(50)) || tr.Fenced("member1-node-1", at(69)) || !tr.Fenced("member1-node-1", at(71)) {
		t.Error("a partitioned node is alive; fenced only once the agent's kill returned")
	}
	tr.Open(keyEvidence+"member1-node-0", at(9))
	tr.Close(keyEvidence+"member1-node-0", at(31))
	for s, want := range map[int]bool{8: false, 9: true, 20: true, 31: true, 32: false} {
		if got := tr.Evidence("member1-node-0", at(s)); got != want {
			t.Errorf("Evidence at +%ds = %v, want %v", s, got, want)
		}
	}
	if tr.Evidence("member1-node-1", at(20)) {
		t.Error("no evidence was written on member1-node-1")
	}
}
