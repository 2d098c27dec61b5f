package rebalance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// readinessEntry is a managed RSP's entry whose members hold and have
// room as given ("name=replicas/room", "name=replicas/?" unobserved), with
// the shortfalls the planner gives them.
func readinessEntry(ns, name string, total int32, members ...string) rspEntry {
	st := v1alpha1.RSPReadiness{Namespace: ns, Name: name, TotalReplicas: total}
	for _, m := range members {
		var n string
		var replicas, room int32
		if _, err := fmt.Sscanf(strings.Replace(m, "=", " ", 1), "%s %d/%d", &n, &replicas, &room); err == nil {
			st.Members = append(st.Members, v1alpha1.MemberReadiness{Name: n, Replicas: replicas, Room: room})
			continue
		}
		if _, err := fmt.Sscanf(strings.Replace(m, "=", " ", 1), "%s %d/?", &n, &replicas); err != nil {
			panic(m)
		}
		st.Members = append(st.Members, v1alpha1.MemberReadiness{Name: n, Replicas: replicas, Room: replicas, Unobserved: true})
	}
	// The published shortfalls, as the controller computes them.
	st = planner.ReadinessStatus(ns, name, planner.ReadinessInputFromStatus(st))
	return rspEntry{placement: v1alpha1.ReasonAtBaseline, readiness: &st}
}

func TestReadinessCondition(t *testing.T) {
	cases := []struct {
		name    string
		entries map[types.NamespacedName]rspEntry
		status  metav1.ConditionStatus
		reason  string
		msg     []string
		listed  int
	}{
		{name: "no managed RSP", status: metav1.ConditionTrue, reason: v1alpha1.ReasonFailuresAbsorbed, msg: []string{"of the 0 managed"}},
		{name: "room everywhere", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/6", "m2=3/6"),
			typesKey("b", "y"): readinessEntry("b", "y", 2, "m1=1/2", "m2=1/2", "m3=0/0")},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonFailuresAbsorbed, msg: []string{"any one member could fail now", "of the 2 managed"}, listed: 2},
		{name: "the worst member and RSP first, the others after", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/5", "m2=3/6"),
			typesKey("b", "y"): readinessEntry("b", "y", 6, "m1=3/6", "m2=3/2")},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonFailoverShortfall,
			msg:    []string{"if m1 failed now, 4 of the 6 replicas of b/y would find no room on the other members and stay Pending", "also short: a/x if m2 failed (1)"},
			listed: 2},
		{name: "a member's room unknown", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/6", "m2=3/?")},
			status: metav1.ConditionUnknown, reason: v1alpha1.ReasonReadinessUnknown,
			msg: []string{"the room of m2 is unknown", "not known for a/x"}, listed: 1},
		{name: "a known shortfall beats an unknown figure", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/2", "m2=3/?")},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonFailoverShortfall, msg: []string{"if m2 failed now, 4 of the 6 replicas of a/x"}, listed: 1},
		{name: "a held RSP is not assessed", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/6", "m2=3/6"),
			typesKey("c", "z"): {placement: v1alpha1.ReasonRebalanceHeld, detail: "c/z held"}},
			status: metav1.ConditionUnknown, reason: v1alpha1.ReasonReadinessUnknown, msg: []string{"held, not assessed: c/z"}, listed: 1},
		{name: "an RSP being released is no longer the policy's", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/6", "m2=3/6"),
			typesKey("c", "z"): {placement: v1alpha1.ReasonReleasing, detail: "c/z releasing"}},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonFailuresAbsorbed, msg: []string{"of the 1 managed"}, listed: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := desiredStatus(testPolicy(), c.entries)
			got := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailoverReady)
			if got == nil || got.Status != c.status || got.Reason != c.reason || got.ObservedGeneration != 3 {
				t.Fatalf("condition %+v, want %s/%s at generation 3", got, c.status, c.reason)
			}
			for _, m := range c.msg {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q lacks %q", got.Message, m)
				}
			}
			if len(st.FailoverReadiness) != c.listed {
				t.Errorf("failoverReadiness lists %d RSPs, want %d: %+v", len(st.FailoverReadiness), c.listed, st.FailoverReadiness)
			}
		})
	}
	off := testPolicy()
	off.Spec.Rebalance.Enabled = ptr.To(false)
	entries := map[types.NamespacedName]rspEntry{typesKey("a", "x"): readinessEntry("a", "x", 6, "m1=3/2", "m2=3/6")}
	if st := desiredStatus(off, entries); meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailoverReady) != nil || len(st.FailoverReadiness) > 0 {
		t.Errorf("rebalance off, yet %+v and %+v", st.Conditions, st.FailoverReadiness)
	}
}

