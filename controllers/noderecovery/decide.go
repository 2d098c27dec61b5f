package noderecovery

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/internal/remediation"
)

// decideNode decides for one node of the view on the pass's clock reading:
// pure, like everything in this file; acting on the plan is act.go's.
func decideNode(v *memberView, n *corev1.Node, now time.Time, machineDeletionEnabled bool) (planInput, plan) {
	in := nodeInput(v, n, now)
	in.MachineOwner, in.MachineDeletionEnabled = v.machineOwners[n.Name], machineDeletionEnabled
	in.ServerMajor, in.ServerMinor, in.Suspended, in.Hold = v.major, v.minor, v.suspended, v.hold
	return in, decide(in)
}

// nodeInput is what decides whether the node is lost: the storm guard
// (storm.go) and the node's own decision read it alike.
func nodeInput(v *memberView, n *corev1.Node, now time.Time) planInput {
	in := planInput{Node: n, Record: v.records[n.Name], Sighting: v.sightings[n.Name],
		Machine: v.machines[n.Name], Lease: v.leases[n.Name], Remediation: v.remediations[n.Name],
		MachinesUnavailable: v.machinesUnavailable, Now: now}
	if v.policy != nil && v.nodeScope.Matches(labels.Set(n.Labels)) {
		// A node outside nodeSelector is treated as if no policy covered it:
		// nothing new is started; a recovery already acted on is tracked.
		in.Policy = v.policy.Spec.NodeRecovery
	}
	return in
}

// wantLease says whether the pass reads the node's kubelet Lease: only for
// a node whose Machine carries positive evidence that it is off
// (fencing.EvidenceOfOff), under a policy with evidence-first detection
// that covers the node, or whose active record that detection opened (kept
// until the Lease is read renewed, see decide). lease is what this process
// read of it before.
func wantLease(v *memberView, n *corev1.Node, lease fencing.LeaseSighting, now time.Time) bool {
	if rec := v.records[n.Name]; rec != nil && rec.Spec.NodeUID == string(n.UID) && rec.Status.Detection == v1alpha1.NodeLossDetectionEvidence {
		return true
	}
	if v.policy == nil || !evidenceFirst(v.policy.Spec.NodeRecovery) || !v.nodeScope.Matches(labels.Set(n.Labels)) || v.machines[n.Name] == nil {
		return false
	}
	return fencing.EvidenceOfOff(fencing.Input{Node: n, Machine: v.machines[n.Name], Policy: v.policy.Spec.NodeRecovery.Fencing,
		LostSince: evidenceSince(v.sightings[n.Name], lease), Now: now}).Fenced
}

// evidenceFirst: the policy finds nodes lost by evidence too (the default).
func evidenceFirst(p *v1alpha1.NodeRecoverySpec) bool {
	return p != nil && p.Detection != v1alpha1.NodeLossDetectionNotReady
}

// evidenceSince is the start of the loss, on this process's clock, that a
// dated fence mark on the Machine must not precede: when the node was first
// seen not Ready, else the first reading of its Lease's current version
// (the kubelet's last renewal was before it).
func evidenceSince(s sighting, l fencing.LeaseSighting) time.Time {
	if !s.lossAt.IsZero() {
		return s.lossAt
	}
	return l.FirstAt
}

// loss is how a node is lost in this pass, if it is.
type loss struct {
	// By is the detection that found it lost; empty when it is not lost.
	By v1alpha1.NodeLossDetection
	// At is when this process first saw the loss (host clock): the first
	// not-Ready sighting, or the first reading of the silent Lease version.
	At time.Time
	// Message says what made the node lost, for records and events.
	Message string
	// silence is the Lease's verdict (By Evidence).
	silence fencing.Silence
	// Why (not lost) says what is awaited, and Wait how long until the node
	// may be lost (0: nothing time-based is due).
	Why  string
	Wait time.Duration
}

