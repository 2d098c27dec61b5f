package fencing

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// EvidenceKind names one kind of proof that a lost node is off.
type EvidenceKind string

// Kinds of fencing evidence, each enabled by a field of v1alpha1.FencingSpec.
const (
	// EvidenceMachineInfrastructureDeleted: the Machine is being deleted and
	// Cluster API reports its infrastructure gone (fencingSpec.machineInfrastructureDeleted).
	EvidenceMachineInfrastructureDeleted EvidenceKind = "MachineInfrastructureDeleted"
	// EvidenceNodeDeletedInfrastructureGone: the Node object is gone and the
	// Machine reports its infrastructure gone (fencingSpec.machineInfrastructureDeleted).
	EvidenceNodeDeletedInfrastructureGone EvidenceKind = "NodeDeletedInfrastructureGone"
	// EvidenceMachinePoweredOff: a Machine condition named by
	// fencingSpec.poweredOffConditions matches.
	EvidenceMachinePoweredOff EvidenceKind = "MachinePoweredOff"
	// EvidenceExternalFence: fencingSpec.externalFenceAnnotation on the
	// object fencingSpec.externalFenceSource names holds a time at or after
	// the start of the current loss.
	EvidenceExternalFence EvidenceKind = "ExternalFence"
	// EvidenceAssumeFencedAfter: the node has been lost for at least
	// fencingSpec.assumeFencedAfter.
	EvidenceAssumeFencedAfter EvidenceKind = "AssumeFencedAfter"
	// EvidenceRemediationSucceeded: the remediation requested for this loss
	// (nodeRecovery.remediation), or another party's tied to it, reports
	// Succeeded=True (internal/remediation decides which counts).
	EvidenceRemediationSucceeded EvidenceKind = "RemediationSucceeded"
)

// Reasons of a NotFenced result. A Fenced result's reason is the kind of its
// first evidence.
const (
	// ReasonNodeReady: the node is Ready, so it is running; never fenced.
	ReasonNodeReady = "NodeReady"
	// ReasonNoEvidenceEnabled: the policy enables no kind of evidence.
	ReasonNoEvidenceEnabled = "NoEvidenceEnabled"
	// ReasonNoFencingEvidence: evidence is enabled but none was found.
	ReasonNoFencingEvidence = "NoFencingEvidence"
)

// Input is everything the fencing verdict depends on.
type Input struct {
	// Node is the member Node; nil when it has been deleted.
	Node *corev1.Node
	// Machine is the Cluster API Machine of the node; nil when there is none.
	Machine *clusterv1.Machine
	// Policy says which evidence counts.
	Policy v1alpha1.FencingSpec
	// LostSince is when the current loss began (zero when unknown), on the
	// host's clock: Machine-sourced evidence written in the host (the
	// external fence mark on a Machine) is compared with it.
	LostSince time.Time
	// SilentSince is when the node's current Ready=Unknown condition was
	// first seen, on the host's clock: assumeFencedAfter is measured from it
	// (a node that said Ready=False before going silent was running then).
	// Zero: LostSince is used.
	SilentSince time.Time
	// Now is the time of the decision.
	Now time.Time
	// KubeletSilent, when set, says how fedfailover's own readings of the
	// node's kubelet Lease showed it not renewed (LeaseSighting.Silent): a
	// Ready condition is then only the last thing a silent kubelet said, and
	// no longer refuses the verdict. Only positive evidence of the machine's
	// state counts then: assumeFencedAfter, which assumes, does not.
	KubeletSilent string
	// Remediation, when set, describes the success of a remediation of this
	// loss, read from the remediation object in the same pass
	// (remediation.Decide said it counts): evidence like a Machine
	// condition.
	Remediation string
}

// Evidence is one piece of proof found.
type Evidence struct {
	Kind   EvidenceKind
	Detail string
}

// Result is the fencing verdict.
type Result struct {
	// Fenced is true when at least one enabled kind of evidence was found
	// and the node is not Ready.
	Fenced bool
	// Reason is CamelCase: the first evidence kind when fenced, else one of
	// the Reason* constants.
	Reason string
	// Found lists the evidence found, in a fixed order.
	Found []Evidence
	// Missing says, for each enabled kind not found, what would be needed.
	Missing []string
	// AssumeFencedAt is when assumeFencedAfter makes (or made) the node
	// fenced; zero when that evidence is off or the lost-since time is unknown.
	AssumeFencedAt time.Time
}

