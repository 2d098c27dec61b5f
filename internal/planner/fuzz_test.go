package planner

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

var fuzzStates = []MemberState{Healthy, Failed, Exhausted}

// fuzzPrefs decodes one cluster's preferences from 16 bits: weight 0-7,
// min 0-3, max absent or 0-7.
func fuzzPrefs(bits uint64) fedschedv1a1.ClusterPreferences {
	p := fedschedv1a1.ClusterPreferences{Weight: int64(bits & 7), MinReplicas: int64(bits >> 3 & 3)}
	if bits>>5&1 != 0 {
		v := int64(bits >> 6 & 7)
		p.MaxReplicas = &v
		p.MinReplicas = min(p.MinReplicas, v)
	}
	return p
}

// fuzzInput decodes a planner input for members a..d from fuzzed numbers.
func fuzzInput(baseline, current, members uint64, total, currentTotal uint8, sinceLast, sinceRoom uint16, mbb bool) Input {
	in := Input{
		Baseline: map[string]fedschedv1a1.ClusterPreferences{}, Current: map[string]fedschedv1a1.ClusterPreferences{},
		Members: map[string]Member{}, TotalReplicas: int32(total % 40), CurrentTotalReplicas: int32(currentTotal % 50),
		Now: now, Spec: spec(mbb),
	}
	if sinceLast != 0 {
		in.LastChange = now.Add(-time.Duration(sinceLast) * time.Second)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		shift := uint(16 * i)
		if baseline>>shift&0x8000 == 0 {
			in.Baseline[name] = fuzzPrefs(baseline >> shift)
		}
		if current>>shift&0x8000 == 0 {
			in.Current[name] = fuzzPrefs(current >> shift)
		}
		bits := members >> shift
		if bits&3 == 3 {
			continue // not a member
		}
		m := Member{State: fuzzStates[bits&3], Running: int64(bits >> 2 & 15), Fits: int64(bits >> 6 & 15),
			KubefedReady: bits>>11&1 != 0, Backoff: int(bits >> 12 & 3), Failing: bits>>14&1 != 0,
			Unconfirmed: bits>>15&1 != 0}
		if bits>>10&1 != 0 {
			m.RoomSince = now.Add(-time.Duration(sinceRoom>>(4*uint(i))&15) * 20 * time.Second)
		}
		// Bit 10 of the member's baseline bits: under maintenance.
		m.Draining = baseline>>shift>>10&1 != 0
		in.Members[name] = m
	}
	if baseline&(1<<63) != 0 {
		in.Baseline[Wildcard] = fedschedv1a1.ClusterPreferences{Weight: 1}
	}
	// Bits 9-14 of each member's baseline bits are free: bit 9 leaves it
	// out of the target's placement (bit 10 drains it, above), bit 62
	// turns that placement on, bit 61 allows spilling past maxReplicas.
	if baseline&(1<<62) != 0 {
		in.Eligible = map[string]bool{}
		for i, name := range []string{"a", "b", "c", "d"} {
			if baseline>>(16*uint(i))>>9&1 == 0 {
				in.Eligible[name] = true
			}
		}
	}
	in.Spec.AllowSpill = baseline&(1<<61) != 0
	return in
}

func FuzzPlan(f *testing.F) {
	f.Add(uint64(0x0001_0001_0001_0001), uint64(0x0001_0001_0001_0001), uint64(0x040d_040d_040d_040d), uint8(9), uint8(0), uint16(0), uint16(0), false)
	f.Add(uint64(0x0001_0001_0001_0001), uint64(0x0001_0001_0001_0001), uint64(0x040d_0001_040d_040d), uint8(9), uint8(0), uint16(1), uint16(0), true)
	f.Add(uint64(0x0002_0001_0001_0001), uint64(0x01ed_0024_0001_0001), uint64(0x040d_0402_040d_0112), uint8(12), uint8(14), uint16(40), uint16(0x1234), true)
	f.Add(uint64(0x8000_0000_0003_0001), uint64(0x0001_8000_0001_0001), uint64(0x0003_0001_0002_0001), uint8(7), uint8(3), uint16(500), uint16(0xffff), false)
	// Rule 4: a target placement leaving out b, spilling allowed or not.
	f.Add(uint64(0x4000_0000_0201_0001), uint64(0x0001_0001_0001_0001), uint64(0x0003_040d_0001_0402), uint8(9), uint8(0), uint16(0), uint16(0), false)
	f.Add(uint64(0x6000_0000_0221_0025), uint64(0x0001_0001_0001_0001), uint64(0x0003_040d_0001_0402), uint8(9), uint8(0), uint16(0), uint16(0), false)
	// a under maintenance, b and c with room: a drained stepwise.
	f.Add(uint64(0x0001_0001_0001_0401), uint64(0x0001_0001_0001_0001), uint64(0x0003_0a0c_0a0c_0a0c), uint8(9), uint8(0), uint16(0), uint16(0), true)
	// a under maintenance, b failed, c full.
	f.Add(uint64(0x0001_0001_0001_0401), uint64(0x0001_0001_0001_0001), uint64(0x0003_040c_0001_0a0c), uint8(9), uint8(0), uint16(0), uint16(0), false)
	// Failed to fedfailover alone (kubefed Ready), b failing and not Failed
	// yet, each holding 3 of 6: nothing moves.
	f.Add(uint64(0x0000_8000_0001_0001), uint64(0x0000_8000_0001_0001), uint64(0x0003_0003_480c_080d), uint8(6), uint8(0), uint16(0), uint16(0), false)
	f.Fuzz(func(t *testing.T, baseline, current, members uint64, total, currentTotal uint8, sinceLast, sinceRoom uint16, mbb bool) {
		in := fuzzInput(baseline, current, members, total, currentTotal, sinceLast, sinceRoom, mbb)
		got := Plan(in)
		if again := Plan(in); !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", got, again)
		}
		checkInvariants(t, in, got)
		checkNoSecondChange(t, in, got)
		checkConverges(t, in)
	})
}

