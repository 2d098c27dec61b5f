// Package chaos is the fault campaign: it draws random fault schedules
// (schedule.go), injects them into the lab with the real manager binary
// running (runner.go), and checks invariants against the lab's ground truth
// and the API servers' audit logs, never against fedfailover's own state
// (truth.go, audit.go, invariants.go).
package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// Kind is one kind of fault.
type Kind string

// The fault kinds. Each is undone after its hold, and every fault still in
// place is undone when the run's fault window ends.
const (
	// PowerOff kills a node's kwok and leaves the run's evidence on its
	// Machine, at once (Detection DetectEvidence: fedfailover finds the
	// loss by the evidence and the silent kubelet Lease) or EvidenceAfter
	// later (DetectNotReady: by then fedfailover found it lost by its Ready
	// condition, unfenced); it is powered on again after the hold.
	PowerOff Kind = "power-off"
	// Replace powers a node off with its Machine deleted, then replaces it
	// by a fresh Node of the same name after the hold.
	Replace Kind = "replace"
	// Partition freezes a node's kwok (alive, unreachable) until healed.
	// Once it is lost, fedfailover requests a remediation; the lab's fence
	// agent plays the fault's Remediation outcome (powered off after the
	// hold, the node is powered on instead of healed).
	Partition Kind = "partition"
	// APIKill kills a member's API server and restarts it after the hold.
	APIKill Kind = "api-kill"
	// EtcdStop stops a member's etcd and starts it after the hold.
	EtcdStop Kind = "etcd-stop"
	// ManagerKill kill -9s fedfailover and restarts it after the hold.
	ManagerKill Kind = "manager-kill"
	// ManagerKillMidAction waits (up to the hold) until a node recovery is
	// in progress or an RSP is shifted, then kill -9s fedfailover there.
	ManagerKillMidAction Kind = "manager-kill-mid-action"
	// MemberCut cuts only fedfailover off a member (kubefed keeps it).
	MemberCut Kind = "fedfailover-cut"
	// CredentialRotation writes a new token into a member's Secret.
	CredentialRotation Kind = "credential-rotation"
	// Capacity exhausts a member's capacity until relieved.
	Capacity Kind = "capacity"
	// PolicyEdit changes a policy (Edit) and reverts it after the hold.
	PolicyEdit Kind = "policy-edit"
	// ForgedMarks writes fedfailover's old recovery annotations onto a Node.
	ForgedMarks Kind = "forged-marks"
	// RebalanceState loses or garbles fedfailover's rebalance state of the
	// live RSP (Mode: stateModes) while it may be shifted.
	RebalanceState Kind = "rebalance-state"
	// PodFinalizer puts a foreign finalizer on the pods of a node (as a
	// backup agent or a service mesh would) and takes it off after the
	// hold: a loss of that node meanwhile leaves pods that deleting alone
	// does not remove.
	PodFinalizer Kind = "pod-finalizer"
	// EvidenceAlive writes a power-off's evidence on a node's Machine while
	// its kwok keeps running and renewing its Lease (a Machine deleted by
	// mistake, a provider reporting a running machine off); the evidence
	// is cleared after the hold. Nothing may ever be done to the node.
	EvidenceAlive Kind = "evidence-alive"
)

// Kinds lists every kind in the order tables print them.
var Kinds = []Kind{PowerOff, Replace, Partition, APIKill, EtcdStop, ManagerKill, ManagerKillMidAction,
	MemberCut, CredentialRotation, Capacity, PolicyEdit, ForgedMarks, RebalanceState, PodFinalizer, EvidenceAlive}

// Evidence kinds a power-off leaves (lab.Evidence values); the last is no
// evidence at all, which EvidenceAlive never draws.
var evidences = []string{"machine-deleted", "powered-off-condition", "none"}

// How a power-off with evidence is to be found lost (Fault.Detection).
const (
	// DetectEvidence: the evidence is written with the power-off.
	DetectEvidence = "evidence"
	// DetectNotReady: the evidence is written EvidenceAfter the power-off.
	DetectNotReady = "not-ready"
)

var detections = []string{DetectEvidence, DetectNotReady}

// lateEvidence is when a DetectNotReady power-off gets its evidence: after
// the lab's member marks the node NotReady (16-21 s after its kubelet's
// last renewal) and the live policy's notReadyFor (10 s) has passed, with
// some seconds to spare for the passes, so fedfailover has found the node
// lost by its Ready condition, and blocked it for want of evidence, before
// the evidence comes.
const lateEvidence = 40 * time.Second

