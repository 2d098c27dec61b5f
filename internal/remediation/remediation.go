// Package remediation decides, purely, what node recovery does about a
// remediation (a fence agent asked through the remediation-template
// convention of NodeHealthCheck and Cluster API external remediation) for
// one loss of one node: request one, wait for it, take its success as
// fencing evidence, or give up. It also stamps remediation objects from
// their template and reads their conditions. It reads and writes nothing.
//
// A remediation's success is evidence like a Machine condition: it is read
// from the remediation object each time (the controller re-reads it live
// before every destructive write), never from fedfailover's record, which
// only says that one was requested (so that no second one is) and when (so
// that the wait is bounded).
package remediation

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// ConditionSucceeded is the remediation's outcome condition, as
// NodeHealthCheck reads it of its remediators (fence-agents-remediation,
// self-node-remediation): True, the node is fenced; False, the remediator
// gave up.
const ConditionSucceeded = "Succeeded"

// Observed is one remediation object as read.
type Observed struct {
	APIVersion, Kind, Namespace, Name string
	UID                               string
	// Created is the object's creationTimestamp (the host API server's
	// clock, in whole seconds).
	Created time.Time
	// Ours: the object's controller owner is this loss's NodeRecovery record.
	Ours bool
	// Tied (another party's object): it is unambiguously about this node of
	// this member, being named after the node's Machine in the host
	// (host-unique, tied to the Node by nodeRef and providerID; never a
	// Machine of a management cluster) or annotated with this member
	// and node. An object named only after the node could be about a node of
	// the same name in another member: its success proves nothing here.
	Tied bool
	// Deleting: the object has a deletionTimestamp.
	Deleting bool
	// Succeeded is the Succeeded condition's status ("" when not reported);
	// Reason and Message are its reason and message.
	Succeeded       metav1.ConditionStatus
	Reason, Message string
}

// Ref is "Kind namespace/name", for messages and status.
func (o Observed) Ref() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Read reads an object's identity and Succeeded condition. recordUID is the
// UID of the loss's NodeRecovery record: a controller owner reference to it
// makes the object ours.
func Read(u *unstructured.Unstructured, recordUID string) Observed {
	o := Observed{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
		UID: string(u.GetUID()), Created: u.GetCreationTimestamp().Time, Deleting: u.GetDeletionTimestamp() != nil}
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil && recordUID != "" && string(ref.UID) == recordUID &&
		ref.Kind == "NodeRecovery" {
		o.Ours = true
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != ConditionSucceeded {
			continue
		}
		s, _ := m["status"].(string)
		o.Succeeded = metav1.ConditionStatus(s)
		o.Reason, _ = m["reason"].(string)
		o.Message, _ = m["message"].(string)
	}
	return o
}

// Action is what the controller does next about the node's remediation.
type Action string

const (
	// None: no remediation is involved.
	None Action = ""
	// Request: create the remediation object from the template (the
	// controller records it, then creates it).
	Request Action = "Request"
	// Adopt: an object for this node exists that the record does not name
	// yet (another party's, or ours whose recording was lost): record it
	// and wait for it; never create a second one.
	Adopt Action = "Adopt"
	// Wait: the remediation runs; nothing destructive is done.
	Wait Action = "Wait"
	// Proven: the remediation reports Succeeded=True for this loss: its
	// success is fencing evidence (Decision.Proof).
	Proven Action = "Proven"
	// Fail: the remediation failed, was removed, or timed out: the recovery
	// is Blocked, for the rest of this loss (Decision.Result says how).
	Fail Action = "Fail"
)

// Input is everything the decision depends on.
type Input struct {
	// Policy is the node recovery policy's remediation; nil: none.
	Policy *v1alpha1.RemediationSpec
	// Recorded is what the loss's record says was requested; nil: nothing.
	Recorded *v1alpha1.RemediationRecord
	// LossSince is when this process first saw the loss (its own clock,
	// the host's, as the external fence mark on a Machine is compared):
	// another party's object created before it may be left from an earlier
	// loss, so its success does not count for this one. Zero (not seen by
	// this process yet, e.g. after a restart): it does not count.
	LossSince time.Time
	// Observed is the recorded object, read now (nil: not found, or another
	// object under its name); without a record, an object found for this
	// node (ours under the record's name, or another party's), if any.
	Observed *Observed
	// Now is fedfailover's clock; the record's requestedAt was read on it.
	Now time.Time
}

// Decision is what to do, and why.
type Decision struct {
	Action Action
	// Message says, for status and events, where the remediation stands.
	Message string
	// Proof describes the success (Action Proven): fencing evidence.
	Proof string
	// Result is the record's new result, when it changes (Proven:
	// Succeeded; Fail: Failed or TimedOut).
	Result v1alpha1.RemediationResult
	// RequeueAfter is when the timeout falls due (Wait).
	RequeueAfter time.Duration
}

