package noderecovery

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// step is the one thing the reconciler does next for a node.
type step string

const (
	stepNone step = ""
	// stepTaint applies the out-of-service taint with the action marks.
	stepTaint step = "Taint"
	// stepForceDelete deletes the node's in-scope pods, then (ForceDelete
	// method only) its VolumeAttachments; repeated until nothing is left.
	stepForceDelete step = "ForceDelete"
	// stepDeleteMachine asks Cluster API to delete the Machine, to obtain
	// fencing through infrastructure deletion.
	stepDeleteMachine step = "DeleteMachine"
	// stepCleanup removes our taint and marks from a node that is Ready again.
	stepCleanup step = "Cleanup"
	// stepTrack only watches the replacements of a node already acted on.
	stepTrack step = "Track"
)

// planInput is everything the per-node decision depends on.
type planInput struct {
	Node *corev1.Node
	// Policy is the member's node recovery policy; nil when off.
	Policy  *v1alpha1.NodeRecoverySpec
	Machine *clusterv1.Machine
	// MachineOwner names whoever already remediates the Machine (a
	// MachineHealthCheck, an external remediation); empty when none.
	MachineOwner string
	// ServerMajor and ServerMinor are the member API server's version.
	ServerMajor, ServerMinor int
	// Suspended is true during a storm (or its cooldown).
	Suspended bool
	// Hold, when set, says why no new recovery may start yet: more nodes
	// are not Ready than maxUnhealthy allows, though fewer are lost. Nodes
	// of one failure rarely turn NotReady in the same second; without the
	// hold the first to pass notReadyFor would be acted on alone.
	Hold string
	Now  time.Time
}

// plan is the decision for one node.
type plan struct {
	// Phase is empty when the node needs no reporting.
	Phase     v1alpha1.RecoveryPhase
	Step      step
	Method    v1alpha1.RecoveryMethod
	Verdict   fencing.Result
	LostSince time.Time
	Marks     contract.NodeMarks
	Message   string
	// RequeueAfter is when a time-based transition is due (0: none).
	RequeueAfter time.Duration
}

// decide is the pure per-node state machine of node recovery.
func decide(in planInput) plan {
	p := plan{Marks: readMarks(in.Node)}
	if nodecond.IsReady(in.Node) {
		if contract.HasNodeMarks(in.Node.Annotations) {
			p.Step, p.Message = stepCleanup, "node is Ready again"
		}
		return p
	}
	if p.Marks.Acted() {
		if staleMarks(in.Node, p.Marks) {
			// The node went NotReady again after the recorded action, so it was
			// back in between (seen while we were down): that fence proves
			// nothing about this loss. Drop it; the next pass decides afresh.
			p.Step, p.Message = stepCleanup, "recovery marks are from an earlier loss of this node"
			return p
		}
		return decideActed(in, p)
	}
	if in.Policy == nil {
		return p
	}
	lost, since := fencing.Lost(in.Node, in.Policy.NotReadyFor.Get(), in.Now)
	if !lost {
		if !since.IsZero() {
			p.RequeueAfter = since.Add(in.Policy.NotReadyFor.Get()).Sub(in.Now)
		}
		return p
	}
	p.LostSince = since
	if in.Suspended {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseSuspended, "recovery suspended in this member: too many nodes lost at once (storm)"
		return p
	}
	if in.Hold != "" {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseSuspended, in.Hold
		return p
	}
	p.Verdict = fencing.Verdict(fencing.Input{Node: in.Node, Machine: in.Machine, Policy: in.Policy.Fencing, LostSince: since, Now: in.Now})
	if !p.Verdict.Fenced {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, p.Verdict.Message()
		if at := p.Verdict.AssumeFencedAt; !at.IsZero() && in.Now.Before(at) {
			p.RequeueAfter = at.Sub(in.Now)
		}
		switch {
		case !in.Policy.Fencing.RequestMachineDeletion || in.Machine == nil:
		case in.MachineOwner != "":
			p.Message += "; Machine deletion not requested (" + in.MachineOwner + ")"
		case canRequestMachineDeletion(in):
			p.Step = stepDeleteMachine
		}
		return p
	}
	p.Phase, p.Message = v1alpha1.RecoveryPhaseFenced, p.Verdict.Message()
	p.Method = fencing.ChooseMethod(in.Policy.Method, in.ServerMajor, in.ServerMinor)
	switch p.Method {
	case "":
		p.Phase = v1alpha1.RecoveryPhaseSuspended
		p.Message = "the member API server's version is unknown, so method Auto cannot choose between OutOfServiceTaint and ForceDelete: " +
			"nothing is done until it is known (or set the method explicitly); " + p.Verdict.Message()
	case v1alpha1.RecoveryMethodOutOfServiceTaint:
		p.Step = stepTaint
	default:
		p.Step = stepForceDelete
	}
	return p
}

// decideActed continues a recovery whose action is already recorded on the
// node. The marks say what was done; they never authorize more: anyone with
// nodes/patch can write them, and they may be left from an earlier incident.
// Every further force deletion needs a fencing verdict computed now.
func decideActed(in planInput, p plan) plan {
	p.Method, p.LostSince = p.Marks.Action, p.Marks.LostSince
	p.Phase, p.Step = v1alpha1.RecoveryPhaseRecovering, stepTrack
	p.Message = fmt.Sprintf("%s applied (fenced by %s); waiting for replacements", p.Marks.Action, p.Marks.FencedBy)
	switch {
	case !p.Marks.RecoveredAt.IsZero():
		p.Phase, p.Message = v1alpha1.RecoveryPhaseRecovered, "replacements run elsewhere; waiting for the node to be deleted or Ready again"
	case in.Suspended:
		p.Message += "; further force deletion suspended (storm)"
	case in.Policy != nil:
		p.Verdict = fencing.Verdict(fencing.Input{Node: in.Node, Machine: in.Machine, Policy: in.Policy.Fencing,
			LostSince: fencing.NotReadySince(in.Node), Now: in.Now})
		if !p.Verdict.Fenced {
			p.Phase = v1alpha1.RecoveryPhaseBlocked
			p.Message = fmt.Sprintf("the node's marks record %s, but there is no fencing evidence now, so nothing more is deleted: %s",
				p.Marks.Action, p.Verdict.Message())
			return p
		}
		// Both methods force-delete the in-scope pods of the fenced node: with
		// the taint this is what pod GC does, but only every 20 s. Without a
		// policy the pod scope is unknown: deleting nothing is safe.
		p.Step = stepForceDelete
	}
	return p
}

// staleMarks is true when the node's current NotReady spell began after the
// recorded action: a fenced node cannot change its Ready condition, so it
// must have come back in between. Condition times have second precision.
func staleMarks(n *corev1.Node, m contract.NodeMarks) bool {
	since := fencing.NotReadySince(n)
	return !m.FencedAt.IsZero() && !since.IsZero() && since.After(m.FencedAt.Add(time.Second))
}

// canRequestMachineDeletion: only a Machine of this node, not being deleted
// already, and not remediated by someone else.
func canRequestMachineDeletion(in planInput) bool {
	m := in.Machine
	return in.Policy.Fencing.RequestMachineDeletion && m != nil && m.DeletionTimestamp == nil &&
		in.MachineOwner == "" && (m.Status.NodeRef.Name == "" || m.Status.NodeRef.Name == in.Node.Name)
}