// Message is a one-line explanation for conditions and events.
func (r Result) Message() string {
	if r.Fenced {
		details := make([]string, 0, len(r.Found))
		for _, e := range r.Found {
			details = append(details, e.Detail)
		}
		return "fenced: " + strings.Join(details, "; ")
	}
	if len(r.Missing) == 0 {
		return "not fenced: " + r.Reason
	}
	return "not fenced: " + strings.Join(r.Missing, "; ")
}

// Verdict decides whether a lost node is proven to be off. Every enabled
// kind of evidence is checked and reported, so the caller can say exactly
// what is missing. Safety rule: a Ready node is never fenced, whatever the
// evidence says (a stale annotation or condition must not release the
// volumes of a running node), unless the caller's own readings of its
// kubelet Lease show the kubelet silent (Input.KubeletSilent): its Ready
// condition is then stale, and positive evidence alone decides.
func Verdict(in Input) Result {
	if nodecond.IsReady(in.Node) && in.KubeletSilent == "" {
		return Result{Reason: ReasonNodeReady, Missing: []string{"node is Ready"}}
	}
	if !anyEvidenceEnabled(in.Policy) && in.Remediation == "" {
		return Result{Reason: ReasonNoEvidenceEnabled, Missing: []string{"the policy enables no fencing evidence"}}
	}
	var r Result
	machine, mismatch := machineOfNode(in.Node, in.Machine)
	if mismatch != "" {
		r.Missing = append(r.Missing, mismatch)
	}
	checkMachineInfrastructure(&r, in.Policy, in.Node, machine)
	checkPoweredOff(&r, in.Policy, machine)
	checkExternalFence(&r, in.Policy, in.Node, machine, in.LostSince, in.Now)
	if in.Remediation != "" {
		r.Found = append(r.Found, Evidence{EvidenceRemediationSucceeded, in.Remediation})
	}
	silent := in.SilentSince
	if silent.IsZero() {
		silent = in.LostSince
	}
	if in.KubeletSilent == "" {
		checkAssumeFencedAfter(&r, in.Policy, in.Node, silent, in.Now)
	} else if in.Policy.AssumeFencedAfter != nil {
		r.Missing = append(r.Missing, "assumeFencedAfter does not count before the node is lost by its Ready condition: "+
			"evidence-first detection needs positive evidence that the machine is off")
	}
	r.Fenced = len(r.Found) > 0
	if r.Fenced {
		r.Reason = string(r.Found[0].Kind)
	} else {
		r.Reason = ReasonNoFencingEvidence
	}
	return r
}

func anyEvidenceEnabled(p v1alpha1.FencingSpec) bool {
	return p.MachineInfrastructureDeleted || len(p.PoweredOffConditions) > 0 ||
		p.ExternalFenceAnnotation != "" || p.AssumeFencedAfter != nil
}

// MachineOfNode is the one rule tying a Machine to a Node: the Machine's
// status.nodeRef names the Node, and its spec.providerID equals the Node's,
// both set. Names are reused (a replacement Machine under the node's name, a
// Node deleted and re-created), so a name alone proves nothing; Cluster API
// itself links a Machine to its Node by providerID, so a linked Machine and
// Node always have one. (v1beta2 nodeRef carries no UID to fall back on.)
// It returns "" when m is node's Machine, else why its evidence is ignored.
// A nil node (deleted) cannot be compared: the caller found m by the
// deleted Node's name.
func MachineOfNode(node *corev1.Node, m *clusterv1.Machine) string {
	if m == nil || node == nil {
		return ""
	}
	name := machineName(m)
	mp, np := m.Spec.ProviderID, node.Spec.ProviderID
	switch ref := m.Status.NodeRef.Name; {
	case ref == "":
		return fmt.Sprintf("Machine %s has no status.nodeRef, so it is not tied to node %s: its evidence is ignored", name, node.Name)
	case ref != node.Name:
		return fmt.Sprintf("Machine %s refers to node %s, not %s: its evidence is ignored", name, ref, node.Name)
	case mp == "" || np == "":
		return fmt.Sprintf("Machine %s has providerID %q, Node %s has %q: without both the Machine cannot be tied to this Node, so its evidence is ignored",
			name, mp, node.Name, np)
	case mp != np:
		return fmt.Sprintf("Machine %s has providerID %s, Node %s has %s: it is another host's Machine, so its evidence is ignored", name, mp, node.Name, np)
	}
	return ""
}

// RecordedMachine is what fedfailover recorded on the host about a node's
// Machine while the Node existed: the Machine's UID and the Node's
// providerID (both may be empty when nothing was recorded).
type RecordedMachine struct {
	UID        string
	ProviderID string
}