// TestReadinessListIsBounded: status.failoverReadiness stops at 256 RSPs,
// and before its member entries exceed the budget; the condition still
// reads every RSP.
func TestReadinessListIsBounded(t *testing.T) {
	entries := map[types.NamespacedName]rspEntry{}
	for i := range 300 {
		name := fmt.Sprintf("r%03d", i)
		entries[typesKey("a", name)] = readinessEntry("a", name, 2, "m1=1/2", "m2=1/2")
	}
	entries[typesKey("z", "last")] = readinessEntry("z", "last", 6, "m1=3/6", "m2=3/1")
	st := desiredStatus(testPolicy(), entries)
	if len(st.FailoverReadiness) != maxReadinessRSPs || st.FailoverReadiness[0].Name != "r000" {
		t.Errorf("%d RSPs listed (first %+v), want the first %d by name", len(st.FailoverReadiness), st.FailoverReadiness[0], maxReadinessRSPs)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailoverReady); c == nil || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "z/last") {
		t.Errorf("condition %+v, want False naming z/last, which is not listed", c)
	}

	wide := map[types.NamespacedName]rspEntry{}
	members := make([]string, 200)
	for i := range members {
		members[i] = fmt.Sprintf("m%03d=0/1", i)
	}
	for i := range 30 {
		name := fmt.Sprintf("r%02d", i)
		wide[typesKey("a", name)] = readinessEntry("a", name, 1, members...)
	}
	if n := len(desiredStatus(testPolicy(), wide).FailoverReadiness); n != maxReadinessMembers/200 {
		t.Errorf("%d RSPs of 200 members listed, want %d (member budget %d)", n, maxReadinessMembers/200, maxReadinessMembers)
	}
}

// shortfall is the gauge's value for a member of ns/web under policy
// pol, or -1 when there is no series.
func shortfall(pol, ns, member string) float64 {
	labels := map[string]string{"policy": pol, "namespace": ns, "rsp": "web", metrics.MemberLabel: member}
	for _, m := range collectShortfalls() {
		if m.matches(labels) {
			return m.value
		}
	}
	return -1
}

type shortfallSeries struct {
	labels map[string]string
	value  float64
}

