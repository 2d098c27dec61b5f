package fencing

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

func lease(rv string, renew time.Time, seconds int32, owner types.UID) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: NodeLeaseNamespace, Name: "n1", ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), RenewTime: ptr.To(metav1.NewMicroTime(renew))}}
	if seconds != 0 {
		l.Spec.LeaseDurationSeconds = ptr.To(seconds)
	}
	if owner != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: owner}}
	}
	return l
}

func TestSilenceWindow(t *testing.T) {
	for _, tc := range []struct {
		duration time.Duration
		want     time.Duration
	}{
		{0, 11400 * time.Millisecond},                 // the kubelet's default 40 s: renewed every 10 s (up to 10.4 s)
		{40 * time.Second, 11400 * time.Millisecond},  // the same, explicit
		{8 * time.Second, MinLeaseSilence},            // the lab's: renewed every 2 s, the floor
		{2 * time.Second, MinLeaseSilence},            // never shorter than the floor
		{120 * time.Second, 32200 * time.Millisecond}, // a long Lease: a long wait
		{-5 * time.Second, 11400 * time.Millisecond},  // nonsense: the default
		{400 * time.Second, 105 * time.Second},        // no cap
	} {
		if got := SilenceWindow(tc.duration); got != tc.want {
			t.Errorf("SilenceWindow(%s) = %s, want %s", tc.duration, got, tc.want)
		}
	}
}

// TestLeaseSilence: silence is two of fedfailover's readings of the same
// Lease version at least the window apart, on its own clock; the Lease's
// renewTime (the kubelet's clock) is compared only with itself.
func TestLeaseSilence(t *testing.T) {
	const uid = types.UID("uid-n1")
	w := SilenceWindow(40 * time.Second)
	read := func(rv string, renew time.Time) LeaseReading { return ReadLease(lease(rv, renew, 40, uid), uid) }
	// The kubelet's clock is a year off: it changes nothing.
	kubeletClock := t0.Add(-365 * 24 * time.Hour)
	type step struct {
		at      time.Duration // host clock, after t0
		reading LeaseReading
		uid     types.UID
	}
	for _, tc := range []struct {
		name        string
		steps       []step
		silent      bool
		remaining   time.Duration
		renewed     bool
		why         string
		silentFor   time.Duration
		firstAtWant time.Duration
	}{
		{name: "one reading is no silence", steps: []step{{0, read("1", kubeletClock), uid}},
			remaining: w, why: "read unchanged for 0s only"},
		{name: "unchanged for 1s less than the window: not yet", steps: []step{{0, read("1", kubeletClock), uid}, {w - time.Second, read("1", kubeletClock), uid}},
			remaining: time.Second},
		{name: "unchanged for the window: silent", steps: []step{{0, read("1", kubeletClock), uid}, {w, read("1", kubeletClock), uid}},
			silent: true, silentFor: w},
		{name: "renewed in between: silence starts again", steps: []step{{0, read("1", kubeletClock), uid},
			{10 * time.Second, read("2", kubeletClock.Add(10*time.Second)), uid}, {20 * time.Second, read("2", kubeletClock.Add(10*time.Second)), uid}},
			remaining: w - 10*time.Second, renewed: true, firstAtWant: 10 * time.Second},
		{name: "renewTime changed, same resourceVersion: renewed", steps: []step{{0, read("1", kubeletClock), uid},
			{20 * time.Second, read("1", kubeletClock.Add(time.Second)), uid}},
			remaining: w, renewed: true, firstAtWant: 20 * time.Second},
		{name: "another Node of that name: starts afresh", steps: []step{{0, read("1", kubeletClock), uid},
			{20 * time.Second, ReadLease(lease("1", kubeletClock, 40, "uid-new"), "uid-new"), "uid-new"}},
			remaining: w, firstAtWant: 20 * time.Second},
		{name: "a Lease owned by another Node is no proof", steps: []step{{0, ReadLease(lease("1", kubeletClock, 40, "uid-old"), uid), uid},
			{60 * time.Second, ReadLease(lease("1", kubeletClock, 40, "uid-old"), uid), uid}},
			why: "belongs to Node uid uid-old"},
		// A shorter duration written after the first reading does not
		// shorten the wait for that version (the window only grows).
		{name: "window never shrinks", steps: []step{{0, read("1", kubeletClock), uid},
			{8 * time.Second, ReadLease(lease("1", kubeletClock, 4, uid), uid), uid}},
			remaining: w - 8*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s LeaseSighting
			for _, st := range tc.steps {
				s = ObserveLease(s, st.uid, st.reading, t0.Add(st.at))
			}
			got := s.Silent()
			if got.Silent != tc.silent || got.Remaining != tc.remaining || !strings.Contains(got.Why, tc.why) {
				t.Fatalf("Silent() = %+v, want silent=%v remaining=%s why~%q", got, tc.silent, tc.remaining, tc.why)
			}
			if tc.silent && got.For != tc.silentFor {
				t.Errorf("For = %s, want %s", got.For, tc.silentFor)
			}
			if (!s.RenewedAt.IsZero()) != tc.renewed {
				t.Errorf("RenewedAt = %s, want renewed=%v", s.RenewedAt, tc.renewed)
			}
			if !s.FirstAt.Equal(t0.Add(tc.firstAtWant)) {
				t.Errorf("FirstAt = %s, want t0+%s", s.FirstAt, tc.firstAtWant)
			}
		})
	}
	if !Renewed(read("1", kubeletClock), read("2", kubeletClock)) || Renewed(read("1", kubeletClock), read("1", kubeletClock)) {
		t.Error("Renewed must be true exactly when the version or renewTime changed")
	}
	if d := (Silence{For: 14400 * time.Millisecond}).Describe(); d != "kubelet Lease not renewed for 14s as seen by fedfailover" {
		t.Errorf("Describe() = %q", d)
	}
}