// lossOf decides whether the node is lost, purely: by its Ready condition,
// not True for notReadyFor since this process first saw it; or, with
// evidence-first detection, by positive evidence that its machine is off
// together with its kubelet Lease read unchanged over the silence window
// (fencing.LeaseSighting.Silent). The storm guard counts exactly these.
func lossOf(in planInput) loss {
	var l loss
	if in.Policy == nil {
		return l
	}
	if s := in.Sighting; !s.lossAt.IsZero() {
		lostAt := s.lossAt.Add(in.Policy.NotReadyFor.Get())
		if !in.Now.Before(lostAt) {
			return loss{By: v1alpha1.NodeLossDetectionNotReady, At: s.lossAt,
				Message: fmt.Sprintf("lost: not Ready for %s as seen by fedfailover", in.Now.Sub(s.lossAt).Round(time.Second))}
		}
		l.Why, l.Wait = "not Ready; waiting for notReadyFor", lostAt.Sub(in.Now)
	}
	if !evidenceFirst(in.Policy) || in.Lease.FirstAt.IsZero() || nodecond.Ready(in.Node) == nil {
		return l // a node that never reported Ready has no loss to record (openRecord needs the condition)
	}
	sil := in.Lease.silence()
	if !sil.Silent {
		if sil.Remaining > 0 && (l.Wait == 0 || sil.Remaining < l.Wait) {
			l.Wait = sil.Remaining
		}
		if l.Why == "" {
			l.Why = "fencing evidence, but " + sil.Why
		}
		return l
	}
	ev := fencing.Verdict(evidenceInput(in, sil))
	if !ev.Fenced {
		return l
	}
	details := make([]string, 0, len(ev.Found))
	for _, e := range ev.Found {
		details = append(details, e.Detail)
	}
	return loss{By: v1alpha1.NodeLossDetectionEvidence, At: in.Lease.FirstAt, silence: sil,
		Message: "lost by evidence: " + strings.Join(details, "; ") + ", " + sil.Describe()}
}

// evidenceInput is the fencing verdict's input for a node whose kubelet is
// silent by sil.
func evidenceInput(in planInput, sil fencing.Silence) fencing.Input {
	return fencing.Input{Node: in.Node, Machine: in.Machine, Policy: in.Policy.Fencing,
		LostSince: evidenceSince(in.Sighting, in.Lease.LeaseSighting), SilentSince: in.Sighting.condAt, Now: in.Now,
		KubeletSilent: sil.Describe()}
}

// verdictOf is the node's fencing verdict for the loss l. When the
// member's management cluster gave no Machines, a verdict without evidence
// says so first: the missing Machine is unknown, not absent.
func verdictOf(in planInput, l loss) fencing.Result {
	res := fencing.Verdict(verdictInput(in, l))
	if !res.Fenced && in.MachinesUnavailable != "" && res.Reason == fencing.ReasonNoFencingEvidence {
		res.Missing = append([]string{in.MachinesUnavailable}, res.Missing...)
	}
	return res
}

// verdictInput is the fencing verdict's input for a node lost by l: a
// remediation's success for this loss counts as evidence too.
func verdictInput(in planInput, l loss) fencing.Input {
	if l.By == v1alpha1.NodeLossDetectionEvidence {
		fi := evidenceInput(in, l.silence)
		fi.Remediation = remediationProof(in)
		return fi
	}
	return fencing.Input{Node: in.Node, Machine: in.Machine, Policy: in.Policy.Fencing,
		LostSince: in.Sighting.lossAt, SilentSince: in.Sighting.condAt, Now: in.Now, Remediation: remediationProof(in)}
}

// step is the one thing the reconciler does next for a node.
type step string

const (
	stepNone step = ""
	// stepTaint records the intent, applies the out-of-service taint, then
	// records the action.
	stepTaint step = "Taint"
	// stepForceDelete deletes the node's in-scope pods, then (ForceDelete
	// method only) its VolumeAttachments; repeated until nothing is left.
	stepForceDelete step = "ForceDelete"
	// stepDeleteMachine asks Cluster API to delete the Machine, to obtain
	// fencing through infrastructure deletion.
	stepDeleteMachine step = "DeleteMachine"
	// stepCleanup removes our taint from a node that is Ready again (or ran
	// again since the loss) once that is safe, and closes the record.
	stepCleanup step = "Cleanup"
	// stepTrack only watches the replacements of a node already acted on.
	stepTrack step = "Track"
	// stepRemediate requests the node's remediation from the policy's
	// template, or records the one another party created for it.
	stepRemediate step = "Remediate"
)