// What the lab's fence agent does with a partitioned node's remediation
// (Fault.Remediation).
const (
	// RemediatePowerOff powers the node off after remediationDelay and
	// reports success: fedfailover recovers it, fenced.
	RemediatePowerOff = "power-off"
	// RemediateFail reports failure after remediationDelay and leaves the
	// node alone: fedfailover blocks, nothing destructive.
	RemediateFail = "fail"
	// RemediateSlow powers the node off only after slowRemediationDelay,
	// past the policy's timeout: fedfailover has given up by then.
	RemediateSlow = "slow"
)

var remediations = []string{RemediatePowerOff, RemediateFail, RemediateSlow}

// Policy edits.
const (
	EditDryRun   = "dry-run"
	EditPause    = "pause"
	EditDelete   = "delete"
	EditSelector = "selector"
	// EditDeleteForeground deletes the policy with foreground cascading
	// (what GitOps tools prune with): the garbage collector deletes what it
	// owns before the policy goes.
	EditDeleteForeground = "delete-foreground"
)

var edits = []string{EditDryRun, EditPause, EditDelete, EditSelector, EditDeleteForeground}

// Rebalance state faults.
const (
	// StateRecordDeleted deletes the RSP's RebalanceRecord.
	StateRecordDeleted = "record-deleted"
	// StateAnnotationGarbage writes garbage into the legacy state
	// annotation on the RSP.
	StateAnnotationGarbage = "annotation-garbage"
)

var stateModes = []string{StateRecordDeleted, StateAnnotationGarbage}

// capacityModes are lab.ExhaustCordon and lab.ExhaustFill.
var capacityModes = []string{"cordon", "fill"}

// Fault is one scheduled fault.
type Fault struct {
	Kind Kind `json:"kind"`
	// At is when it starts, from the start of the fault window.
	At time.Duration `json:"at"`
	// Hold is how long it stays before it is undone.
	Hold     time.Duration `json:"hold"`
	Cluster  string        `json:"cluster,omitempty"`
	Node     string        `json:"node,omitempty"`
	Evidence string        `json:"evidence,omitempty"`
	// Detection (a power-off with evidence) is DetectEvidence or
	// DetectNotReady; EvidenceAfter is when the latter's evidence is
	// written, from the power-off (a hold that ends first writes none).
	Detection     string        `json:"detection,omitempty"`
	EvidenceAfter time.Duration `json:"evidenceAfter,omitempty"`
	Edit          string        `json:"edit,omitempty"`
	// Mode is how capacity is exhausted (lab.ExhaustCordon or ExhaustFill)
	// or how rebalance state is lost (stateModes).
	Mode string `json:"mode,omitempty"`
	// Remediation is what the fence agent does with a partitioned node's
	// remediation (remediations).
	Remediation string `json:"remediation,omitempty"`
}

func (f Fault) String() string {
	return fmt.Sprintf("+%4.0fs %s for %.0fs", f.At.Seconds(), f.Target(), f.Hold.Seconds())
}

// Target is the fault's kind, target and options.
func (f Fault) Target() string {
	s := fmt.Sprintf("%-24s", f.Kind)
	switch {
	case f.Node != "":
		s += " " + f.Node
	case f.Cluster != "":
		s += " " + f.Cluster
	}
	if f.Evidence != "" {
		s += " evidence=" + f.Evidence
	}
	if f.Detection != "" {
		s += " detection=" + f.Detection
	}
	if f.EvidenceAfter > 0 {
		s += fmt.Sprintf(" after=%.0fs", f.EvidenceAfter.Seconds())
	}
	if f.Edit != "" {
		s += " edit=" + f.Edit
	}
	if f.Mode != "" {
		s += " mode=" + f.Mode
	}
	if f.Remediation != "" {
		s += " remediation=" + f.Remediation
	}
	return s
}

// Variant names how a node loss or an evidence fault tests detection, for
// the report: a power-off's evidence and detection ("power-off
// machine-deleted evidence-first", "power-off none"), evidence on a living
// node, a partition's remediation outcome; "" for other kinds.
func (f Fault) Variant() string {
	switch f.Kind {
	case PowerOff:
		switch f.Detection {
		case DetectEvidence:
			return "power-off " + f.Evidence + " evidence-first"
		case DetectNotReady:
			return "power-off " + f.Evidence + " not-ready-first"
		}
		return "power-off " + f.Evidence
	case EvidenceAlive:
		return "evidence-alive " + f.Evidence
	case Partition:
		if f.Remediation != "" {
			return "partition remediation " + f.Remediation
		}
	}
	return ""
}

