package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

func TestLabNodesPerMemberKeepsOneOn(t *testing.T) {
	for _, c := range []struct{ offs, members, want int }{{10, 3, 5}, {10, 20, 2}, {2, 2, 2}, {0, 3, 1}, {9, 3, 4}} {
		if got := labNodesPerMember(c.offs, c.members); got != c.want {
			t.Errorf("%d power-offs over %d members: %d lab nodes each, want %d", c.offs, c.members, got, c.want)
		}
	}
}

func TestScaleTargets(t *testing.T) {
	r := &scResult{PodsTotal: 60000, RSSAfterSyncMB: 250, RSSAfterSteadyMB: 310, CPUPercent: 1.5, SyncSeconds: 61,
		Taint: latency([]float64{0.2, 0.9}, 0), Shift: latency([]float64{0.5}, 1), Validity: scValidity{Valid: true}, DecisionsValidity: &scValidity{Valid: true}}
	got := scTargets(r)
	want := map[string]string{"sync": "MISS", "rss": "MISS", "cpu": "PASS", "member_writes": "PASS", "host_writes": "PASS", "taint": "PASS", "shift": "MISS"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s (a missing decision is a miss; RSS counts its worst reading)", k, got[k], v)
		}
	}
	r.PodsTotal, r.HostOtherWrites = 2000, 0.1
	got = scTargets(r)
	if got["rss"] != "-" || got["host_writes"] != "MISS" || got["member_writes"] != "PASS" {
		t.Errorf("small size: rss %s (want -: the target is for the goal size), host writes %s (want MISS), member writes %s (want PASS)",
			got["rss"], got["host_writes"], got["member_writes"])
	}
}