// planInput is everything the per-node decision depends on.
type planInput struct {
	Node *corev1.Node
	// Record is the node's active NodeRecovery (same Node UID); nil when none.
	Record *v1alpha1.NodeRecovery
	// Sighting is when fedfailover first saw the loss and the current Ready
	// condition (host clock); zero for a Ready node.
	Sighting sighting
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
	// MachineDeletionEnabled: the installation grants Machine deletion.
	MachineDeletionEnabled bool
	// Lease is this process's readings of the node's kubelet Lease (zero
	// when it is not read: see wantLease).
	Lease leaseView
	// Remediation is the node's remediation object as read this pass.
	Remediation remediationView
	// MachinesUnavailable says why the member's management cluster gave no
	// Machines this pass (empty when it did, or when there is none).
	MachinesUnavailable string
	Now                 time.Time
}

// plan is the decision for one node.
type plan struct {
	// Phase is empty when the node needs no reporting.
	Phase   v1alpha1.RecoveryPhase
	Step    step
	Method  v1alpha1.RecoveryMethod
	Verdict fencing.Result
	// LostSince is when fedfailover first saw the loss (host clock).
	LostSince time.Time
	Rec       recorded
	// Finish is the record's finish reason for stepCleanup.
	Finish   string
	Message  string
	sighting sighting
	// Loss is how the node is lost in this pass (lossOf); By is empty when
	// it is not.
	Loss loss
	// LostTaint: before its first force deletion the node gets fedfailover's
	// NoSchedule taint (lostTaintOf), recorded with the intent; decided for
	// ForceDelete on a node lost by evidence (see decide).
	LostTaint bool
	// taintLeft, set by cleanup, says why fedfailover's taint stays.
	taintLeft string
	// podsNext, set by act, says the node was tainted in this pass and its
	// pods are force-deleted once every node of the pass has its taint.
	podsNext bool
	// record is the node's NodeRecovery, written by apply (nil: none yet).
	record *v1alpha1.NodeRecovery
	// RequeueAfter is when a time-based transition is due (0: none).
	RequeueAfter time.Duration
	// Remediation is the remediation's decision, when one is involved.
	Remediation remediation.Decision
}

