package fencing

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

const fenceKey = "fence.example.com/fenced"

func allEvidence() v1alpha1.FencingSpec {
	after := v1alpha1.Duration("10m")
	return v1alpha1.FencingSpec{
		MachineInfrastructureDeleted: true,
		PoweredOffConditions: []v1alpha1.MachineConditionMatch{
			{Type: "PowerOn", Status: metav1.ConditionFalse, Reasons: []string{"PoweredOff", "Halted"}},
		},
		ExternalFenceAnnotation: fenceKey,
		AssumeFencedAfter:       &after,
	}
}

func onlyInfra() v1alpha1.FencingSpec {
	return v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}
}

func TestVerdict(t *testing.T) {
	lost := node("n1", corev1.ConditionUnknown, t0, nil)
	now := t0.Add(2 * time.Minute)
	infraDeleted := cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason, 0)
	infraMissing := cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDoesNotExistReason, 0)
	infraReady := cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionTrue, clusterv1.MachineInfrastructureReadyReason, 0)
	deletingStage := func(reason string, gen int64) machineOpt {
		return cond(clusterv1.MachineDeletingCondition, metav1.ConditionTrue, reason, gen)
	}
	poweredOff := cond("PowerOn", metav1.ConditionFalse, "PoweredOff", 0)

	tests := []struct {
		name       string
		node       *corev1.Node
		machine    *clusterv1.Machine
		policy     v1alpha1.FencingSpec
		lostSince  time.Time
		now        time.Time
		wantFenced bool
		wantReason string
		wantFound  []EvidenceKind
		wantMiss   []string // substrings expected in Missing
	}{
		{name: "ready node with every evidence is never fenced",
			node:    node("n1", corev1.ConditionTrue, t0, map[string]string{fenceKey: stamp(now)}),
			machine: machine(deleting, infraDeleted, poweredOff, annotated(fenceKey, stamp(now))),
			policy:  allEvidence(), lostSince: t0.Add(-time.Hour), now: now,
			wantReason: ReasonNodeReady},
		{name: "no evidence enabled", node: lost, machine: machine(deleting, infraDeleted),
			policy: v1alpha1.FencingSpec{}, now: now, wantReason: ReasonNoEvidenceEnabled},
		{name: "nil machine, infra evidence only", node: lost, policy: onlyInfra(), now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"no Cluster API Machine"}},
		{name: "machine not deleting", node: lost, machine: machine(infraDeleted), policy: onlyInfra(), now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"not being deleted"}},
		{name: "deleting, infrastructure still there", node: lost,
			machine: machine(deleting, infraReady, deletingStage(clusterv1.MachineDeletingWaitingForInfrastructureDeletionReason, 2)),
			policy:  onlyInfra(), now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"not reported gone yet"}},
		{name: "deleting, draining", node: lost,
			machine: machine(deleting, deletingStage(clusterv1.MachineDeletingDrainingNodeReason, 2)),
			policy:  onlyInfra(), now: now, wantReason: ReasonNoFencingEvidence},
		{name: "deleting, InfrastructureReady ObjectDeleted", node: lost, machine: machine(deleting, infraDeleted),
			policy: onlyInfra(), now: now, wantFenced: true,
			wantReason: string(EvidenceMachineInfrastructureDeleted), wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted}},
		{name: "deleting, InfrastructureReady ObjectDoesNotExist", node: lost, machine: machine(deleting, infraMissing),
			policy: onlyInfra(), now: now, wantFenced: true, wantReason: string(EvidenceMachineInfrastructureDeleted),
			wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted}},
		{name: "deleting, later stage WaitingForBootstrapDeletion", node: lost,
			machine: machine(deleting, deletingStage(clusterv1.MachineDeletingWaitingForBootstrapDeletionReason, 2)),
			policy:  onlyInfra(), now: now, wantFenced: true, wantReason: string(EvidenceMachineInfrastructureDeleted),
			wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted}},
		{name: "deleting, stage DeletingNode", node: lost,
			machine: machine(deleting, deletingStage(clusterv1.MachineDeletingDeletingNodeReason, 2)),
			policy:  onlyInfra(), now: now, wantFenced: true, wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted},
			wantReason: string(EvidenceMachineInfrastructureDeleted)},
		{name: "deleting stage condition stale (older generation)", node: lost,
			machine: machine(deleting, deletingStage(clusterv1.MachineDeletingDeletingNodeReason, 1)),
			policy:  onlyInfra(), now: now, wantReason: ReasonNoFencingEvidence, wantMiss: []string{"stale"}},
		{name: "infra gone but condition disabled by policy", node: lost, machine: machine(deleting, infraDeleted),
			policy: v1alpha1.FencingSpec{ExternalFenceAnnotation: fenceKey}, now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{fenceKey}},
		{name: "machine of another node is ignored", node: lost, machine: machine(nodeRef("other"), deleting, infraDeleted),
			policy: onlyInfra(), now: now, wantReason: ReasonNoFencingEvidence, wantMiss: []string{"refers to node other"}},
		{name: "machine of another host (providerID differs) is ignored",
			node:    withProviderID(node("n1", corev1.ConditionUnknown, t0, nil), "kwok://n1-new"),
			machine: machine(providerID("kwok://n1"), deleting, infraDeleted), policy: onlyInfra(), now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"has providerID kwok://n1"}},
		{name: "same providerID: evidence counts",
			node:    withProviderID(node("n1", corev1.ConditionUnknown, t0, nil), "kwok://n1"),
			machine: machine(providerID("kwok://n1"), deleting, infraDeleted), policy: onlyInfra(), now: now,
			wantFenced: true, wantReason: string(EvidenceMachineInfrastructureDeleted), wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted}},
		{name: "node deleted, machine infra deleted out of band", node: nil, machine: machine(infraDeleted),
			policy: onlyInfra(), now: now, wantFenced: true, wantReason: string(EvidenceNodeDeletedInfrastructureGone),
			wantFound: []EvidenceKind{EvidenceNodeDeletedInfrastructureGone}},
		{name: "node deleted, machine deleting with infra gone: both kinds", node: nil, machine: machine(deleting, infraDeleted),
			policy: onlyInfra(), now: now, wantFenced: true, wantReason: string(EvidenceMachineInfrastructureDeleted),
			wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted, EvidenceNodeDeletedInfrastructureGone}},
		{name: "node deleted, infra not yet provisioned (DoesNotExist, not deleting)", node: nil, machine: machine(infraMissing),
			policy: onlyInfra(), now: now, wantReason: ReasonNoFencingEvidence, wantMiss: []string{"Node is deleted but"}},
		{name: "node deleted, infra ready", node: nil, machine: machine(infraReady),
			policy: onlyInfra(), now: now, wantReason: ReasonNoFencingEvidence},
		{name: "node and machine deleted: nothing to prove it", node: nil, policy: onlyInfra(), now: now,
			wantReason: ReasonNoFencingEvidence},
		{name: "powered off condition", node: lost, machine: machine(poweredOff),
			policy: v1alpha1.FencingSpec{PoweredOffConditions: allEvidence().PoweredOffConditions}, now: now,
			wantFenced: true, wantReason: string(EvidenceMachinePoweredOff), wantFound: []EvidenceKind{EvidenceMachinePoweredOff}},
		{name: "powered off condition, wrong reason", node: lost, machine: machine(cond("PowerOn", metav1.ConditionFalse, "Rebooting", 0)),
			policy: v1alpha1.FencingSpec{PoweredOffConditions: allEvidence().PoweredOffConditions}, now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"PowerOn=False (reason PoweredOff|Halted)"}},
		{name: "powered off condition, any reason", node: lost, machine: machine(cond("Off", metav1.ConditionTrue, "Whatever", 0)),
			policy: v1alpha1.FencingSpec{PoweredOffConditions: []v1alpha1.MachineConditionMatch{{Type: "Off", Status: metav1.ConditionTrue}}},
			now:    now, wantFenced: true, wantReason: string(EvidenceMachinePoweredOff), wantFound: []EvidenceKind{EvidenceMachinePoweredOff}},
		{name: "powered off condition, wrong status", node: lost, machine: machine(cond("PowerOn", metav1.ConditionTrue, "PoweredOff", 0)),
			policy: v1alpha1.FencingSpec{PoweredOffConditions: allEvidence().PoweredOffConditions}, now: now,
			wantReason: ReasonNoFencingEvidence},
		{name: "powered off, nil machine", node: lost,
			policy: v1alpha1.FencingSpec{PoweredOffConditions: allEvidence().PoweredOffConditions}, now: now,
			wantReason: ReasonNoFencingEvidence, wantMiss: []string{"no powered-off condition can be read"}},
		{name: "external fence on machine", node: lost, machine: machine(annotated(fenceKey, stamp(t0.Add(time.Minute)))),
			policy: fenceOn(""), lostSince: t0, now: now,
			wantFenced: true, wantReason: string(EvidenceExternalFence), wantFound: []EvidenceKind{EvidenceExternalFence}},
		{name: "external fence on deleted node's machine", node: nil, machine: machine(annotated(fenceKey, stamp(t0))),
			policy: fenceOn(v1alpha1.ExternalFenceSourceMachine), lostSince: t0, now: now,
			wantFenced: true, wantReason: string(EvidenceExternalFence), wantFound: []EvidenceKind{EvidenceExternalFence}},
		{name: "assumeFencedAfter not elapsed", node: lost, policy: v1alpha1.FencingSpec{AssumeFencedAfter: allEvidence().AssumeFencedAfter},
			lostSince: t0, now: t0.Add(9 * time.Minute), wantReason: ReasonNoFencingEvidence, wantMiss: []string{"elapses at"}},
		{name: "assumeFencedAfter elapsed", node: lost, policy: v1alpha1.FencingSpec{AssumeFencedAfter: allEvidence().AssumeFencedAfter},
			lostSince: t0, now: t0.Add(10 * time.Minute), wantFenced: true,
			wantReason: string(EvidenceAssumeFencedAfter), wantFound: []EvidenceKind{EvidenceAssumeFencedAfter}},
		{name: "assumeFencedAfter without lost-since", node: lost, policy: v1alpha1.FencingSpec{AssumeFencedAfter: allEvidence().AssumeFencedAfter},
			now: now, wantReason: ReasonNoFencingEvidence, wantMiss: []string{"unknown"}},
		{name: "assumeFencedAfter invalid", node: lost, policy: v1alpha1.FencingSpec{AssumeFencedAfter: ptrDuration("soon")},
			lostSince: t0, now: t0.Add(time.Hour), wantReason: ReasonNoFencingEvidence, wantMiss: []string{"not a positive duration"}},
		{name: "every kind found, in fixed order", node: lost,
			machine: machine(deleting, infraDeleted, poweredOff, annotated(fenceKey, stamp(t0))), policy: allEvidence(), lostSince: t0, now: t0.Add(time.Hour),
			wantFenced: true, wantReason: string(EvidenceMachineInfrastructureDeleted),
			wantFound: []EvidenceKind{EvidenceMachineInfrastructureDeleted, EvidenceMachinePoweredOff, EvidenceExternalFence, EvidenceAssumeFencedAfter}},
		{name: "nothing found, every kind missing", node: lost, machine: machine(infraReady), policy: allEvidence(), lostSince: t0, now: now,
			wantReason: ReasonNoFencingEvidence,
			wantMiss:   []string{"not being deleted", "powered-off", fenceKey, "assumeFencedAfter"}},
		{name: "node without Ready condition is not Ready", node: node("n1", "", time.Time{}, nil),
			machine: machine(annotated(fenceKey, stamp(t0))), policy: fenceOn(""), lostSince: t0, now: now,
			wantFenced: true, wantReason: string(EvidenceExternalFence), wantFound: []EvidenceKind{EvidenceExternalFence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Verdict(Input{Node: tt.node, Machine: tt.machine, Policy: tt.policy, LostSince: tt.lostSince, Now: tt.now})
			if got.Fenced != tt.wantFenced || got.Reason != tt.wantReason {
				t.Fatalf("got fenced=%v reason=%s, want %v %s (%s)", got.Fenced, got.Reason, tt.wantFenced, tt.wantReason, got.Message())
			}
			if kinds := foundKinds(got); !equalKinds(kinds, tt.wantFound) {
				t.Errorf("found %v, want %v", kinds, tt.wantFound)
			}
			missing := strings.Join(got.Missing, "\n")
			for _, want := range tt.wantMiss {
				if !strings.Contains(missing, want) {
					t.Errorf("missing %q not in:\n%s", want, missing)
				}
			}
			if !got.Fenced && len(got.Missing) == 0 {
				t.Errorf("not fenced without saying what is missing")
			}
		})
	}
}

