package shard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func assign(members, peers []string) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		out[m] = Owner(m, peers)
	}
	return out
}

func TestOwnerIsDeterministicAndOrderFree(t *testing.T) {
	members, peers := names("member-", 200), names("replica-", 5)
	want := assign(members, peers)
	rev := slices.Clone(peers)
	slices.Reverse(rev)
	for m, p := range assign(members, rev) {
		if want[m] != p {
			t.Fatalf("member %s: owner %s with peers reversed, %s before", m, p, want[m])
		}
	}
	if got := Owner("x", nil); got != "" {
		t.Fatalf("no peers: owner %q, want none", got)
	}
}

func TestOwnedPartitionsMembers(t *testing.T) {
	members, peers := names("member-", 300), names("replica-", 3)
	seen := map[string]int{}
	for _, p := range peers {
		owned := Owned(p, members, peers)
		// Rendezvous spreads evenly enough: each of 3 gets 100 +- 40.
		if len(owned) < 60 || len(owned) > 140 {
			t.Errorf("%s owns %d of %d members", p, len(owned), len(members))
		}
		for _, m := range owned {
			seen[m]++
		}
	}
	for _, m := range members {
		if seen[m] != 1 {
			t.Errorf("member %s owned %d times, want once", m, seen[m])
		}
	}
	if got := Owned("not-live", members, peers); len(got) != 0 {
		t.Errorf("a replica missing from the live peers owns %d members", len(got))
	}
}

// Minimal movement: a peer leaving moves only its own members; a peer
// joining takes members only from others, never shuffles the rest.
func TestOwnerMovesOnlyWhatMustMove(t *testing.T) {
	members, peers := names("member-", 500), names("replica-", 4)
	before := assign(members, peers)

	left := "replica-2"
	after := assign(members, slices.DeleteFunc(slices.Clone(peers), func(p string) bool { return p == left }))
	for m, was := range before {
		if was != left && after[m] != was {
			t.Errorf("leave: member %s moved %s -> %s though %s stayed", m, was, after[m], was)
		}
		if after[m] == left {
			t.Errorf("leave: member %s still owned by the peer that left", m)
		}
	}

	joined := "replica-new"
	after = assign(members, append(slices.Clone(peers), joined))
	moved := 0
	for m, was := range before {
		if after[m] != was {
			moved++
			if after[m] != joined {
				t.Errorf("join: member %s moved %s -> %s, not to the new peer", m, was, after[m])
			}
		}
	}
	// The newcomer takes about 1/5 of the members.
	if moved < 50 || moved > 150 {
		t.Errorf("join: %d of %d members moved, want about %d", moved, len(members), len(members)/5)
	}
}

func TestObserveAndFresh(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := 15 * time.Second
	o := Observe(Observation{}, "rv1", t0)
	if !o.ObservedAt.Equal(t0) {
		t.Fatalf("first sighting observed at %v, want %v", o.ObservedAt, t0)
	}
	for _, tc := range []struct {
		name   string
		record string
		at     time.Duration
		fresh  bool
	}{
		{"unchanged, within the lease", "rv1", 14 * time.Second, true},
		{"unchanged, at the lease's end", "rv1", 15 * time.Second, false},
		{"unchanged, past it", "rv1", time.Minute, false},
		{"changed late: fresh again from now", "rv2", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.at)
			got := Observe(o, tc.record, now)
			if got := Fresh(got, d, now); got != tc.fresh {
				t.Errorf("fresh %v, want %v", got, tc.fresh)
			}
		})
	}
	if Fresh(Observation{}, d, t0) {
		t.Error("never observed counts as fresh")
	}
}

func TestHoldValid(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		lastRenew time.Time
		now       time.Time
		want      bool
	}{
		{"never renewed", time.Time{}, t0, false},
		{"just renewed", t0, t0, true},
		{"margin left", t0, t0.Add(7 * time.Second), true},
		{"inside the margin", t0, t0.Add(8*time.Second + time.Millisecond), false},
		{"past the deadline", t0, t0.Add(11 * time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldValid(tc.lastRenew, tc.now, 10*time.Second, 2*time.Second); got != tc.want {
				t.Errorf("HoldValid = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeaseName(t *testing.T) {
	const p = "fedfailover-member-"
	if got := LeaseName(p, "eu-1"); got != p+"eu-1" {
		t.Errorf("short name: %q", got)
	}
	long1, long2 := strings.Repeat("a", 60), strings.Repeat("a", 59)+"b"
	n1, n2 := LeaseName(p, long1), LeaseName(p, long2)
	if len(n1) > 63 || !strings.HasPrefix(n1, p) {
		t.Errorf("long name %q: %d characters", n1, len(n1))
	}
	if n1 == n2 {
		t.Errorf("two long names share the Lease %q", n1)
	}
	if got := LeaseName(p, "host_1"); got == p+"host_1" || len(got) > 63 {
		t.Errorf("invalid characters kept: %q", got)
	}
	if LeaseName(p, long1) != n1 {
		t.Error("long name not deterministic")
	}
}