// decide is the pure per-node state machine of node recovery.
func decide(in planInput) plan {
	p := plan{Rec: recordedOf(in.Record), sighting: in.Sighting, Loss: lossOf(in)}
	evidence := p.Loss.By == v1alpha1.NodeLossDetectionEvidence
	if nodecond.IsReady(in.Node) && !evidence {
		if in.Record == nil {
			p.RequeueAfter = p.Loss.Wait // evidence waiting for the Lease's silence
			return p
		}
		if staleReady(in) {
			return decideStaleReady(in, p)
		}
		p.Step, p.Finish, p.Message = stepCleanup, v1alpha1.FinishNodeReturned, "node is Ready again"
		if kubeletSeenAlive(in.Lease) {
			p.Message = "node is Ready and fedfailover read its kubelet Lease renewed: it runs"
		}
		return p
	}
	if in.Record != nil && !continuesRecord(in.Record, in.Node) {
		// The node ran again since the record was written (seen or not): that
		// loss is over, and so is any proof about it. Close it; the next pass
		// decides afresh.
		p.Step, p.Finish = stepCleanup, v1alpha1.FinishKubeletBack
		p.Message = "the node's Ready condition changed in a way only a running kubelet causes: it ran again since this loss was recorded"
		return p
	}
	if p.Rec.Acted() {
		return decideActed(in, p)
	}
	if in.Policy == nil && in.Record != nil {
		p.Step, p.Finish = stepCleanup, v1alpha1.FinishNoPolicy
		p.Message = "no policy recovers this node any more; nothing was done"
		return p
	}
	if in.Policy == nil || (in.Sighting.lossAt.IsZero() && p.Loss.By == "") {
		p.RequeueAfter = p.Loss.Wait // the Lease's silence window, when evidence waits for it
		return p
	}
	if phase, why, wait := destructiveHold(in, p.Loss); phase != "" {
		p.RequeueAfter = wait
		if phase == v1alpha1.RecoveryPhaseLost && in.Record == nil {
			return p // nothing to report before notReadyFor
		}
		if phase != v1alpha1.RecoveryPhaseLost {
			p.LostSince = p.Loss.At
		}
		p.Phase, p.Message = phase, why
		if evidence {
			p.Message = p.Loss.Message + "; " + why
		}
		return p
	}
	p.LostSince = p.Loss.At
	p.Verdict = verdictOf(in, p.Loss)
	if !p.Verdict.Fenced {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, p.Verdict.Message()
		if at := p.Verdict.AssumeFencedAt; !at.IsZero() && in.Now.Before(at) {
			p.RequeueAfter = at.Sub(in.Now)
		}
		if decideRemediation(in, &p) {
			return p
		}
		switch {
		case !in.Policy.Fencing.RequestMachineDeletion || in.Machine == nil:
		case in.MachineOwner != "":
			p.Message += "; Machine deletion not requested (" + in.MachineOwner + ")"
		case !in.MachineDeletionEnabled:
			p.Message += "; Machine deletion is not enabled in this installation (--enable-machine-deletion)"
		case canRequestMachineDeletion(in):
			p.Step = stepDeleteMachine
		}
		return p
	}
	p.Phase, p.Message = v1alpha1.RecoveryPhaseFenced, p.Verdict.Message()
	if rd := remediationDecision(in); rd.Action == remediation.Proven {
		p.Remediation = rd // recorded as the remediation's result
	}
	if evidence {
		p.Message = p.Loss.Message // names the same evidence as the verdict
	}
	p.Method = fencing.ChooseMethod(in.Policy.Method, in.ServerMajor, in.ServerMinor)
	switch p.Method {
	case "":
		p.Phase = v1alpha1.RecoveryPhaseSuspended
		p.Message = "the member API server's version is unknown, so method Auto cannot choose between OutOfServiceTaint and ForceDelete: " +
			"nothing is done until it is known (or set the method explicitly); " + p.Verdict.Message()
	case v1alpha1.RecoveryMethodOutOfServiceTaint:
		p.Step = stepTaint // NoExecute: the scheduler keeps away from the node too
	default:
		p.Step = stepForceDelete
		// A node lost by evidence may still report Ready=True, so no node
		// lifecycle taint keeps the member's scheduler away from it yet: a
		// replacement bound back onto it would be force-deleted again every
		// pass until the node is marked not Ready. Lost by its Ready
		// condition, the lifecycle controller's NoSchedule taint does it.
		p.LostTaint = evidence
	}
	return p
}

// decideActed continues a recovery whose intent is recorded. The record
// says what was done; it never authorizes more: every further destructive
// write needs a fencing verdict computed now.
func decideActed(in planInput, p plan) plan {
	p.Method, p.LostSince = p.Rec.Action, p.Rec.LossAt
	p.Phase, p.Step = v1alpha1.RecoveryPhaseRecovering, stepTrack
	p.Message = fmt.Sprintf("%s applied (fenced by %s); waiting for replacements", p.Rec.Action, p.Rec.FencedBy)
	switch {
	case !p.Rec.Recovered.IsZero():
		p.Phase, p.Message = v1alpha1.RecoveryPhaseRecovered, "replacements run elsewhere; waiting for the node to be deleted or Ready again"
	case in.Policy == nil:
		// Without a policy the pod scope is unknown: nothing is deleted.
	default:
		// A record says what was decided, never that it may go on: every
		// further write passes the same gates as the first.
		if phase, why, wait := destructiveHold(in, p.Loss); phase != "" {
			p.Message += "; nothing more is written now: " + why
			p.RequeueAfter = wait
			return p
		}
		p.Verdict = verdictOf(in, p.Loss)
		if !p.Verdict.Fenced {
			p.Phase = v1alpha1.RecoveryPhaseBlocked
			p.Message = fmt.Sprintf("the record says %s was decided, but there is no fencing evidence now, so nothing more is done: %s",
				p.Rec.Action, p.Verdict.Message())
			return p
		}
		if p.Rec.ActedAt.IsZero() {
			// The intent is recorded but not the action (a restart in
			// between): do it again; both methods are idempotent.
			p.Phase, p.Step = v1alpha1.RecoveryPhaseActing, stepTaint
			if p.Method == v1alpha1.RecoveryMethodForceDelete {
				p.Step = stepForceDelete
			}
			// What the intent decided about the NoSchedule taint holds,
			// however the node is lost now.
			p.LostTaint = p.Rec.OwnsLostTaint
			return p
		}
		// Both methods force-delete the in-scope pods of the fenced node: with
		// the taint this is what pod GC does, but only every 20 s.
		p.Step = stepForceDelete
	}
	return p
}