// TestAssumeFencedAfterOnlyForSilentNodes: a node whose kubelet reports
// Ready=False is alive, however long; only a node that stopped reporting
// (Ready=Unknown) can be assumed off. Fenced on the old code.
func TestAssumeFencedAfterOnlyForSilentNodes(t *testing.T) {
	spec := v1alpha1.FencingSpec{AssumeFencedAfter: ptrDuration("5m")}
	alive := Verdict(Input{Node: node("n1", corev1.ConditionFalse, t0, nil), Policy: spec, LostSince: t0, Now: t0.Add(time.Hour)})
	if alive.Fenced || !strings.Contains(alive.Message(), "Ready=False") {
		t.Fatalf("Ready=False node: %+v, want not fenced and the reason", alive)
	}
	silent := Verdict(Input{Node: node("n1", corev1.ConditionUnknown, t0, nil), Policy: spec, LostSince: t0, Now: t0.Add(time.Hour)})
	if !silent.Fenced || silent.Reason != string(EvidenceAssumeFencedAfter) {
		t.Fatalf("Ready=Unknown node lost for an hour: %+v, want fenced by %s", silent, EvidenceAssumeFencedAfter)
	}
}

func TestVerdictAssumeFencedAt(t *testing.T) {
	lost := node("n1", corev1.ConditionUnknown, t0, nil)
	got := Verdict(Input{Node: lost, Policy: v1alpha1.FencingSpec{AssumeFencedAfter: ptrDuration("5m")}, LostSince: t0, Now: t0.Add(time.Minute)})
	if want := t0.Add(5 * time.Minute); !got.AssumeFencedAt.Equal(want) {
		t.Fatalf("AssumeFencedAt = %v, want %v", got.AssumeFencedAt, want)
	}
}

