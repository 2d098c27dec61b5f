// Package fenceagent is the lab's own fence agent: a controller for the
// lab's remediation kind (lab.fedfailover.io LabRemediation, stamped from a
// LabRemediationTemplate after the NodeHealthCheck / Cluster API external
// remediation convention). For each remediation it powers off the node its
// annotations name (the lab kills the node's kwok process) after the
// remediation's delay, then reports Succeeded=True; in mode Fail it reports
// Succeeded=False after the delay and leaves the node alone. The lab (or a
// test process) runs it; the CRDs are in crds/.
package fenceagent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// The lab's remediation API.
var (
	GroupVersion   = schema.GroupVersion{Group: "lab.fedfailover.io", Version: "v1alpha1"}
	RemediationGVK = GroupVersion.WithKind("LabRemediation")
	TemplateGVK    = GroupVersion.WithKind("LabRemediationTemplate")
)

// Modes of a remediation (spec.mode).
const (
	ModePowerOff = "PowerOff"
	ModeFail     = "Fail"
)

// Reasons of the Succeeded condition the agent writes.
const (
	ReasonPoweredOff     = "PoweredOff"
	ReasonAgentFailed    = "AgentFailed"
	ReasonPowerOffFailed = "PowerOffFailed"
)

// PowerOffFunc powers off the node of a member, for good (the lab: SIGKILL
// of the node's kwok process).
type PowerOffFunc func(ctx context.Context, cluster, node string) error

// Options configure the agent.
type Options struct {
	// Namespace is where the agent looks for remediations ("" for all).
	Namespace string
	// PowerOff switches a node off.
	PowerOff PowerOffFunc
	// Poll is the period of its passes (default 200ms).
	Poll time.Duration
	// Delay, when set, replaces every remediation's spec.delay.
	Delay *time.Duration
	// Mode, when set, replaces every remediation's spec.mode.
	Mode string
	// ForNode, when set and ok, replaces the delay and mode of the
	// remediations of one node (after Delay and Mode): a campaign plays a
	// different outcome for each node it partitions.
	ForNode func(cluster, node string) (delay time.Duration, mode string, ok bool)
}

// Action is one thing the agent did, with the time it did it (the lab's
// clock): the ground truth a test compares with what fedfailover did.
type Action struct {
	At                    time.Time
	Remediation           string // namespace/name
	Cluster, Node, Result string // Result: PoweredOff, AgentFailed or PowerOffFailed
}

// Agent is the fence agent.
type Agent struct {
	cl      client.Client
	opts    Options
	mu      sync.Mutex
	seen    map[types.UID]time.Time
	actions []Action
}

// New returns an agent working through cl (the host).
func New(cl client.Client, opts Options) *Agent {
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	return &Agent{cl: cl, opts: opts, seen: map[types.UID]time.Time{}}
}

// Run runs passes until ctx ends; a failing pass is retried on the next.
func (a *Agent) Run(ctx context.Context) {
	t := time.NewTicker(a.opts.Poll)
	defer t.Stop()
	for {
		_ = a.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Actions returns what the agent did so far, in order.
func (a *Agent) Actions() []Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.actions)
}

// Step is one pass over the remediations.
func (a *Agent) Step(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GroupVersion.WithKind("LabRemediationList"))
	if err := a.cl.List(ctx, list, client.InNamespace(a.opts.Namespace)); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		if err := a.handle(ctx, &list.Items[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("fence agent: %v", errs)
	}
	return nil
}

func (a *Agent) handle(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetDeletionTimestamp() != nil || finished(u) {
		return nil
	}
	now := time.Now()
	a.mu.Lock()
	first, ok := a.seen[u.GetUID()]
	if !ok {
		first = now
		a.seen[u.GetUID()] = now
	}
	a.mu.Unlock()
	ann := u.GetAnnotations()
	cluster, node := ann[contract.AnnotationRemediationCluster], ann[contract.AnnotationRemediationNode]
	delay, mode := a.settings(u, cluster, node)
	if now.Sub(first) < delay {
		return nil
	}
	act := Action{Remediation: u.GetNamespace() + "/" + u.GetName(), Cluster: cluster, Node: node}
	status, reason, msg := "True", ReasonPoweredOff, fmt.Sprintf("node %s of member %s powered off", node, cluster)
	switch {
	case mode == ModeFail:
		status, reason, msg = "False", ReasonAgentFailed, "the lab's fence agent is set to fail"
	case node == "" || cluster == "":
		status, reason, msg = "False", ReasonPowerOffFailed, "the remediation does not name a member and node"
	default:
		if err := a.opts.PowerOff(ctx, cluster, node); err != nil {
			status, reason, msg = "False", ReasonPowerOffFailed, err.Error()
		}
	}
	act.At, act.Result = time.Now(), reason
	if err := setSucceeded(ctx, a.cl, u, status, reason, msg, act.At); err != nil {
		return err
	}
	a.mu.Lock()
	a.actions = append(a.actions, act)
	a.mu.Unlock()
	return nil
}

// settings are the remediation's delay and mode, unless the agent's
// options override them.
func (a *Agent) settings(u *unstructured.Unstructured, cluster, node string) (time.Duration, string) {
	ds, _, _ := unstructured.NestedString(u.Object, "spec", "delay")
	delay, _ := time.ParseDuration(ds)
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "mode")
	if a.opts.Delay != nil {
		delay = *a.opts.Delay
	}
	if a.opts.Mode != "" {
		mode = a.opts.Mode
	}
	if a.opts.ForNode != nil {
		if d, m, ok := a.opts.ForNode(cluster, node); ok {
			delay, mode = d, m
		}
	}
	return delay, mode
}

// finished: Succeeded is True or False already.
func finished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == "Succeeded" && (m["status"] == "True" || m["status"] == "False")
	})
}

// setSucceeded writes the Succeeded condition (and, on success, when the
// node was powered off) through the status subresource.
func setSucceeded(ctx context.Context, cl client.Client, u *unstructured.Unstructured, status, reason, msg string, at time.Time) error {
	upd := u.DeepCopy()
	cond := map[string]any{"type": "Succeeded", "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": at.UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedSlice(upd.Object, []any{cond}, "status", "conditions"); err != nil {
		return err
	}
	if status == "True" {
		if err := unstructured.SetNestedField(upd.Object, at.UTC().Format(time.RFC3339Nano), "status", "poweredOffAt"); err != nil {
			return err
		}
	}
	if err := cl.Status().Update(ctx, upd); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// Template returns a LabRemediationTemplate in namespace ns: each
// remediation stamped from it waits delay, then acts by mode.
func Template(ns, name string, delay time.Duration, mode string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{
		"spec": map[string]any{"delay": delay.String(), "mode": mode}}}}}
	u.SetGroupVersionKind(TemplateGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
