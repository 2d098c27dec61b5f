package noderecovery

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testProviderID ties the test Node to its Machine (fencing.MachineOfNode).
const testProviderID = "kwok://n1"

func node(ready corev1.ConditionStatus, since time.Time, ann map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann},
		Spec:       corev1.NodeSpec{Taints: taints, ProviderID: testProviderID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}},
	}
}

func deletedMachine() *clusterv1.Machine {
	now := metav1.NewTime(t0)
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default", DeletionTimestamp: &now, Finalizers: []string{"x"}},
		Spec:       clusterv1.MachineSpec{ProviderID: testProviderID},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n1"}, Conditions: []metav1.Condition{{
			Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineInfrastructureDeletedReason}}},
	}
}

func livingMachine() *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default"},
		Spec:   clusterv1.MachineSpec{ProviderID: testProviderID},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n1"}}}
}

func policy(mut ...func(*v1alpha1.NodeRecoverySpec)) *v1alpha1.NodeRecoverySpec {
	p := &v1alpha1.NodeRecoverySpec{NotReadyFor: "10s", Method: v1alpha1.RecoveryMethodAuto,
		Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}
	for _, m := range mut {
		m(p)
	}
	return p
}

// seen is a sighting of n1's loss lasting since lossAt (host clock), with
// the Ready condition the node helper makes.
func seen(status corev1.ConditionStatus, since, lossAt time.Time) sighting {
	return sighting{status: status, since: since, lossAt: lossAt, condAt: lossAt}
}

// actedRecord is the record of a recovery of n1 acted on with method.
func actedRecord(method v1alpha1.RecoveryMethod, since time.Time, mut ...func(*v1alpha1.NodeRecoveryRecordStatus)) *v1alpha1.NodeRecovery {
	at := metav1.NewTime(t0.Add(-30 * time.Second))
	rs := metav1.NewTime(since)
	rec := &v1alpha1.NodeRecovery{Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: "n1"},
		Status: v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseRecovering, Method: method, Evidence: "MachineInfrastructureDeleted",
			IntentAt: &at, ActedAt: &at, ObservedAt: &at, ReadyStatus: string(corev1.ConditionUnknown), ReadySince: &rs}}
	for _, m := range mut {
		m(&rec.Status)
	}
	return rec
}