// destructiveHold is the one rule that gates every destructive write for a
// node, whether a record says one was decided or not: the node must be lost
// in this pass by this process's own sightings (lossOf: notReadyFor since it
// first saw the loss, or evidence with a kubelet Lease it read unchanged over
// the silence window; never a time read back from a record: another
// process's clock), and the member's storm guard must neither suspend nor
// hold recoveries. It returns the phase and why a write must wait (empty
// phase: it need not), and when the node may become lost. Dry run and pause
// are the policy's switches, applied where writes are made (act.go).
func destructiveHold(in planInput, l loss) (phase v1alpha1.RecoveryPhase, why string, wait time.Duration) {
	if l.By == "" {
		if l.Why == "" {
			return v1alpha1.RecoveryPhaseLost, "not Ready; no loss seen by this process yet", l.Wait
		}
		return v1alpha1.RecoveryPhaseLost, l.Why, l.Wait
	}
	if in.Suspended {
		return v1alpha1.RecoveryPhaseSuspended, "recovery suspended in this member: too many nodes lost at once (storm)", 0
	}
	if in.Hold != "" {
		return v1alpha1.RecoveryPhaseSuspended, in.Hold, 0
	}
	return "", "", 0
}

// continuesRecord: the record is about this Node (same UID) and this loss
// (nodecond.SameLoss against the Ready condition last recorded). A loss
// found by evidence while the node still reported Ready continues while that
// same Ready=True condition stays (the kubelet is silent: nobody rewrites
// it) and when the node lifecycle controller turns it Unknown; False, or a
// new True, is a running kubelet.
func continuesRecord(rec *v1alpha1.NodeRecovery, n *corev1.Node) bool {
	if rec.Spec.NodeUID != string(n.UID) || rec.Status.ReadySince == nil {
		return false
	}
	prev, since, cur := corev1.ConditionStatus(rec.Status.ReadyStatus), rec.Status.ReadySince.Time, nodecond.Ready(n)
	if prev == corev1.ConditionTrue {
		return cur != nil && (cur.Status == corev1.ConditionUnknown ||
			(cur.Status == corev1.ConditionTrue && cur.LastTransitionTime.Time.Equal(since)))
	}
	return nodecond.SameLoss(prev, since, cur)
}

// staleReady: the node reports Ready, but its active record was opened by
// evidence-first detection while it reported this very Ready condition, and
// this process has not read its kubelet Lease renewed since: the condition
// may be the last one a kubelet now silent wrote (after a restart, the
// silence is measured again from the first reading). Such a record is kept,
// and nothing is written, until the Lease is read renewed (the node runs:
// clean up), silent again (lost: continue) or the condition changes.
func staleReady(in planInput) bool {
	rec := in.Record
	if rec.Status.Detection != v1alpha1.NodeLossDetectionEvidence || !continuesRecord(rec, in.Node) {
		return false
	}
	return !kubeletSeenAlive(in.Lease)
}

