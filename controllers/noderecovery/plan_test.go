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
	"github.com/fedfailover/fedfailover/internal/contract"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func node(ready corev1.ConditionStatus, since time.Time, ann map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}},
	}
}

func deletedMachine() *clusterv1.Machine {
	now := metav1.NewTime(t0)
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default", DeletionTimestamp: &now, Finalizers: []string{"x"}},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n1"}, Conditions: []metav1.Condition{{
			Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineInfrastructureDeletedReason}}},
	}
}

func livingMachine() *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default"},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n1"}}}
}

func policy(mut ...func(*v1alpha1.NodeRecoverySpec)) *v1alpha1.NodeRecoverySpec {
	p := &v1alpha1.NodeRecoverySpec{Enabled: true, NotReadyFor: "10s", Method: v1alpha1.RecoveryMethodAuto,
		Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func TestDecide(t *testing.T) {
	lostAt := t0.Add(-time.Minute)
	acted := contract.NodeMarks{Action: v1alpha1.RecoveryMethodOutOfServiceTaint, TaintedByUs: true,
		FencedBy: "MachineInfrastructureDeleted", LostSince: lostAt, FencedAt: t0}.Annotations()
	cases := []struct {
		name      string
		in        planInput
		phase     v1alpha1.RecoveryPhase
		step      step
		method    v1alpha1.RecoveryMethod
		requeueGT time.Duration
	}{
		{name: "ready node, nothing", in: planInput{Node: node(corev1.ConditionTrue, lostAt, nil), Policy: policy()}},
		{name: "ready node with our marks is cleaned up", in: planInput{Node: node(corev1.ConditionTrue, t0, acted, OutOfServiceTaint), Policy: policy()},
			step: stepCleanup},
		{name: "not ready, not yet lost: requeue at notReadyFor", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-3*time.Second), nil), Policy: policy()},
			requeueGT: 6 * time.Second},
		{name: "no policy: nothing", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine()}},
		{name: "lost without evidence: blocked", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Policy: policy(), Machine: livingMachine()},
			phase: v1alpha1.RecoveryPhaseBlocked},
		{name: "lost without evidence, machine deletion allowed", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: livingMachine(),
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepDeleteMachine},
		{name: "machine deletion never when remediated by an MHC", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: livingMachine(),
			MachineOwner: "MachineHealthCheck x", Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })},
			phase: v1alpha1.RecoveryPhaseBlocked},
		{name: "assumeFencedAfter pending: requeue", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil),
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { d := v1alpha1.Duration("2m"); p.Fencing.AssumeFencedAfter = &d })},
			phase: v1alpha1.RecoveryPhaseBlocked, requeueGT: 59 * time.Second},
		{name: "fenced on 1.37: taint", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine(), Policy: policy(), ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "fenced on 1.27: force delete", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine(), Policy: policy(), ServerMajor: 1, ServerMinor: 27},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepForceDelete, method: v1alpha1.RecoveryMethodForceDelete},
		// The old code guessed ForceDelete for an unknown version.
		{name: "fenced, Auto, member version unknown: suspended, nothing done",
			in:    planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine(), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "fenced but storm: suspended", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine(), Policy: policy(), Suspended: true},
			phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "fenced but too many nodes not Ready: held", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: deletedMachine(), Policy: policy(),
			Hold: "2 of 3 nodes not Ready"}, phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "hold asks for no Machine deletion either", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: livingMachine(), Hold: "2 of 3 nodes not Ready",
			Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })}, phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "hold lets an acted recovery continue", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, acted, OutOfServiceTaint), Machine: deletedMachine(), Policy: policy(), Hold: "2 of 3 nodes not Ready"},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "already acted: only track, even without policy", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, acted, OutOfServiceTaint)},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted taint releases pods", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, acted, OutOfServiceTaint), Machine: deletedMachine(), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted force delete continues", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, map[string]string{contract.AnnotationAction: "ForceDelete"}), Machine: deletedMachine(), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodForceDelete},
		// Issue: marks written by anyone with nodes/patch (or left from an
		// earlier incident) made the old code force-delete the pods of a
		// live, partitioned node.
		{name: "forged ForceDelete mark on a partitioned node with a living Machine: blocked, nothing deleted",
			in:    planInput{Node: node(corev1.ConditionUnknown, lostAt, map[string]string{contract.AnnotationAction: "ForceDelete"}), Machine: livingMachine(), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "every mark copied onto a live node without a Machine: blocked, nothing deleted",
			in:    planInput{Node: node(corev1.ConditionUnknown, lostAt, acted, OutOfServiceTaint), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseBlocked, step: stepTrack, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "acted force delete pauses in a storm", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, map[string]string{contract.AnnotationAction: "ForceDelete"}), Policy: policy(), Suspended: true},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, method: v1alpha1.RecoveryMethodForceDelete},
		{name: "marks older than the current loss are dropped, not resumed", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(time.Minute), acted, OutOfServiceTaint),
			Machine: livingMachine(), Policy: policy()}, step: stepCleanup},
		{name: "marks within the precision of the condition time are current", in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(time.Second), acted, OutOfServiceTaint), Machine: deletedMachine(), Policy: policy()},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, method: v1alpha1.RecoveryMethodOutOfServiceTaint},
		{name: "recovered stays recovered", in: planInput{Node: node(corev1.ConditionUnknown, lostAt, contract.NodeMarks{Action: v1alpha1.RecoveryMethodForceDelete, RecoveredAt: t0}.Annotations()), Policy: policy()},
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

// TestActionAnnotations: the marks of an action read back as written, and
// only the taint method claims the taint.
func TestActionAnnotations(t *testing.T) {
	a := actionAnnotations(t0.Add(-time.Minute), t0, "MachinePoweredOff", v1alpha1.RecoveryMethodOutOfServiceTaint, []string{"ns/a", "ns/b"})
	m := readMarks(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: a}})
	if !m.Acted() || !m.TaintedByUs || !m.LostSince.Equal(t0.Add(-time.Minute)) || !m.FencedAt.Equal(t0) || len(m.Claims) != 2 || m.FencedBy != "MachinePoweredOff" {
		t.Fatalf("marks: %+v", m)
	}
	f := actionAnnotations(t0, t0, "X", v1alpha1.RecoveryMethodForceDelete, nil)
	if _, ok := f[contract.AnnotationTaintedBy]; ok {
		t.Fatal("force delete must not claim the taint")
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
		pods:  map[string][]*corev1.Pod{"a": nil, "gone": nil},
		vas:   map[string][]*storagev1.VolumeAttachment{"gone": nil, "gone2": nil, "a": nil},
	}
	if got := orphanNodes(v); !slices.Equal(got, []string{"gone", "gone2"}) {
		t.Fatalf("orphans %v", got)
	}
}