// MachineOfDeletedNode is MachineOfNode for a Node that no longer exists:
// the Machine's status.nodeRef must name it (a Machine without one is tied
// to no Node), and when fedfailover recorded the node's Machine while the
// Node existed, the live Machine must be that one (same UID) with the
// recorded providerID. It returns "" when m may speak for the deleted node.
func MachineOfDeletedNode(node string, rec RecordedMachine, m *clusterv1.Machine) string {
	if m == nil {
		return "no Machine"
	}
	name := machineName(m)
	switch ref := m.Status.NodeRef.Name; {
	case ref == "":
		return fmt.Sprintf("Machine %s has no status.nodeRef, so it is not tied to the deleted node %s: its evidence is ignored", name, node)
	case ref != node:
		return fmt.Sprintf("Machine %s refers to node %s, not the deleted node %s: its evidence is ignored", name, ref, node)
	case rec.UID != "" && rec.UID != string(m.UID):
		return fmt.Sprintf("Machine %s has UID %s, but the record of node %s names Machine UID %s: it is another Machine under the same name, so its evidence is ignored",
			name, m.UID, node, rec.UID)
	case rec.ProviderID != "" && rec.ProviderID != m.Spec.ProviderID:
		return fmt.Sprintf("Machine %s has providerID %q, but node %s had %q when its loss was recorded: it is another host's Machine, so its evidence is ignored",
			name, m.Spec.ProviderID, node, rec.ProviderID)
	}
	return ""
}

// machineOfNode is m when it is node's Machine (MachineOfNode), else nil
// and why not.
func machineOfNode(node *corev1.Node, m *clusterv1.Machine) (*clusterv1.Machine, string) {
	if why := MachineOfNode(node, m); why != "" {
		return nil, why
	}
	return m, ""
}

func checkMachineInfrastructure(r *Result, p v1alpha1.FencingSpec, node *corev1.Node, m *clusterv1.Machine) {
	if !p.MachineInfrastructureDeleted {
		return
	}
	if m == nil {
		r.Missing = append(r.Missing, "no Cluster API Machine for the node, so its infrastructure deletion cannot be seen")
		return
	}
	deleting := m.DeletionTimestamp != nil
	gone, how := infrastructureGone(m)
	switch {
	case deleting && gone:
		r.Found = append(r.Found, Evidence{EvidenceMachineInfrastructureDeleted,
			fmt.Sprintf("Machine %s is being deleted and its infrastructure is gone (%s)", machineName(m), how)})
	case deleting:
		r.Missing = append(r.Missing, fmt.Sprintf("Machine %s is being deleted but its infrastructure is not reported gone yet (%s)", machineName(m), how))
	case node != nil:
		r.Missing = append(r.Missing, fmt.Sprintf("Machine %s is not being deleted", machineName(m)))
	}
	if node == nil {
		checkNodeDeleted(r, m, gone, how)
	}
}

// checkNodeDeleted covers a Node deleted while its Machine lives on (e.g. the
// infrastructure was removed out of band): Cluster API then reports
// InfrastructureReady False with reason ObjectDeleted.
func checkNodeDeleted(r *Result, m *clusterv1.Machine, gone bool, how string) {
	if gone {
		r.Found = append(r.Found, Evidence{EvidenceNodeDeletedInfrastructureGone,
			fmt.Sprintf("Node is deleted and Machine %s reports its infrastructure gone (%s)", machineName(m), how)})
		return
	}
	r.Missing = append(r.Missing, fmt.Sprintf("Node is deleted but Machine %s does not report its infrastructure gone (%s)", machineName(m), how))
}

// Deleting reasons that Cluster API sets only after the InfraMachine is gone:
// the deletion workflow runs pre-drain hook, drain, volume detach,
// pre-terminate hook, WaitingForInfrastructureDeletion, then these.
var deletingReasonsAfterInfrastructure = []string{
	clusterv1.MachineDeletingWaitingForBootstrapDeletionReason,
	clusterv1.MachineDeletingDeletingNodeReason,
	clusterv1.MachineDeletingDeletionCompletedReason,
}

// infrastructureGone reads the v1beta2 conditions Cluster API sets when a
// Machine's InfraMachine no longer exists. It also returns a short
// description of what it saw, for messages.
func infrastructureGone(m *clusterv1.Machine) (bool, string) {
	infra := freshCondition(m, clusterv1.MachineInfrastructureReadyCondition)
	if infra != nil && infra.Status == metav1.ConditionFalse &&
		(infra.Reason == clusterv1.MachineInfrastructureDeletedReason ||
			(infra.Reason == clusterv1.MachineInfrastructureDoesNotExistReason && m.DeletionTimestamp != nil)) {
		return true, fmt.Sprintf("%s=False, reason %s", infra.Type, infra.Reason)
	}
	deleting := freshCondition(m, clusterv1.MachineDeletingCondition)
	if deleting != nil && deleting.Status == metav1.ConditionTrue && slices.Contains(deletingReasonsAfterInfrastructure, deleting.Reason) {
		return true, fmt.Sprintf("%s=True, reason %s", deleting.Type, deleting.Reason)
	}
	return false, describeConditions(m, clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineDeletingCondition)
}