func (s shortfallSeries) matches(labels map[string]string) bool {
	for k, v := range labels {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// collectShortfalls reads the gauge's series (a registry of its own:
// the manager's holds every collector).
func collectShortfalls() []shortfallSeries {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.FailoverShortfall)
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var out []shortfallSeries
	for _, f := range families {
		for _, m := range f.GetMetric() {
			s := shortfallSeries{labels: map[string]string{}, value: m.GetGauge().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// seriesOf counts the gauge's series of RSP ns/web.
func seriesOf(ns string) int {
	n := 0
	for _, s := range collectShortfalls() {
		if s.labels["namespace"] == ns && s.labels["rsp"] == "web" {
			n++
		}
	}
	return n
}

// TestShortfallSeries: a series per member whose figure is known, under
// the policy managing the RSP; the others deleted; none once the RSP is
// held or forgotten, while other RSPs' series stay.
func TestShortfallSeries(t *testing.T) {
	r := &Reconciler{store: newStore()}
	key, other := typesKey("series", "web"), typesKey("other-series", "web")
	two, zero := int32(2), int32(0)
	st := &v1alpha1.RSPReadiness{Members: []v1alpha1.MemberReadiness{
		{Name: "a", Shortfall: &two}, {Name: "b", Shortfall: &zero}, {Name: "c", Unobserved: true}}}
	r.publishShortfalls(key, "p", st)
	r.publishShortfalls(other, "p", st)
	if a, b, c := shortfall("p", "series", "a"), shortfall("p", "series", "b"), shortfall("p", "series", "c"); a != 2 || b != 0 || c != -1 {
		t.Errorf("series a=%v b=%v c=%v, want 2, 0 and none (not known)", a, b, c)
	}

	// b gone, a's figure no longer known, c known; another policy now.
	st = &v1alpha1.RSPReadiness{Members: []v1alpha1.MemberReadiness{{Name: "a"}, {Name: "c", Shortfall: &two}}}
	r.publishShortfalls(key, "q", st)
	if n := seriesOf("series"); n != 1 || shortfall("q", "series", "c") != 2 {
		t.Errorf("%d series, c under q = %v: want only c's, 2", n, shortfall("q", "series", "c"))
	}

	r.dropShortfalls(key)
	if n := seriesOf("series"); n != 0 {
		t.Errorf("held: %d series left", n)
	}
	if n := seriesOf("other-series"); n != 2 {
		t.Errorf("another RSP's series: %d, want its 2", n)
	}
	r.forget(other)
	if n := seriesOf("other-series"); n != 0 {
		t.Errorf("forgotten: %d series left", n)
	}
}

// webWithRoom is webOn on a node with room for pods pods in all.
func webWithRoom(ns, member string, running int, pods int64) []client.Object {
	objs := webOn(ns, member, running)
	for i, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			objs[i] = readyNode(n.Name, pods)
		}
	}
	return objs
}

// writeStatus runs the policy's status controller once: it applies what
// the passes stored.
func writeStatus(t *testing.T, r *Reconciler, c client.Client, pol string) *v1alpha1.FailoverPolicy {
	t.Helper()
	w := statusWriter(r.store)
	w.Client = c
	if _, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: pol}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.FailoverPolicy{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pol}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// kubefedClustersOnHost registers the members on the host, in ns, for
// the CLI (which reads the host only).
func kubefedClustersOnHost(t *testing.T, c client.Client, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		k := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: "https://" + n + ".example:6443",
				SecretRef: kubefedv1beta1.LocalSecretReference{Name: n + "-secret"}}}
		if err := c.Create(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
}

// planShortfall is what `kubectl failover plan --fail member` says of
// ns/web, read from the host as the CLI reads it.
func planShortfall(t *testing.T, c client.Client, ns, member string) (*int64, string) {
	t.Helper()
	s, err := cli.Gather(context.Background(), cli.Source{Reader: c, KubefedNamespace: ns, Namespace: ns}, t0)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cli.BuildPlan(s, cli.Scenario{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range v.RSPs {
		if r.Namespace == ns && r.Name == "web" {
			return r.Shortfall, r.ShortfallNote
		}
	}
	t.Fatalf("plan --fail %s lists no %s/web: %+v", member, ns, v)
	return nil, ""
}

// N+1 readiness wired through (issue #32): every pass over a managed RSP
// publishes, from the members it observed anyway, what each member's
// failure now would leave Pending: the gauge, status.failoverReadiness
// and the FailoverReady condition through the status controller; `kubectl
// failover plan --fail` reads the same figure back from the host. Real
// API server; members played by the test.
func TestFailoverReadinessOnHost(t *testing.T) {
	pol := rebalancing("n-plus-one", nil)
	r, c, _, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns) // 6 replicas, 1:1
	key := client.ObjectKeyFromObject(rsp)
	kubefedClustersOnHost(t, c, ns, "member1", "member2")
	fm := noMembers(t)
	fm.add(t, "member1", webWithRoom(ns, "member1", 3, 20)...) // room for 6 (of 17)
	fm.add(t, "member2", webWithRoom(ns, "member2", 3, 4)...)  // room for 4: 3 running, 1 more
	r.members, r.opts = fm, Options{}.withDefaults()

	passAt(t, r, key, t0)
	if got, want := [2]float64{shortfall(pol.Name, ns, "member1"), shortfall(pol.Name, ns, "member2")}, [2]float64{2, 0}; got != want {
		t.Errorf("fedfailover_failover_shortfall_replicas member1, member2 = %v, want %v", got, want)
	}
	got := writeStatus(t, r, c, pol.Name)
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailoverReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonFailoverShortfall ||
		!strings.Contains(cond.Message, "if member1 failed now, 2 of the 6 replicas of "+ns+"/web") {
		t.Errorf("FailoverReady %+v, want False naming member1, %s/web and 2 replicas", cond, ns)
	}
	if l := got.Status.FailoverReadiness; len(l) != 1 || l[0].Name != "web" || len(l[0].Members) != 2 || l[0].Members[1].Room != 4 {
		t.Errorf("status.failoverReadiness %+v, want web with member2's room 4", l)
	}
	// The CLI agrees, member by member, with the gauge.
	for _, m := range []string{"member1", "member2"} {
		if s, note := planShortfall(t, c, ns, m); s == nil || float64(*s) != shortfall(pol.Name, ns, m) {
			t.Errorf("plan --fail %s: shortfall %v (%s), the manager's gauge says %v", m, s, note, shortfall(pol.Name, ns, m))
		}
	}

	// member2's node gets room: any one member's failure is absorbed.
	node := &corev1.Node{}
	if err := fm.readers["member2"].Get(context.Background(), client.ObjectKey{Name: "n1"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(20, resource.DecimalSI)
	if err := fm.readers["member2"].Status().Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(time.Second))
	got = writeStatus(t, r, c, pol.Name)
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailoverReady); cond == nil || cond.Status != metav1.ConditionTrue ||
		cond.Reason != v1alpha1.ReasonFailuresAbsorbed {
		t.Errorf("FailoverReady %+v, want True", cond)
	}
	if s, _ := planShortfall(t, c, ns, "member1"); shortfall(pol.Name, ns, "member1") != 0 || s == nil || *s != 0 {
		t.Errorf("member1's shortfall: gauge %v, plan %v; want 0", shortfall(pol.Name, ns, "member1"), s)
	}

	// fedfailover cannot read member2 (kubefed still reports it Ready): its
	// room is unknown, so member1's figure is; member2's own is known.
	fm.down["member2"] = true
	passAt(t, r, key, t0.Add(2*time.Second))
	if m1, m2 := shortfall(pol.Name, ns, "member1"), shortfall(pol.Name, ns, "member2"); m1 != -1 || m2 != 0 {
		t.Errorf("member2 unreadable: gauge member1 %v, member2 %v; want no series, 0", m1, m2)
	}
	got = writeStatus(t, r, c, pol.Name)
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailoverReady); cond == nil || cond.Status != metav1.ConditionUnknown ||
		!strings.Contains(cond.Message, "the room of member2 is unknown") {
		t.Errorf("FailoverReady %+v, want Unknown naming member2", cond)
	}
	if s, note := planShortfall(t, c, ns, "member1"); s != nil || !strings.Contains(note, "not known") {
		t.Errorf("plan --fail member1 with member2 unreadable: %v (%q), want not known", s, note)
	}

	// member2 leaves the federation: its series goes at the next pass.
	fm.down["member2"] = false
	delete(fm.readers, "member2")
	passAt(t, r, key, t0.Add(3*time.Second))
	if n, m1 := seriesOf(ns), shortfall(pol.Name, ns, "member1"); n != 1 || m1 != 6 {
		t.Errorf("member2 gone: %d series, member1 %v; want member1's alone, 6 (no other member)", n, m1)
	}

	// Paused: held, not assessed: no series, the condition Unknown.
	paused := &v1alpha1.FailoverPolicy{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pol.Name}, paused); err != nil {
		t.Fatal(err)
	}
	paused.Spec.Paused = true
	if err := c.Update(context.Background(), paused); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(4*time.Second))
	if n := seriesOf(ns); n != 0 {
		t.Errorf("paused: %d series left", n)
	}
	got = writeStatus(t, r, c, pol.Name)
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailoverReady); cond == nil || cond.Status != metav1.ConditionUnknown ||
		!strings.Contains(cond.Message, "held, not assessed: "+ns+"/web") || len(got.Status.FailoverReadiness) != 0 {
		t.Errorf("paused: FailoverReady %+v and list %+v, want Unknown (held) and no entry", cond, got.Status.FailoverReadiness)
	}

	// The RSP deleted: what fedfailover kept of it goes, its series too.
	got.Spec.Paused = false
	if err := c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(5*time.Second))
	if n := seriesOf(ns); n != 1 {
		t.Fatalf("unpaused: %d series, want member1's", n)
	}
	if err := c.Delete(context.Background(), rsp); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(6*time.Second))
	if n := seriesOf(ns); n != 0 {
		t.Errorf("RSP deleted: %d series left", n)
	}
}