// Topology is what a schedule can target.
type Topology struct {
	// Nodes are each member's kwok nodes, by member name.
	Nodes map[string][]string
}

func (t Topology) members() []string {
	var ms []string
	for m := range t.Nodes {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// Params shape a schedule.
type Params struct {
	// Window is the fault window; faults start inside it.
	Window time.Duration
	// Faults is how many faults to draw.
	Faults int
	// MinHold and MaxHold bound each fault's hold.
	MinHold, MaxHold time.Duration
	// LossMaxHold bounds the hold of a node loss (power-off, replace,
	// partition) instead of MaxHold; zero means MaxHold. fedfailover acts on a loss
	// only after the member's node-monitor grace and the policy's
	// notReadyFor: a loss that never outlasts them checks only that it
	// does nothing.
	LossMaxHold time.Duration
}

// hold maps one uniform draw u in [0, MaxHold-MinHold] to a fault's hold:
// node losses spread over [MinHold, LossMaxHold], the others over
// [MinHold, MaxHold]. One draw for every kind keeps a seed's random
// sequence the same whatever LossMaxHold is (a longer loss may still keep
// a later fault off the same node).
func (p Params) hold(k Kind, u time.Duration) time.Duration {
	if !k.loss() || p.LossMaxHold <= p.MaxHold || p.MaxHold == p.MinHold {
		return p.MinHold + u
	}
	scale := float64(p.LossMaxHold-p.MinHold) / float64(p.MaxHold-p.MinHold)
	return p.MinHold + time.Duration(float64(u)*scale)
}

// loss: a node loss, which fedfailover acts on only after the member's
// grace and notReadyFor (a partition: then it requests a remediation), so
// its hold spreads up to LossMaxHold.
func (k Kind) loss() bool { return k == PowerOff || k == Replace || k == Partition }

// Draw returns the schedule of one run: the same seed and inputs give the
// same schedule, so a seed replays a run. Faults overlap freely except that
// a target (a node, a member's control plane, the manager, a policy) has one
// fault at a time: two faults on one target would undo each other.
func Draw(seed uint64, top Topology, p Params) []Fault {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	members := top.members()
	busyUntil := map[string]time.Duration{} // target → end of its fault
	var out []Fault
	for tries := 0; len(out) < p.Faults && tries < p.Faults*20; tries++ {
		f := Fault{Kind: Kinds[r.IntN(len(Kinds))], At: time.Duration(r.Int64N(int64(p.Window)))}
		f.Hold = p.hold(f.Kind, time.Duration(r.Int64N(int64(p.MaxHold-p.MinHold)+1)))
		member := members[r.IntN(len(members))]
		nodes := top.Nodes[member]
		var target string
		switch f.Kind {
		case PowerOff, Replace, Partition, ForgedMarks, EvidenceAlive:
			f.Cluster, f.Node = member, nodes[r.IntN(len(nodes))]
			target = "node/" + f.Node
			switch f.Kind {
			case PowerOff:
				f.Evidence = evidences[r.IntN(len(evidences))]
				if f.Evidence != string(lab.EvidenceNone) {
					f.Detection = detections[r.IntN(len(detections))]
				}
				if f.Detection == DetectNotReady {
					f.EvidenceAfter = lateEvidence
				}
			case EvidenceAlive:
				f.Evidence = evidences[r.IntN(len(evidences)-1)]
			case Partition:
				f.Remediation = remediations[r.IntN(len(remediations))]
			}
		case APIKill, EtcdStop:
			f.Cluster, target = member, "control-plane/"+member
		case MemberCut:
			f.Cluster, target = member, "cut/"+member
		case CredentialRotation:
			f.Cluster, target = member, "credential/"+member
		case Capacity:
			f.Cluster, target = member, "capacity/"+member
			f.Mode = capacityModes[r.IntN(len(capacityModes))]
		case ManagerKill, ManagerKillMidAction:
			target = "manager"
		case PolicyEdit:
			f.Edit, target = edits[r.IntN(len(edits))], "policy"
		case RebalanceState:
			f.Mode, target = stateModes[r.IntN(len(stateModes))], "rebalance-state"
		case PodFinalizer:
			// Its own target (one per member: its undo clears the member),
			// so it overlaps a loss of the same node on purpose.
			f.Cluster, f.Node = member, nodes[r.IntN(len(nodes))]
			target = "finalizer/" + member
		}
		if f.At < busyUntil[target] {
			continue
		}
		busyUntil[target] = f.At + f.Hold
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out
}