// A latency without samples is null in the JSON, not a number: a goal run
// with no taint wrote p50 and p99 as -9223372036854776.
func TestLatencyWithoutSamplesIsNull(t *testing.T) {
	b, err := json.Marshal(latency(nil, 10))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"p50_seconds":null,"p99_seconds":null`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s, want %s", b, want)
	}
	if got := scTargets(&scResult{Taint: latency(nil, 10), Validity: scValidity{Valid: true}, DecisionsValidity: &scValidity{Valid: true}})["taint"]; got != "MISS" {
		t.Errorf("taint without samples: %s, want MISS", got)
	}
	b, _ = json.Marshal(latency([]float64{0.25, 0.5}, 0))
	if want := `"p50_seconds":0.25,"p99_seconds":0.5`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

func notReadyNode(transition time.Time, tainted bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(transition)}}}}
	if tainted {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}
	}
	return n
}

// The taint is timed from the bench's own first sighting of the node not
// Ready, as fedfailover counts notReadyFor: the Node's lastTransitionTime
// (whole seconds) would add the 0.7 s it was truncated by.
func TestTaintClockCountsFromTheFirstSighting(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // the transition, truncated
	seen := t0.Add(700 * time.Millisecond)
	const nrf = 5 * time.Second
	c := newTaintClock(nrf, time.Hour) // evidence long ago, the NotReady rule first
	c.observe(notReadyNode(t0, false), seen)
	c.observe(notReadyNode(t0, false), seen.Add(time.Second)) // a later delivery changes nothing
	c.observe(notReadyNode(t0, true), seen.Add(nrf+50*time.Millisecond))
	if got, err := c.latency(t0.Add(-time.Minute)); err != nil || math.Abs(got-0.05) > 1e-9 {
		t.Errorf("latency = %v, %v; want 0.05 s from first sighting + notReadyFor", got, err)
	}
	if got, err := c.latency(seen.Add(nrf + 30*time.Millisecond)); err != nil || math.Abs(got-0.02) > 1e-9 {
		t.Errorf("latency with later evidence = %v, %v; want 0.02 s from the evidence", got, err)
	}
	// Evidence first: tainted before the node was seen not Ready, timed
	// from the evidence + the silence window.
	const silence = 5 * time.Second
	early := newTaintClock(nrf, silence)
	early.observe(&corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeOutOfService}}}}, t0.Add(silence+300*time.Millisecond))
	if got, err := early.latency(t0); err != nil || math.Abs(got-0.3) > 1e-9 {
		t.Errorf("evidence-first latency = %v, %v; want 0.3 s from the evidence + the silence window", got, err)
	}
	if _, err := newTaintClock(nrf, silence).latency(t0); err == nil {
		t.Error("a node never tainted was timed")
	}
}

func TestShiftClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := newShiftClock(10 * time.Second)
	before := map[string]fedschedv1a1.ClusterPreferences{"member1": {Weight: 1}, "member2": {Weight: 1}}
	c.expect("web-0", before)
	c.expect("web-1", before)
	pod := func(app string, since time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	c.observePod(pod("web-0", t0.Add(-time.Hour)), t0)    // the member's timestamp does not count (its clock)
	c.observePod(pod("web-0", t0), t0.Add(3*time.Second)) // the first sighting does
	rsp := func(name string, clusters map[string]fedschedv1a1.ClusterPreferences) *fedschedv1a1.ReplicaSchedulingPreference {
		return &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{Clusters: clusters}}
	}
	c.observeRSP(rsp("web-0", before), t0.Add(5*time.Second)) // unchanged: not a shift
	shifted := map[string]fedschedv1a1.ClusterPreferences{"member1": {Weight: 2}, "member2": {Weight: 0}}
	c.observeRSP(rsp("web-0", shifted), t0.Add(10*time.Second+300*time.Millisecond))
	c.observeRSP(rsp("web-0", before), t0.Add(20*time.Second)) // the first change counts
	if done, _ := c.progress(); done {
		t.Error("done with web-1 not shifted")
	}
	got, missing := c.samples()
	if len(got) != 1 || math.Abs(got[0]-0.3) > 1e-9 || missing != 1 {
		t.Errorf("samples %v, missing %d; want [0.3] and web-1 missing", got, missing)
	}
}

// A sharded run's memory target is each replica's 1 GiB at 10 x 5,000 x 10,
// and its taint latencies are judged apart by the role of the replica that
// held the node's member.
func TestShardedRunTargetsEachReplica(t *testing.T) {
	valid := scValidity{Valid: true}
	sharded := &scResult{PodsTotal: 500000, Replicas: []scReplica{{Name: "replica-0"}, {Name: "replica-1"}, {Name: "replica-2"}},
		RSSAfterSyncMB: 900, RSSAfterSteadyMB: 950, Validity: valid, DecisionsValidity: &valid,
		TaintByHolder: map[string]*scLatency{scHeldByLeader: latency([]float64{0.2}, 0), scHeldByNonLeader: latency([]float64{0.3, 2.5}, 0)}}
	got := scTargets(sharded)
	if got["rss"] != "PASS" || got["taint_held_by_leader"] != "PASS" || got["taint_held_by_non-leader"] != "MISS" {
		t.Errorf("sharded targets %v: want rss PASS at 950 MB per replica, the leader's taints PASS, the others' MISS (2.5 s)", got)
	}
	single := &scResult{PodsTotal: 60000, RSSAfterSyncMB: 900, RSSAfterSteadyMB: 950, Validity: valid}
	if got := scTargets(single); got["rss"] != "MISS" {
		t.Errorf("one process at the goal size: rss %s, want MISS at 950 MB (target 300)", got["rss"])
	}
}

// The role of a decision's member: the leader's, another replica's, or
// none with one replica.
func TestRoleOfTheHoldingReplica(t *testing.T) {
	a, b := &scManager{name: "replica-0"}, &scManager{name: "replica-1"}
	ms := scManagers{a, b}
	holder := map[string]*scManager{"member1": a, "member2": b}
	if got := ms.role(holder, a, "member1"); got != scHeldByLeader {
		t.Errorf("member1 held by the leader: %q", got)
	}
	if got := ms.role(holder, a, "member2"); got != scHeldByNonLeader {
		t.Errorf("member2 held by replica-1: %q", got)
	}
	if got := (scManagers{a}).role(holder, a, "member1"); got != "" {
		t.Errorf("one replica: %q, want no role", got)
	}
	split := byRole(map[string][]float64{scHeldByNonLeader: {1}}, map[string]int{scHeldByLeader: 1})
	if split[scHeldByLeader] == nil || split[scHeldByLeader].Missing != 1 || split[scHeldByNonLeader] == nil || len(split[scHeldByNonLeader].Samples) != 1 {
		t.Errorf("by role %+v", split)
	}
}

// A sharded run's cost point is its largest replica with its own members
// and their pods, not the whole federation.
func TestCostPointOfAShardedRun(t *testing.T) {
	r := &scResult{Members: 10, PodsTotal: 500000, RSSAfterSyncMB: 700, Replicas: []scReplica{
		{Name: "replica-0", Members: []string{"member1", "member2", "member3"}, RSSAfterSyncMB: 600, RSSAfterSteadyMB: 610},
		{Name: "replica-1", Members: []string{"member4", "member5", "member6", "member7"}, RSSAfterSyncMB: 700, RSSAfterSteadyMB: 690},
		{Name: "replica-2", Members: []string{"member8", "member9", "member10"}, RSSAfterSyncMB: 590, RSSAfterSteadyMB: 600},
	}}
	if got, want := costPoint(r), (CostPoint{Members: 4, Pods: 200000, MB: 700}); got != want {
		t.Errorf("cost point %+v, want %+v (replica-1's four members)", got, want)
	}
	one := &scResult{Members: 3, PodsTotal: 60000, RSSAfterSyncMB: 280, RSSAfterSteadyMB: 290}
	if got, want := costPoint(one), (CostPoint{Members: 3, Pods: 60000, MB: 290}); got != want {
		t.Errorf("cost point %+v, want %+v", got, want)
	}
}

// The steady window's CPU profile covers the end of the window (while the
// churn runs), and saveProfiles keeps it rather than profiling the manager
// at rest after the window.
func TestSteadyCPUProfileIsTakenInTheWindow(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		fmt.Fprint(w, "profile of "+r.URL.Path)
	}))
	defer srv.Close()
	m := &scManager{name: "manager", pprof: srv.URL + "/debug/pprof"}
	b := &scBench{out: io.Discard}
	start := time.Now()
	b.steadyCPUProfiles(t.Context(), scManagers{m}, 3*time.Second)()
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("the profiles returned after %s: the fake pprof answers at once", waited)
	}
	if want := []string{"/debug/pprof/profile?seconds=3"}; !slices.Equal(asked, want) {
		t.Errorf("asked %v, want %v (the whole 3s window, shorter than %s)", asked, want, scSteadyProfile)
	}
	if string(m.steadyCPU) != "profile of /debug/pprof/profile" {
		t.Errorf("steady CPU profile %q not kept", m.steadyCPU)
	}
}