func TestDecide(t *testing.T) {
	lostAt := t0.Add(-time.Minute)
	unknown := func() *corev1.Node { return node(corev1.ConditionUnknown, lostAt, nil) }
	long := seen(corev1.ConditionUnknown, lostAt, lostAt)
	// fresh: this process saw the loss 3 s ago (a restart, a takeover).
	fresh := seen(corev1.ConditionUnknown, lostAt, t0.Add(-3*time.Second))
	taint := actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, lostAt)
	force := actedRecord(v1alpha1.RecoveryMethodForceDelete, lostAt)
	cases := []struct {
		name      string
		in        planInput
		phase     v1alpha1.RecoveryPhase
		step      step
		method    v1alpha1.RecoveryMethod
		requeueGT time.Duration
	}{
		{name: "ready node, nothing", in: planInput{Node: node(corev1.ConditionTrue, lostAt, nil), Policy: policy()}},
		{name: "ready node with a record is cleaned up", in: planInput{Node: node(corev1.ConditionTrue, t0, nil, OutOfServiceTaint), Record: taint, Policy: policy()},
			step: stepCleanup},
		{name: "not ready, not yet lost: requeue at notReadyFor", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-3*time.Second), nil), Policy: policy(),
			Sighting: seen(corev1.ConditionUnknown, t0.Add(-3*time.Second), t0.Add(-3*time.Second))}, requeueGT: 6 * time.Second},
		// Scenario 5: the member's clock says the node has been NotReady for
		// an hour; fedfailover has seen it for 3 s only. Only the host's own
		// sighting counts.
		{name: "member clock far behind: notReadyFor measured on the host's clock", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-time.Hour), nil), Policy: policy(),
			Machine: deletedMachine(), ServerMajor: 1, ServerMinor: 37, Sighting: seen(corev1.ConditionUnknown, t0.Add(-time.Hour), t0.Add(-3*time.Second))}, requeueGT: 6 * time.Second},
		{name: "member clock far ahead: lost once seen for notReadyFor", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(10*time.Minute), nil), Policy: policy(),
			Machine: deletedMachine(), ServerMajor: 1, ServerMinor: 37, Sighting: seen(corev1.ConditionUnknown, t0.Add(10*time.Minute), t0.Add(-11*time.Second))},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "no policy: nothing", in: planInput{Node: unknown(), Machine: deletedMachine(), Sighting: long}},
		{name: "lost without evidence: blocked", in: planInput{Node: unknown(), Policy: policy(), Machine: livingMachine(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseBlocked},
		{name: "lost without evidence, machine deletion allowed", in: planInput{Node: unknown(), Machine: livingMachine(), Sighting: long, MachineDeletionEnabled: true,
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepDeleteMachine},
		{name: "machine deletion never when remediated by an MHC", in: planInput{Node: unknown(), Machine: livingMachine(), Sighting: long,
			MachineOwner: "MachineHealthCheck x", MachineDeletionEnabled: true, Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })},
			phase: v1alpha1.RecoveryPhaseBlocked},
		{name: "assumeFencedAfter pending: requeue", in: planInput{Node: unknown(), Sighting: long,
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { d := v1alpha1.Duration("2m"); p.Fencing.AssumeFencedAfter = &d })},
			phase: v1alpha1.RecoveryPhaseBlocked, requeueGT: 59 * time.Second},
		// False for ten minutes (kubelet running), silent for 30 s only.
		{name: "assumeFencedAfter counts from when the node went silent, not from the loss", in: planInput{Node: unknown(),
			Sighting: sighting{status: corev1.ConditionUnknown, since: lostAt, lossAt: t0.Add(-10 * time.Minute), condAt: t0.Add(-30 * time.Second)},
			Policy:   policy(func(p *v1alpha1.NodeRecoverySpec) { d := v1alpha1.Duration("2m"); p.Fencing.AssumeFencedAfter = &d })},
			phase: v1alpha1.RecoveryPhaseBlocked, requeueGT: 89 * time.Second},
		{name: "fenced on 1.37: taint", in: planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), ServerMajor: 1, ServerMinor: 37, Sighting: long},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "fenced on 1.27: force delete", in: planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), ServerMajor: 1, ServerMinor: 27, Sighting: long},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepForceDelete, method: v1alpha1.RecoveryMethodForceDelete},
		// The old code guessed ForceDelete for an unknown version.
		{name: "fenced, Auto, member version unknown: suspended, nothing done",
			in:    planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "fenced but storm: suspended", in: planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), Suspended: true, Sighting: long},
			phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "fenced but too many nodes not Ready: held", in: planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), Sighting: long,
			Hold: "2 of 3 nodes not Ready"}, phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "hold asks for no Machine deletion either", in: planInput{Node: unknown(), Machine: livingMachine(), Hold: "2 of 3 nodes not Ready", Sighting: long, MachineDeletionEnabled: true,
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })}, phase: v1alpha1.RecoveryPhaseSuspended},
		// A record never lifts a gate: the storm hold stops every further
		// destructive write of an acted recovery as it stops the first.
		{name: "hold stops an acted recovery's further writes", in: planInput{Node: unknown(), Record: taint, Machine: deletedMachine(), Policy: policy(), Hold: "2 of 3 nodes not Ready", Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "storm stops an acted recovery's further writes", in: planInput{Node: unknown(), Record: force, Machine: deletedMachine(), Policy: policy(), Suspended: true, Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "an acted recovery waits notReadyFor from this process's own sighting", in: planInput{Node: unknown(), Record: force, Machine: deletedMachine(), Policy: policy(), Sighting: fresh},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "already acted: only track, even without policy", in: planInput{Node: unknown(), Record: taint, Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted taint releases pods", in: planInput{Node: unknown(), Record: taint, Machine: deletedMachine(), Policy: policy(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted force delete continues", in: planInput{Node: unknown(), Record: force, Machine: deletedMachine(), Policy: policy(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "intent recorded, action not (restart in between): act again with proof", in: planInput{Node: unknown(), Machine: deletedMachine(), Policy: policy(), Sighting: long,
			Record: actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, lostAt, func(s *v1alpha1.NodeRecoveryRecordStatus) { s.ActedAt = nil })},
			phase: v1alpha1.RecoveryPhaseActing, step: stepTaint, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "intent recorded, no evidence now: blocked", in: planInput{Node: unknown(), Machine: livingMachine(), Policy: policy(), Sighting: long,
			Record: actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, lostAt, func(s *v1alpha1.NodeRecoveryRecordStatus) { s.ActedAt = nil })},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepTrack, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted record, partitioned node with a living Machine: blocked, nothing deleted",
			in:    planInput{Node: unknown(), Record: force, Machine: livingMachine(), Policy: policy(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "acted force delete pauses in a storm", in: planInput{Node: unknown(), Record: force, Policy: policy(), Suspended: true, Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		// Scenario 8: the node lifecycle controller flips Ready False to
		// Unknown on a powered-off node; the new transition time made the old
		// code see a new loss and remove the taint.
		{name: "False to Unknown flip continues the recovery", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-10*time.Second), nil, OutOfServiceTaint),
			Record:  actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, lostAt, func(s *v1alpha1.NodeRecoveryRecordStatus) { s.ReadyStatus = string(corev1.ConditionFalse) }),
			Machine: deletedMachine(), Policy: policy(), Sighting: long},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "a new Unknown spell means the node was back: the record is closed", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(time.Minute), nil, OutOfServiceTaint),
			Record: taint, Machine: livingMachine(), Policy: policy(), Sighting: long}, step: stepCleanup},
		{name: "Unknown to False: a kubelet posted, the record is closed", in: planInput{Node: node(corev1.ConditionFalse, t0, nil, OutOfServiceTaint),
			Record: taint, Machine: deletedMachine(), Policy: policy(), Sighting: long}, step: stepCleanup},
		{name: "recovered stays recovered", in: planInput{Node: unknown(), Policy: policy(), Sighting: long,
			Record: actedRecord(v1alpha1.RecoveryMethodForceDelete, lostAt, func(s *v1alpha1.NodeRecoveryRecordStatus) { at := metav1.NewTime(t0); s.RecoveredAt = &at })},
			phase: v1alpha1.RecoveryPhaseRecovered, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = t0
			p := decide(c.in)
			if p.Phase != c.phase || p.Step != c.step || p.Method != c.method {
				t.Fatalf("got phase %q step %q method %q (%s), want %q %q %q", p.Phase, p.Step, p.Method, p.Message, c.phase, c.step, c.method)
			}
			if c.requeueGT > 0 && p.RequeueAfter <= c.requeueGT {
				t.Fatalf("requeue after %s, want more than %s", p.RequeueAfter, c.requeueGT)
			}
		})
	}
}