// checkNoSecondChange: right after writing a plan, planning again with the
// same observations changes nothing (at most one change per minInterval).
func checkNoSecondChange(t testing.TB, in Input, got Result) {
	t.Helper()
	if !got.Changed {
		return
	}
	in.Current, in.CurrentTotalReplicas, in.LastChange = got.Clusters, got.TotalReplicas, in.Now
	if again := Plan(in); again.Changed {
		t.Fatalf("second change at the same time: %+v after %+v", again, got)
	}
}

// checkConverges: with members unchanged, applying plans as time passes
// reaches a placement that no longer changes (no flapping).
func checkConverges(t testing.TB, in Input) {
	t.Helper()
	for step := 0; step < 200; step++ {
		got := Plan(in)
		checkInvariants(t, in, got)
		switch {
		case got.Changed:
			in.Current, in.CurrentTotalReplicas, in.LastChange = got.Clusters, got.TotalReplicas, in.Now
			in.Now = in.Now.Add(in.Spec.MinInterval.Get())
		case got.RequeueAt.After(in.Now):
			in.Now = got.RequeueAt
		default:
			return
		}
	}
	t.Fatalf("no stable placement after 200 plans from %+v", in)
}

// checkInvariants holds for every plan: no negatives, min <= max, the
// federation guard (members Failed, plus those failing once one is Failed)
// changes nothing, a change gives failed members nothing and takes nothing
// from members failed to fedfailover alone (kubefed reports them Ready:
// failing, never Failed), the written
// preferences produce the reported placement, and a change never places
// fewer than min(total, room).
func checkInvariants(t testing.TB, in Input, got Result) {
	t.Helper()
	var names []string
	var failed, failing int
	for n, m := range in.Members {
		if n == Wildcard {
			continue
		}
		names = append(names, n)
		switch {
		case m.State == Failed && !m.KubefedReady && !m.Unconfirmed:
			failed++
		case m.Failing, m.Unconfirmed, m.State == Failed:
			// fedfailover alone sees it failed: failing, never Failed.
			failing++
		}
	}
	slices.Sort(names)
	guard := intstr.FromString("50%")
	if in.Spec.MaxFailedMembers != nil {
		guard = *in.Spec.MaxFailedMembers
	}
	limit, _ := intstr.GetScaledValueFromIntOrPercent(&guard, len(names), false)
	if failed > 0 && failed+failing > limit && (got.Changed || got.Reason != ReasonTooManyMembersFailed) {
		t.Fatalf("%d of %d members failed, %d failing: want the guard to keep the RSP, got %+v", failed, len(names), failing, got)
	}
	// kubefed's reading of preferences: empty means "*" weight 1; with the
	// target's placement, nothing outside it.
	kubefed := func(prefs map[string]fedschedv1a1.ClusterPreferences) func(string) bounds {
		if len(prefs) == 0 {
			prefs = map[string]fedschedv1a1.ClusterPreferences{Wildcard: {Weight: 1}}
		}
		return func(n string) bounds {
			if in.Eligible != nil && !in.Eligible[n] {
				return bounds{max: 0}
			}
			return boundsOf(prefs, n)
		}
	}
	current := distribute(max(int64(in.CurrentTotalReplicas), int64(max(in.TotalReplicas, 0))), names, kubefed(in.Current))
	if in.CurrentTotalReplicas == 0 {
		current = distribute(int64(max(in.TotalReplicas, 0)), names, kubefed(in.Current))
	}
	if got.TotalReplicas < 0 {
		t.Fatalf("negative total %d", got.TotalReplicas)
	}
	if got.TemporaryTotal != (got.TotalReplicas > max(in.TotalReplicas, 0)) {
		t.Fatalf("TemporaryTotal=%v with total %d (user %d)", got.TemporaryTotal, got.TotalReplicas, in.TotalReplicas)
	}
	placed := distribute(int64(got.TotalReplicas), names, kubefed(got.Clusters))
	if !equalPlacement(placed, got.Placement) {
		t.Fatalf("clusters place %v, result says %v", placed, got.Placement)
	}
	userShare := distribute(int64(max(in.TotalReplicas, 0)), names, kubefed(in.Baseline))
	var roomSum, placedSum, held int64
	for _, n := range names {
		held += current[n]
	}
	for _, n := range names {
		m := in.Members[n]
		if got.Placement[n] < 0 {
			t.Fatalf("negative placement %v", got.Placement)
		}
		placedSum += got.Placement[n]
		if m.Unconfirmed || (m.State == Failed && m.KubefedReady) {
			// Failed to fedfailover alone: from the user's own placement,
			// nothing is moved off it (its failure proves nothing).
			if got.Changed && got.Placement[n] < current[n] && equalPlacement(current, userShare) && int64(in.TotalReplicas) == held &&
				(in.CurrentTotalReplicas == 0 || in.CurrentTotalReplicas == in.TotalReplicas) {
				t.Fatalf("member %s failed to fedfailover alone (kubefed Ready) lost replicas: %d -> %d: %+v", n, current[n], got.Placement[n], got)
			}
			continue
		}
		if m.State == Failed {
			if got.Changed && got.Placement[n] > 0 {
				t.Fatalf("failed member %s placed %d", n, got.Placement[n])
			}
			continue
		}
		limit := capOf(in, n)
		if got.Changed && limit >= 0 && got.Placement[n] > max(limit, current[n]) {
			t.Fatalf("member %s raised to %d, above its limit %d (held %d): %+v", n, got.Placement[n], limit, current[n], got)
		}
		if limit < 0 {
			limit = m.Running + m.Fits
		}
		roomSum += min(m.Running+m.Fits, limit)
	}
	if !got.Changed {
		return
	}
	// What the RSP asks of each member now, as the planner reads it.
	asked := current
	if in.CurrentTotalReplicas > 0 {
		asked = distribute(int64(in.CurrentTotalReplicas), names, kubefed(in.Current))
	}
	checkDrain(t, in, names, asked, got)
	if got.Shifted {
		for _, n := range names {
			p := got.Clusters[n]
			if p.Weight < 0 || p.MinReplicas < 0 || p.MaxReplicas == nil || *p.MaxReplicas < p.MinReplicas {
				t.Fatalf("bad preferences for %s: %+v", n, p)
			}
		}
	}
	if want := min(int64(max(in.TotalReplicas, 0)), roomSum); placedSum < want {
		t.Fatalf("placed %d < min(total %d, room %d): %+v", placedSum, in.TotalReplicas, roomSum, got)
	}
	if placedSum > int64(got.TotalReplicas) {
		t.Fatalf("placed %d above total %d", placedSum, got.TotalReplicas)
	}
}

