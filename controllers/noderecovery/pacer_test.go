package noderecovery

import (
	"testing"
	"time"
)

// TestPacerDoublesUpToAMinute: the first round of a recovery goes at once;
// each later one waits twice the gap before it, never more than a minute;
// another recovery of the node (a new record) and a forgotten node start
// over.
func TestPacerDoublesUpToAMinute(t *testing.T) {
	var p pacer
	t0 := time.Unix(1000, 0)
	k := paceKey{cluster: "m1", node: "n1", record: "r1"}
	if w, n := p.wait(k, t0); w != 0 || n != 0 {
		t.Fatalf("first round waits %s after %d rounds, want at once", w, n)
	}
	now := t0
	var gaps []time.Duration
	for range 9 {
		p.deleted(k, now)
		w, _ := p.wait(k, now)
		gaps = append(gaps, w)
		now = now.Add(w)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i, g := range gaps {
		if g != want[i]*time.Second {
			t.Fatalf("gaps %v, want %v seconds", gaps, want)
		}
	}
	if w, _ := p.wait(k, now.Add(-time.Second)); w != time.Second {
		t.Errorf("a second before the round is due it waits %s, want 1s", w)
	}
	if w, _ := p.wait(paceKey{cluster: "m1", node: "n1", record: "r2"}, now); w != 0 {
		t.Errorf("a new record of the node waits %s, want at once", w)
	}
	p.forget("m1", "n1")
	if w, n := p.wait(k, now); w != 0 || n != 0 {
		t.Errorf("after forget: waits %s after %d rounds, want at once", w, n)
	}
}