// freshCondition returns the condition of that type unless it was observed
// for an older generation of the Machine. Deletion bumps the generation, so
// this discards reports written before the Machine was being deleted. A
// condition without observedGeneration (some providers, the lab) is trusted.
func freshCondition(m *clusterv1.Machine, condType string) *metav1.Condition {
	for i := range m.Status.Conditions {
		c := &m.Status.Conditions[i]
		if c.Type != condType {
			continue
		}
		if c.ObservedGeneration != 0 && c.ObservedGeneration < m.Generation {
			return nil
		}
		return c
	}
	return nil
}

func describeConditions(m *clusterv1.Machine, types ...string) string {
	parts := make([]string, 0, len(types))
	for _, t := range types {
		c := freshCondition(m, t)
		if c == nil {
			parts = append(parts, t+" not reported (or stale)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s, reason %s", t, c.Status, c.Reason))
	}
	return strings.Join(parts, ", ")
}

func checkPoweredOff(r *Result, p v1alpha1.FencingSpec, m *clusterv1.Machine) {
	if len(p.PoweredOffConditions) == 0 {
		return
	}
	if m == nil {
		r.Missing = append(r.Missing, "no Cluster API Machine for the node, so no powered-off condition can be read")
		return
	}
	for _, match := range p.PoweredOffConditions {
		c := freshCondition(m, match.Type)
		if c != nil && c.Status == match.Status && (len(match.Reasons) == 0 || slices.Contains(match.Reasons, c.Reason)) {
			r.Found = append(r.Found, Evidence{EvidenceMachinePoweredOff,
				fmt.Sprintf("Machine %s has condition %s=%s, reason %s", machineName(m), c.Type, c.Status, c.Reason)})
			return
		}
	}
	r.Missing = append(r.Missing, fmt.Sprintf("Machine %s has none of the powered-off conditions %s", machineName(m), describeMatches(p.PoweredOffConditions)))
}