// TestRecordedTaintOwnership: only fedfailover's own record of adding the
// taint (method taint, no taint before, not migrated) owns it.
func TestRecordedTaintOwnership(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*v1alpha1.NodeRecoveryRecordStatus)
		want bool
	}{
		{"taint added by us", func(*v1alpha1.NodeRecoveryRecordStatus) {}, true},
		{"a taint was there before", func(s *v1alpha1.NodeRecoveryRecordStatus) { s.TaintPreexisting = true }, false},
		{"migrated from node annotations", func(s *v1alpha1.NodeRecoveryRecordStatus) { s.Migrated = true }, false},
		{"force delete method", func(s *v1alpha1.NodeRecoveryRecordStatus) { s.Method = v1alpha1.RecoveryMethodForceDelete }, false},
		{"no intent recorded", func(s *v1alpha1.NodeRecoveryRecordStatus) { s.IntentAt = nil }, false},
	} {
		if got := recordedOf(actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, t0, tc.mut)).OwnsTaint; got != tc.want {
			t.Errorf("%s: OwnsTaint = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRecordedLostTaintOwnership: only an intent of fedfailover's own that
// found no NoSchedule taint with its key owns the one it adds.
func TestRecordedLostTaintOwnership(t *testing.T) {
	owned := func(s *v1alpha1.NodeRecoveryRecordStatus) { s.LostTaint = v1alpha1.LostTaintOwned }
	for _, tc := range []struct {
		name string
		mut  []func(*v1alpha1.NodeRecoveryRecordStatus)
		want bool
	}{
		{"added by us", nil, true},
		{"one was there before", []func(*v1alpha1.NodeRecoveryRecordStatus){func(s *v1alpha1.NodeRecoveryRecordStatus) { s.LostTaint = v1alpha1.LostTaintPreexisting }}, false},
		{"none decided", []func(*v1alpha1.NodeRecoveryRecordStatus){func(s *v1alpha1.NodeRecoveryRecordStatus) { s.LostTaint = "" }}, false},
		{"migrated", []func(*v1alpha1.NodeRecoveryRecordStatus){func(s *v1alpha1.NodeRecoveryRecordStatus) { s.Migrated = true }}, false},
		{"no intent recorded", []func(*v1alpha1.NodeRecoveryRecordStatus){func(s *v1alpha1.NodeRecoveryRecordStatus) { s.IntentAt = nil }}, false},
	} {
		rec := actedRecord(v1alpha1.RecoveryMethodForceDelete, t0, append([]func(*v1alpha1.NodeRecoveryRecordStatus){owned}, tc.mut...)...)
		rec.UID = "rec-uid"
		m := recordedOf(rec)
		if m.OwnsLostTaint != tc.want || (tc.want && m.UID != "rec-uid") {
			t.Errorf("%s: OwnsLostTaint = %v (uid %q), want %v", tc.name, m.OwnsLostTaint, m.UID, tc.want)
		}
	}
}

// TestLostTaintHelpers: fedfailover's NoSchedule taint is added once, not
// next to one with its key and effect, and only its exact self is removed.
func TestLostTaintHelpers(t *testing.T) {
	ours := lostTaintOf("rec-uid")
	if ours.Key != "failover.fedfailover.io/lost" || ours.Value != "rec-uid" || ours.Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("lostTaintOf: %+v", ours)
	}
	admins := corev1.Taint{Key: ours.Key, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}
	otherEffect := corev1.Taint{Key: ours.Key, Value: "x", Effect: corev1.TaintEffectNoExecute}
	if got := withLostTaint([]corev1.Taint{otherEffect}, "rec-uid"); len(got) != 2 || got[1] != ours {
		t.Fatalf("withLostTaint: %v", got)
	}
	if got := withLostTaint([]corev1.Taint{admins}, "rec-uid"); len(got) != 1 || got[0] != admins {
		t.Fatalf("withLostTaint must not add a second NoSchedule taint with the key: %v", got)
	}
	if got := withoutLostTaint([]corev1.Taint{admins, otherEffect}, "rec-uid"); len(got) != 2 {
		t.Fatalf("withoutLostTaint removed a taint that is not the record's: %v", got)
	}
	if got := withoutLostTaint([]corev1.Taint{OutOfServiceTaint, ours}, "rec-uid"); len(got) != 1 || got[0] != OutOfServiceTaint {
		t.Fatalf("withoutLostTaint must remove only the record's: %v", got)
	}
	if got := withoutLostTaint([]corev1.Taint{ours}, "another-record"); len(got) != 1 {
		t.Fatalf("withoutLostTaint removed another record's taint: %v", got)
	}
}

func TestTaintHelpers(t *testing.T) {
	other := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "someone-else", Effect: corev1.TaintEffectNoExecute}
	unreach := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	if got := withTaint([]corev1.Taint{unreach}); len(got) != 2 || got[1] != OutOfServiceTaint {
		t.Fatalf("withTaint: %v", got)
	}
	if got := withTaint([]corev1.Taint{other}); len(got) != 1 {
		t.Fatalf("withTaint must not add a second out-of-service taint: %v", got)
	}
	if got := withoutTaint([]corev1.Taint{unreach, OutOfServiceTaint, other}); len(got) != 2 || got[1] != other {
		t.Fatalf("withoutTaint must remove only ours: %v", got)
	}
}

