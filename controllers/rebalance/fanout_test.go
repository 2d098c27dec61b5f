package rebalance

import (
	"sync/atomic"
	"testing"
	"time"
)

// A burst of changes fans out twice (at its first change, and once for the
// rest at the end of the window), not once per change; a lone change fans
// out at once.
func TestFanOutGathersABurst(t *testing.T) {
	var emitted atomic.Int32
	f := &fanOut{window: 200 * time.Millisecond, emit: func() { emitted.Add(1) }}
	closed := func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.open, "the window still runs"
	}

	f.trigger()
	if n := emitted.Load(); n != 1 {
		t.Fatalf("a lone change: %d fan-outs at once, want 1", n)
	}
	pollUntil(t, 5*time.Second, "the window closed", closed)
	if n := emitted.Load(); n != 1 {
		t.Fatalf("a lone change: %d fan-outs in all, want 1", n)
	}

	for range 6000 { // a member's first list of nodes
		f.trigger()
	}
	if n := emitted.Load(); n != 2 {
		t.Fatalf("a burst's first change: %d fan-outs in all, want 2", n)
	}
	pollUntil(t, 5*time.Second, "the window closed", closed)
	if n := emitted.Load(); n != 3 {
		t.Fatalf("a burst of 6,000 changes: %d fan-outs in all, want 3 (one at its start, one at the window's end)", n)
	}
}