func describeMatches(matches []v1alpha1.MachineConditionMatch) string {
	parts := make([]string, 0, len(matches))
	for _, m := range matches {
		s := fmt.Sprintf("%s=%s", m.Type, m.Status)
		if len(m.Reasons) > 0 {
			s += " (reason " + strings.Join(m.Reasons, "|") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// checkExternalFence reads the fence mark from the one place the policy
// names (externalFenceSource). The mark is the RFC 3339 time the agent fenced
// the node and counts only for the current loss: at or after its start as
// measured on the same clock (the host's lost-since for a Machine, the
// Node's own Ready transition for a Node), and not in the future: for a
// Machine not after now, for a Node not after the member's newest record
// of the Node (NewestMemberTime, the member's clock). "true" could be left
// from any earlier incident, so it never counts.
func checkExternalFence(r *Result, p v1alpha1.FencingSpec, node *corev1.Node, m *clusterv1.Machine, lostSince, now time.Time) {
	key := p.ExternalFenceAnnotation
	if key == "" {
		return
	}
	src := fenceSource(p.ExternalFenceSource, node, m, lostSince)
	at, why := fenceMark(key, src, now)
	if why != "" {
		msg := fmt.Sprintf("annotation %s on %s: %s", key, src.where, why)
		if !src.hostClock || node == nil || node.Annotations[key] == "" {
			r.Missing = append(r.Missing, msg)
			return
		}
		r.Missing = append(r.Missing, msg+fmt.Sprintf("; the Node's own %s is ignored: externalFenceSource is Machine "+
			"(anyone with nodes/patch in the member can write a Node annotation)", key))
		return
	}
	r.Found = append(r.Found, Evidence{EvidenceExternalFence, fmt.Sprintf("%s has annotation %s=%s, at or after %s (%s)",
		src.where, key, at.UTC().Format(time.RFC3339), src.sinceWhat, src.since.UTC().Format(time.RFC3339))})
}

// markSource is where the fence mark is read and what it is compared with.
type markSource struct {
	where, sinceWhat string
	annotations      map[string]string
	since            time.Time
	hostClock        bool // since (and the mark) are on the host's clock, as Now is
	// upper bounds the mark on the member's clock (hostClock false): the
	// member's newest record of the Node; upperWhat names it.
	upper     time.Time
	upperWhat string
}

// fenceSource picks the one object the policy trusts for the mark: the
// Machine unless the policy opts in to the Node.
func fenceSource(src v1alpha1.ExternalFenceSource, node *corev1.Node, m *clusterv1.Machine, lostSince time.Time) markSource {
	if src == v1alpha1.ExternalFenceSourceNode {
		s := markSource{where: "the Node", sinceWhat: "the Node's Ready transition", since: NotReadySince(node),
			upper: NewestMemberTime(node), upperWhat: "the member's newest record of the Node (its last write, " +
				"Ready heartbeat or transition, on the member's clock)"}
		if node != nil {
			s.annotations = node.Annotations
		}
		return s
	}
	s := markSource{where: "the node's Machine (none found)", sinceWhat: "the start of the loss", since: lostSince, hostClock: true}
	if m != nil {
		s.where, s.annotations = "Machine "+machineName(m), m.Annotations
	}
	return s
}

// markSlack is how much later than the member's newest record of the Node
// a Node mark may be dated: the agent's and the API server's clocks within
// one cluster, and the API server's whole seconds.
const markSlack = 2 * time.Second

// fenceMark parses the fence mark key on src and says why it does not count
// for the loss that began at src.since; "" when it does. The mark is
// bounded on its own clock: by now on the host's, by src.upper (the
// member's newest record of the Node) on the member's.
func fenceMark(key string, src markSource, now time.Time) (time.Time, string) {
	since := src.since
	v, ok := src.annotations[key]
	if !ok {
		return time.Time{}, "no such annotation (a fencing agent sets it to the RFC 3339 time it fenced the node)"
	}
	at, err := time.Parse(time.RFC3339, v)
	switch {
	case err != nil:
		return time.Time{}, fmt.Sprintf("value %q is not an RFC 3339 time: the mark needs the time the node was fenced, "+
			"since a mark without one may be left from an earlier incident", v)
	case since.IsZero():
		return time.Time{}, "the start of the current loss is unknown, so the mark cannot be shown to belong to it"
	case at.Before(since):
		return time.Time{}, fmt.Sprintf("fenced at %s, before the current loss began (%s): a mark from an earlier incident",
			at.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	case src.hostClock && at.After(now):
		return time.Time{}, fmt.Sprintf("fenced at %s, which is in the future", at.UTC().Format(time.RFC3339))
	case !src.hostClock && at.After(src.upper.Add(markSlack)):
		return time.Time{}, fmt.Sprintf("fenced at %s, later than %s (%s): a mark dated in the future is ignored, "+
			"it would count for every later loss", at.UTC().Format(time.RFC3339), src.upperWhat, src.upper.UTC().Format(time.RFC3339))
	}
	return at, ""
}

// checkAssumeFencedAfter needs a known lost-since time and a positive
// duration; an unparsable duration (zero) never assumes anything. It counts
// only for a node that stopped reporting (Ready=Unknown): Ready=False is
// its kubelet saying it is alive and unhealthy, which no timeout turns into
// "off".
func checkAssumeFencedAfter(r *Result, p v1alpha1.FencingSpec, node *corev1.Node, lostSince, now time.Time) {
	if p.AssumeFencedAfter == nil {
		return
	}
	after := p.AssumeFencedAfter.Get()
	ready := nodecond.Ready(node)
	switch {
	case ready != nil && ready.Status == corev1.ConditionFalse:
		r.Missing = append(r.Missing, "assumeFencedAfter counts only for a node that stopped reporting (Ready=Unknown); "+
			"this node's kubelet reports Ready=False, so it is running")
	case after <= 0:
		r.Missing = append(r.Missing, fmt.Sprintf("assumeFencedAfter %q is not a positive duration", string(*p.AssumeFencedAfter)))
	case lostSince.IsZero():
		r.Missing = append(r.Missing, "the time the node was lost is unknown, so assumeFencedAfter cannot elapse")
	default:
		r.AssumeFencedAt = lostSince.Add(after)
		if now.Before(r.AssumeFencedAt) {
			r.Missing = append(r.Missing, fmt.Sprintf("assumeFencedAfter %s elapses at %s", after, r.AssumeFencedAt.UTC().Format(time.RFC3339)))
			return
		}
		r.Found = append(r.Found, Evidence{EvidenceAssumeFencedAfter,
			fmt.Sprintf("node lost since %s, longer than assumeFencedAfter %s", lostSince.UTC().Format(time.RFC3339), after)})
	}
}

func machineName(m *clusterv1.Machine) string {
	return m.Namespace + "/" + m.Name
}