func TestMachineOwner(t *testing.T) {
	m := livingMachine()
	m.Spec.ClusterName = "c1"
	m.Labels = map[string]string{"pool": "a"}
	mhc := func(sel map[string]string) clusterv1.MachineHealthCheck {
		return clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "mhc", Namespace: "default"},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "c1", Selector: metav1.LabelSelector{MatchLabels: sel}}}
	}
	if o := machineOwner(m, nil); o != "" {
		t.Fatalf("free machine owned by %q", o)
	}
	if o := machineOwner(m, []clusterv1.MachineHealthCheck{mhc(map[string]string{"pool": "b"})}); o != "" {
		t.Fatalf("non-matching MHC owns: %q", o)
	}
	if o := machineOwner(m, []clusterv1.MachineHealthCheck{mhc(map[string]string{"pool": "a"})}); o == "" {
		t.Fatal("matching MHC not seen")
	}
	m2 := m.DeepCopy()
	m2.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse}}
	if machineOwner(m2, nil) == "" {
		t.Fatal("OwnerRemediated condition not seen")
	}
	m3 := m.DeepCopy()
	m3.OwnerReferences = []metav1.OwnerReference{{Kind: "Metal3Remediation", Name: "r"}}
	if machineOwner(m3, nil) == "" {
		t.Fatal("external remediation owner not seen")
	}
	// Cluster API's own stop signs: no Machine deletion is requested.
	for name, mut := range map[string]func(*clusterv1.Machine){
		"paused annotation": func(m *clusterv1.Machine) { m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} },
		"skip-remediation annotation": func(m *clusterv1.Machine) {
			m.Annotations = map[string]string{clusterv1.MachineSkipRemediationAnnotation: ""}
		},
		"Paused condition (Cluster paused)": func(m *clusterv1.Machine) {
			m.Status.Conditions = []metav1.Condition{{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue}}
		},
	} {
		p := m.DeepCopy()
		mut(p)
		if o := machineOwner(p, nil); !strings.Contains(o, "no remediation wanted") {
			t.Errorf("%s: machineOwner = %q, want deletion ruled out", name, o)
		}
	}
	unpaused := m.DeepCopy()
	unpaused.Status.Conditions = []metav1.Condition{{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse}}
	if o := machineOwner(unpaused, nil); o != "" {
		t.Errorf("Paused=False: machineOwner = %q, want none", o)
	}
}

func TestOrphanNodes(t *testing.T) {
	v := &memberView{
		nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}},
		pods:  map[string][]*cachedpod.Pod{"a": nil, "gone": nil},
		vas:   map[string][]*storagev1.VolumeAttachment{"gone": nil, "gone2": nil, "a": nil},
	}
	if got := orphanNodes(v); !slices.Equal(got, []string{"gone", "gone2"}) {
		t.Fatalf("orphans %v", got)
	}
}