// Timeout is the policy's timeout, or the API default for a hand-built
// policy without one.
func Timeout(p *v1alpha1.RemediationSpec) time.Duration {
	if p == nil || p.Timeout.Get() <= 0 {
		return DefaultTimeout
	}
	return p.Timeout.Get()
}

// DefaultTimeout is the API's default for remediation.timeout.
const DefaultTimeout = 5 * time.Minute

// Decide decides about the remediation of one lost node without fencing
// evidence of another kind. The caller has already passed the gates that
// come before any remediation (the node is lost in this pass, the storm
// guard neither suspends nor holds recoveries); pause and dry run are
// applied where the request would be written.
func Decide(in Input) Decision {
	rec, o := in.Recorded, in.Observed
	if in.Policy == nil && rec == nil {
		return Decision{}
	}
	if rec == nil {
		switch {
		case o == nil:
			return Decision{Action: Request, Message: "requesting remediation (" + in.Policy.Template.RemediationKind() +
				" from template " + in.Policy.Template.Namespace + "/" + in.Policy.Template.Name + ")"}
		case o.Ours:
			return Decision{Action: Adopt, Message: "waiting for remediation " + o.Ref() + " (requested by fedfailover)"}
		default:
			return Decision{Action: Adopt, Message: "remediation " + o.Ref() + " was created for this node by another party: " +
				"waiting for it instead of requesting another"}
		}
	}
	ref := fmt.Sprintf("%s %s/%s", rec.Kind, rec.Namespace, rec.Name)
	since := rec.RequestedAt.Time
	switch rec.Result {
	case v1alpha1.RemediationFailed, v1alpha1.RemediationTimedOut:
		return Decision{Action: Fail, Message: fmt.Sprintf("remediation %s %s (%s); nothing destructive is done for this loss "+
			"unless Machine evidence appears", ref, resultVerb(rec.Result), rec.Message)}
	}
	switch {
	case o == nil || (rec.UID != "" && o.UID != rec.UID):
		if rec.Result == v1alpha1.RemediationSucceeded {
			return Decision{Message: "remediation " + ref + " reported success but is gone now: its success is no evidence any more"}
		}
		return Decision{Action: Fail, Result: v1alpha1.RemediationFailed,
			Message: "remediation " + ref + " was deleted before it reported success"}
	case o.Succeeded == metav1.ConditionTrue && !o.Deleting:
		if why := notThisLoss(in, *o); why != "" {
			return waitOrTimeout(in, ref, since, "it reports Succeeded=True, but "+why)
		}
		return Decision{Action: Proven, Result: v1alpha1.RemediationSucceeded, Message: "remediation " + ref + " succeeded",
			Proof: fmt.Sprintf("remediation %s reports %s=True (reason %s)", ref, ConditionSucceeded, o.Reason)}
	case o.Succeeded == metav1.ConditionFalse:
		return Decision{Action: Fail, Result: v1alpha1.RemediationFailed,
			Message: fmt.Sprintf("remediation %s failed: %s=False, reason %s: %s", ref, ConditionSucceeded, o.Reason, o.Message)}
	case o.Deleting:
		return Decision{Action: Fail, Result: v1alpha1.RemediationFailed,
			Message: "remediation " + ref + " is being deleted and has not reported success"}
	}
	return waitOrTimeout(in, ref, since, "")
}

// notThisLoss says why another party's success does not count for this
// loss ("" when it does). Ours is this loss's by construction: it is owned
// by the loss's record and was created after it.
func notThisLoss(in Input, o Observed) string {
	switch {
	case o.Ours:
		return ""
	case !o.Tied:
		return "it is named only after the node, and a node of that name may be in another member: its success is no evidence here"
	case in.LossSince.IsZero() || o.Created.Before(in.LossSince.Truncate(time.Second)):
		return "it was created before fedfailover saw this loss begin (it may be left from an earlier one): its success is no evidence here"
	}
	return ""
}

func waitOrTimeout(in Input, ref string, since time.Time, why string) Decision {
	timeout := Timeout(in.Policy)
	waited := in.Now.Sub(since)
	if waited < 0 {
		waited = 0 // requested by a process whose clock runs ahead: wait the whole timeout
	}
	if waited >= timeout {
		msg := fmt.Sprintf("remediation %s timed out: no success within %s", ref, timeout)
		if why != "" {
			msg += "; " + why
		}
		return Decision{Action: Fail, Result: v1alpha1.RemediationTimedOut, Message: msg}
	}
	msg := fmt.Sprintf("waiting for remediation %s since %s (timeout %s)", ref, since.UTC().Format(time.RFC3339), timeout)
	if why != "" {
		msg += "; " + why
	}
	return Decision{Action: Wait, Message: msg, RequeueAfter: timeout - waited}
}

func resultVerb(r v1alpha1.RemediationResult) string {
	if r == v1alpha1.RemediationTimedOut {
		return "timed out"
	}
	return "failed"
}