func TestResultMessage(t *testing.T) {
	fenced := Result{Fenced: true, Found: []Evidence{{Kind: EvidenceExternalFence, Detail: "a"}, {Kind: EvidenceAssumeFencedAfter, Detail: "b"}}}
	if got := fenced.Message(); got != "fenced: a; b" {
		t.Errorf("got %q", got)
	}
	blocked := Result{Reason: ReasonNoFencingEvidence, Missing: []string{"x", "y"}}
	if got := blocked.Message(); got != "not fenced: x; y" {
		t.Errorf("got %q", got)
	}
}

func ptrDuration(s string) *v1alpha1.Duration {
	d := v1alpha1.Duration(s)
	return &d
}

func foundKinds(r Result) []EvidenceKind {
	var kinds []EvidenceKind
	for _, e := range r.Found {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

func equalKinds(a, b []EvidenceKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func withProviderID(n *corev1.Node, id string) *corev1.Node {
	n.Spec.ProviderID = id
	return n
}

func providerID(id string) machineOpt { return func(m *clusterv1.Machine) { m.Spec.ProviderID = id } }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func fenceOn(src v1alpha1.ExternalFenceSource) v1alpha1.FencingSpec {
	return v1alpha1.FencingSpec{ExternalFenceAnnotation: fenceKey, ExternalFenceSource: src}
}

// TestMachineIdentity: Machine evidence counts only for the Machine of the
// current Node: status.nodeRef names it and the providerIDs are equal, both
// set. Each case but the first carries evidence that would fence the node.
func TestMachineIdentity(t *testing.T) {
	infraDeleted := cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason, 0)
	lost := func(id string) *corev1.Node { return withProviderID(node("n1", corev1.ConditionUnknown, t0, nil), id) }
	cases := []struct {
		name    string
		node    *corev1.Node
		machine *clusterv1.Machine
		want    string // in the message; "" means fenced
	}{
		{name: "nodeRef and providerID match", node: lost("kwok://n1"), machine: machine(deleting, infraDeleted)},
		{name: "replacement Machine reusing the node name (new host)", node: lost("kwok://n1"),
			machine: machine(providerID("kwok://n1-replacement"), deleting, infraDeleted),
			want:    "Machine capi/m1 has providerID kwok://n1-replacement, Node n1 has kwok://n1"},
		{name: "Node re-created on another host under the same name", node: lost("kwok://n1-new"),
			machine: machine(deleting, infraDeleted), want: "Machine capi/m1 has providerID kwok://n1, Node n1 has kwok://n1-new"},
		{name: "Machine without providerID", node: lost("kwok://n1"), machine: machine(providerID(""), deleting, infraDeleted),
			want: `Machine capi/m1 has providerID "", Node n1 has "kwok://n1"`},
		{name: "Node without providerID", node: lost(""), machine: machine(deleting, infraDeleted),
			want: `Machine capi/m1 has providerID "kwok://n1", Node n1 has ""`},
		{name: "neither has a providerID", node: lost(""), machine: machine(providerID(""), deleting, infraDeleted),
			want: "cannot be tied to this Node"},
		{name: "Machine names another node", node: lost("kwok://n1"), machine: machine(nodeRef("n2"), deleting, infraDeleted),
			want: "refers to node n2, not n1"},
		{name: "Machine without nodeRef", node: lost("kwok://n1"), machine: machine(nodeRef(""), deleting, infraDeleted),
			want: "has no status.nodeRef"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Verdict(Input{Node: c.node, Machine: c.machine, Policy: onlyInfra(), LostSince: t0, Now: t0.Add(time.Minute)})
			if c.want == "" {
				if !got.Fenced {
					t.Fatalf("not fenced: %s", got.Message())
				}
				return
			}
			if got.Fenced || !strings.Contains(got.Message(), c.want) {
				t.Fatalf("got fenced=%v %q, want not fenced, saying %q", got.Fenced, got.Message(), c.want)
			}
			if MachineOfNode(c.node, c.machine) == "" {
				t.Errorf("MachineOfNode accepts the Machine the verdict rejected")
			}
		})
	}
}

// TestExternalFenceLifecycle: the external fence mark counts only when read
// from the source the policy names and when its time is within the current
// loss. "true", or a time from an earlier incident, never fences. On the old
// code "true" fenced from either object, at any time.
func TestExternalFenceLifecycle(t *testing.T) {
	lostAt := t0                        // host clock: when the loss began
	nodeLTT := t0.Add(-7 * time.Minute) // member clock (skewed): the Node's Ready transition
	now := t0.Add(2 * time.Minute)
	lostNode := func(ann map[string]string) *corev1.Node { return node("n1", corev1.ConditionUnknown, nodeLTT, ann) }
	onMachine := func(v string) *clusterv1.Machine { return machine(annotated(fenceKey, v)) }
	cases := []struct {
		name    string
		src     v1alpha1.ExternalFenceSource
		node    *corev1.Node
		machine *clusterv1.Machine
		lost    time.Time
		want    string // in the message; "" means fenced
	}{
		{name: "Machine: set after the loss began", machine: onMachine(stamp(lostAt.Add(30 * time.Second))), lost: lostAt},
		{name: "Machine: set exactly when the loss began", machine: onMachine(stamp(lostAt)), lost: lostAt},
		{name: "Machine: explicit source", src: v1alpha1.ExternalFenceSourceMachine, machine: onMachine(stamp(lostAt)), lost: lostAt},
		{name: "Machine: value true", machine: onMachine("true"), lost: lostAt,
			want: `value "true" is not an RFC 3339 time: the mark needs the time the node was fenced`},
		{name: "Machine: left from an earlier incident", machine: onMachine(stamp(lostAt.Add(-time.Hour))), lost: lostAt,
			want: "before the current loss began"},
		{name: "Machine: one second before the loss", machine: onMachine(stamp(lostAt.Add(-time.Second))), lost: lostAt,
			want: "a mark from an earlier incident"},
		{name: "Machine: in the future", machine: onMachine(stamp(now.Add(time.Hour))), lost: lostAt, want: "in the future"},
		{name: "Machine: loss start unknown", machine: onMachine(stamp(lostAt)), want: "start of the current loss is unknown"},
		{name: "Machine: no Machine", lost: lostAt, want: "none found"},
		{name: "Node not opted in: a valid Node mark is ignored",
			node: lostNode(map[string]string{fenceKey: stamp(now)}), lost: lostAt,
			want: "the Node's own " + fenceKey + " is ignored: externalFenceSource is Machine"},
		{name: "Node opted in: set after the Node's Ready transition", src: v1alpha1.ExternalFenceSourceNode,
			node: writtenAt(lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(time.Minute))}), nodeLTT.Add(time.Minute+time.Second)), lost: lostAt},
		{name: "Node opted in: compared on the member's clock, not the host's", src: v1alpha1.ExternalFenceSourceNode,
			node: writtenAt(lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(time.Minute))}), nodeLTT.Add(time.Minute)), lost: lostAt.Add(time.Hour)},
		{name: "Node opted in: the agent's clock a second ahead of the API server's", src: v1alpha1.ExternalFenceSourceNode,
			node: writtenAt(lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(time.Minute))}), nodeLTT.Add(time.Minute-time.Second)), lost: lostAt},
		{name: "Node opted in: dated after it was written", src: v1alpha1.ExternalFenceSourceNode,
			node: writtenAt(lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(time.Hour))}), nodeLTT.Add(time.Minute)), lost: lostAt,
			want: "later than the member's newest record of the Node"},
		// A mark dated a year ahead, written before this loss began: it is
		// at or after the start of every loss until then, and fenced each
		// of them on the old code.
		{name: "Node opted in: a future mark left from before the loss", src: v1alpha1.ExternalFenceSourceNode,
			node: writtenAt(lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(365 * 24 * time.Hour))}), nodeLTT.Add(-time.Hour)), lost: lostAt,
			want: "a mark dated in the future is ignored"},
		{name: "Node opted in: without any record of its write, bounded by the Ready transition", src: v1alpha1.ExternalFenceSourceNode,
			node: lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(time.Minute))}), lost: lostAt,
			want: "later than the member's newest record of the Node"},
		{name: "Node opted in: from an earlier incident", src: v1alpha1.ExternalFenceSourceNode,
			node: lostNode(map[string]string{fenceKey: stamp(nodeLTT.Add(-time.Minute))}), lost: lostAt, want: "earlier incident"},
		{name: "Node opted in: value true", src: v1alpha1.ExternalFenceSourceNode,
			node: lostNode(map[string]string{fenceKey: "true"}), lost: lostAt, want: "not an RFC 3339 time"},
		{name: "Node opted in: the Machine's mark is ignored", src: v1alpha1.ExternalFenceSourceNode,
			node: lostNode(nil), machine: onMachine(stamp(lostAt)), lost: lostAt, want: "on the Node: no such annotation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.node
			if n == nil {
				n = lostNode(nil)
			}
			got := Verdict(Input{Node: n, Machine: c.machine, Policy: fenceOn(c.src), LostSince: c.lost, Now: now})
			if c.want == "" {
				if !got.Fenced || got.Reason != string(EvidenceExternalFence) {
					t.Fatalf("not fenced by %s: %s", EvidenceExternalFence, got.Message())
				}
				return
			}
			if got.Fenced || !strings.Contains(got.Message(), c.want) {
				t.Fatalf("got fenced=%v %q, want not fenced, saying %q", got.Fenced, got.Message(), c.want)
			}
		})
	}
}