// kubeletSeenAlive: this process read the node's Lease renewed, and the
// version it reads now is not silent yet, so it was written after any loss
// found by evidence (that loss's version had been read silent, and a version
// once silent stays so until it changes).
func kubeletSeenAlive(l leaseView) bool {
	return l.err == "" && l.First.NotTheNodes == "" && !l.RenewedAt.IsZero() && !l.silence().Silent
}

// decideStaleReady keeps a record whose node reports a Ready condition that
// may be stale (staleReady): no write, not even the clean-up.
func decideStaleReady(in planInput, p plan) plan {
	p.Method, p.LostSince = p.Rec.Action, p.Rec.LossAt
	p.Phase = v1alpha1.RecoveryPhaseLost
	switch {
	case !p.Rec.Recovered.IsZero():
		p.Phase = v1alpha1.RecoveryPhaseRecovered
	case p.Rec.Acted():
		p.Phase, p.Step = v1alpha1.RecoveryPhaseRecovering, stepTrack
	}
	why := in.Lease.silence().Why
	if why == "" {
		why = "no positive evidence now"
	}
	p.Message = "the node reports the Ready condition it had when it was found lost by evidence, and fedfailover has not read its kubelet Lease renewed since: " +
		"nothing is written until it does (the node runs) or the node is lost again; " + why
	p.RequeueAfter = p.Loss.Wait // the new silence window
	if p.RequeueAfter <= 0 {
		p.RequeueAfter = staleReadyRecheck // the Lease could not be read
	}
	return p
}

// staleReadyRecheck bounds the wait for a Lease that could not be read.
const staleReadyRecheck = 5 * time.Second

// canRequestMachineDeletion: only the Machine of this node (nodeRef and
// providerID, fencing.MachineOfNode), not being deleted already, and not
// remediated by someone else.
func canRequestMachineDeletion(in planInput) bool {
	m := in.Machine
	return in.Policy.Fencing.RequestMachineDeletion && m != nil && m.DeletionTimestamp == nil &&
		in.MachineOwner == "" && fencing.MachineOfNode(in.Node, m) == ""
}

// recorded is what a node's NodeRecovery record says was done, read once per
// pass. It says what was done; it never authorizes a new destructive write.
type recorded struct {
	// Action is the method of the recorded intent; empty before any.
	Action    v1alpha1.RecoveryMethod
	FencedBy  string
	IntentAt  time.Time
	ActedAt   time.Time
	Recovered time.Time
	// LossAt is when fedfailover first saw the loss (host clock).
	LossAt time.Time
	Claims []string
	// OwnsTaint is true only when fedfailover itself added the node's
	// out-of-service taint: the intent was the taint method, no such taint was
	// there before, and the record is fedfailover's own (not migrated).
	OwnsTaint bool
	// LostTaint is what the intent decided about fedfailover's NoSchedule
	// taint; OwnsLostTaint is true when fedfailover adds it and may remove
	// it (the exact taint valued with UID, the record's).
	LostTaint     v1alpha1.LostTaintOwnership
	OwnsLostTaint bool
	UID           types.UID
	Migrated      bool
}

// Acted is true once an intent was recorded: the action may have happened.
func (m recorded) Acted() bool { return m.Action != "" }

func recordedOf(rec *v1alpha1.NodeRecovery) recorded {
	if rec == nil {
		return recorded{}
	}
	st := rec.Status
	m := recorded{Action: st.Method, FencedBy: st.Evidence, Claims: st.Claims, Migrated: st.Migrated,
		IntentAt: timeOf(st.IntentAt), ActedAt: timeOf(st.ActedAt), Recovered: timeOf(st.RecoveredAt), LossAt: timeOf(st.ObservedAt)}
	if st.IntentAt == nil {
		m.Action = ""
	}
	m.OwnsTaint = m.Action == v1alpha1.RecoveryMethodOutOfServiceTaint && !st.TaintPreexisting && !st.Migrated
	m.UID = rec.UID
	if m.Action != "" {
		m.LostTaint = st.LostTaint
	}
	m.OwnsLostTaint = m.LostTaint == v1alpha1.LostTaintOwned && !st.Migrated
	return m
}