// capOf is rule 4 restated: a member the baseline does not list (nor "*"),
// or outside the target's placement, may get nothing; else at most its
// baseline maxReplicas unless allowSpill. -1: no limit.
func capOf(in Input, n string) int64 {
	base := in.Baseline
	if len(base) == 0 {
		base = map[string]fedschedv1a1.ClusterPreferences{Wildcard: {Weight: 1}}
	}
	p, ok := base[n]
	if !ok {
		p, ok = base[Wildcard]
	}
	switch {
	case !ok || (in.Eligible != nil && !in.Eligible[n]):
		return 0
	case in.Spec.AllowSpill || p.MaxReplicas == nil:
		return -1
	}
	return max(*p.MaxReplicas, 0)
}

// checkDrain: a change lowers a member under maintenance (observed, not
// failed) only within its room when it is exhausted, or in a break that
// keeps at least min(total, Ready now) Ready replicas.
func checkDrain(t testing.TB, in Input, names []string, current map[string]int64, got Result) {
	t.Helper()
	ready := func(placement map[string]int64) int64 {
		var n int64
		for _, name := range names {
			m := in.Members[name]
			if m.Unconfirmed || (m.State == Failed && m.KubefedReady) {
				continue // read as unobserved: no Ready replica counted
			}
			n += min(max(m.Running, 0), placement[name])
		}
		return n
	}
	for _, n := range names {
		m := in.Members[n]
		if !m.Draining || m.State == Failed || m.Unconfirmed || m.Failing || got.Placement[n] >= current[n] {
			continue
		}
		if m.State == Exhausted && got.Placement[n] >= min(current[n], max(m.Running, 0)+min(max(m.Fits, 0), maxWeight)) {
			continue
		}
		if ready(got.Placement) < min(int64(max(in.TotalReplicas, 0)), ready(current)) {
			t.Fatalf("member %s under maintenance lowered %d -> %d leaving %d Ready (before %d, total %d): %+v",
				n, current[n], got.Placement[n], ready(got.Placement), ready(current), in.TotalReplicas, got)
		}
	}
}