func TestMachineOfDeletedNode(t *testing.T) {
	m := func(uid, nodeRef, providerID string) *clusterv1.Machine {
		x := &clusterv1.Machine{}
		x.Namespace, x.Name, x.UID = "default", "m1", types.UID(uid)
		x.Status.NodeRef.Name, x.Spec.ProviderID = nodeRef, providerID
		return x
	}
	rec := RecordedMachine{UID: "u1", ProviderID: "kwok://n1"}
	cases := []struct {
		name string
		rec  RecordedMachine
		m    *clusterv1.Machine
		want string // substring of the reason; "" when m speaks for the node
	}{
		{"recorded Machine", rec, m("u1", "n1", "kwok://n1"), ""},
		{"nothing recorded, nodeRef names the node", RecordedMachine{}, m("u9", "n1", ""), ""},
		{"empty nodeRef", RecordedMachine{}, m("u1", "", "kwok://n1"), "no status.nodeRef"},
		{"nodeRef names another node", rec, m("u1", "n2", "kwok://n1"), "refers to node n2"},
		{"another Machine under the name", rec, m("u2", "n1", "kwok://n1"), "another Machine under the same name"},
		{"another host's providerID", rec, m("u1", "n1", "kwok://n9"), "another host's Machine"},
		{"no Machine", rec, nil, "no Machine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := MachineOfDeletedNode("n1", c.rec, c.m)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("MachineOfDeletedNode = %q, want %q", got, c.want)
			}
		})
	}
}

// TestRemediationEvidence: a remediation's success fences a lost node
// without any Machine evidence, but never a Ready node whose kubelet is
// not known silent.
func TestRemediationEvidence(t *testing.T) {
	lost := node("n1", corev1.ConditionUnknown, t0, nil)
	in := Input{Node: lost, Policy: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}, LostSince: t0, Now: t0.Add(time.Minute)}
	if r := Verdict(in); r.Fenced {
		t.Fatalf("fenced without evidence: %s", r.Message())
	}
	in.Remediation = "remediation LabRemediation fence/r reports Succeeded=True (reason PoweredOff)"
	r := Verdict(in)
	if !r.Fenced || r.Reason != string(EvidenceRemediationSucceeded) || !strings.Contains(r.Message(), "Succeeded=True") {
		t.Fatalf("want fenced by the remediation, got %+v", r)
	}
	in.Policy = v1alpha1.FencingSpec{}
	if r := Verdict(in); !r.Fenced {
		t.Errorf("a policy enabling no Machine evidence still takes the remediation's success: %s", r.Message())
	}
	in.Node = node("n1", corev1.ConditionTrue, t0, nil)
	if r := Verdict(in); r.Fenced {
		t.Error("a Ready node is never fenced by a remediation's success")
	}
}