// TestVerdictOfASilentKubelet: a Ready node is fenced only when the caller
// proved its kubelet silent, and then only by positive evidence of the
// machine's state; assumeFencedAfter assumes, so it never counts there.
func TestVerdictOfASilentKubelet(t *testing.T) {
	const silent = "kubelet Lease not renewed for 15s as seen by fedfailover"
	ready := node("n1", corev1.ConditionTrue, t0.Add(-time.Hour), nil)
	gone := machine(deleting, cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason, 2))
	assume := v1alpha1.Duration("1s")
	for _, tc := range []struct {
		name    string
		in      Input
		fenced  bool
		reason  string
		missing string
	}{
		{name: "Ready, infrastructure deleted, kubelet not known silent: not fenced",
			in:     Input{Node: ready, Machine: gone, Policy: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}, Now: t0},
			reason: ReasonNodeReady},
		{name: "Ready, infrastructure deleted, kubelet silent: fenced",
			in:     Input{Node: ready, Machine: gone, Policy: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}, Now: t0, KubeletSilent: silent},
			fenced: true, reason: string(EvidenceMachineInfrastructureDeleted)},
		{name: "Ready, Machine alive, kubelet silent: not fenced",
			in:     Input{Node: ready, Machine: machine(), Policy: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}, Now: t0, KubeletSilent: silent},
			reason: ReasonNoFencingEvidence, missing: "is not being deleted"},
		{name: "Ready, another host's Machine, kubelet silent: not fenced",
			in: Input{Node: ready, Machine: machine(deleting, cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason, 2),
				func(m *clusterv1.Machine) { m.Spec.ProviderID = "kwok://other" }),
				Policy: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}, Now: t0, KubeletSilent: silent},
			reason: ReasonNoFencingEvidence, missing: "another host's Machine"},
		{name: "kubelet silent, only assumeFencedAfter: never",
			in: Input{Node: node("n1", corev1.ConditionUnknown, t0.Add(-time.Hour), nil), Policy: v1alpha1.FencingSpec{AssumeFencedAfter: &assume},
				LostSince: t0.Add(-time.Hour), Now: t0, KubeletSilent: silent},
			reason: ReasonNoFencingEvidence, missing: "evidence-first detection needs positive evidence"},
		{name: "powered off, kubelet silent: fenced",
			in: Input{Node: ready, Machine: machine(cond("PowerOn", metav1.ConditionFalse, "PoweredOff", 0)), Now: t0, KubeletSilent: silent,
				Policy: v1alpha1.FencingSpec{PoweredOffConditions: []v1alpha1.MachineConditionMatch{{Type: "PowerOn", Status: metav1.ConditionFalse}}}},
			fenced: true, reason: string(EvidenceMachinePoweredOff)},
		// The mark must be dated at or after the loss began on the host's
		// clock; a Ready node has no such start but the caller's first
		// reading of the silent Lease version (the last renewal was before).
		{name: "fence mark older than the first reading of the silent Lease: not fenced",
			in: Input{Node: ready, Machine: machine(annotated(fenceKey, t0.Add(-time.Minute).Format(time.RFC3339))), Now: t0, KubeletSilent: silent,
				LostSince: t0.Add(-30 * time.Second), Policy: v1alpha1.FencingSpec{ExternalFenceAnnotation: fenceKey}},
			reason: ReasonNoFencingEvidence, missing: "before the current loss began"},
		{name: "fence mark without a start of the loss: not fenced",
			in: Input{Node: ready, Machine: machine(annotated(fenceKey, t0.Add(-time.Minute).Format(time.RFC3339))), Now: t0, KubeletSilent: silent,
				Policy: v1alpha1.FencingSpec{ExternalFenceAnnotation: fenceKey}},
			reason: ReasonNoFencingEvidence, missing: "the start of the current loss is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verdict(tc.in)
			if got.Fenced != tc.fenced || got.Reason != tc.reason || !strings.Contains(got.Message(), tc.missing) {
				t.Fatalf("Verdict = fenced %v, reason %s, %q; want fenced %v, reason %s, with %q", got.Fenced, got.Reason, got.Message(), tc.fenced, tc.reason, tc.missing)
			}
			if ev := EvidenceOfOff(Input{Node: tc.in.Node, Machine: tc.in.Machine, Policy: tc.in.Policy, LostSince: tc.in.LostSince, Now: tc.in.Now}); tc.fenced && !ev.Fenced {
				t.Errorf("EvidenceOfOff = %s, want the evidence that fenced", ev.Message())
			}
		})
	}
}
