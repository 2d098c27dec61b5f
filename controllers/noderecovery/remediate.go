package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/policystatus"
	"github.com/fedfailover/fedfailover/internal/remediation"
)

// Remediation through templates (nodeRecovery.remediation): for a node lost
// without fencing evidence, one remediation object per loss, stamped from
// the policy's template and owned by the loss's record, asks a fence agent
// to fence it; its Succeeded=True condition is then fencing evidence, read
// from the object in the pass that acts and again, live, right before the
// taint (confirmFenced). What to do is internal/remediation's decision;
// this file reads the objects and writes them.

// Event reasons of remediation.
const (
	ReasonRemediationRequested = "RemediationRequested"
	ReasonRemediationAdopted   = "RemediationAdopted"
	ReasonRemediationFailed    = "RemediationFailed"
	ReasonWouldRemediate       = "DryRunWouldRemediate"
	transitionDryRunRemediate  = "DryRunRemediate"
	// remediationRecheck bounds the wait when a remediation cannot be
	// requested (template missing, kind not served or not allowed).
	remediationRecheck = 15 * time.Second
)

// remediationView is what a pass read of a node's remediation object.
type remediationView struct {
	// observed is the recorded object or, without one recorded, an object
	// found for this node (nil: none).
	observed *remediation.Observed
	// err says why it could not be read ("" when it was).
	err string
}

// remediationPolicy is the governing policy's remediation (nil: none).
func remediationPolicy(v *memberView) *v1alpha1.RemediationSpec {
	if v.policy == nil || v.policy.Spec.NodeRecovery == nil {
		return nil
	}
	return v.policy.Spec.NodeRecovery.Remediation
}

// readRemediations reads, for every node whose active record names a
// remediation, that object from the host's API server: one GET per node
// being remediated, never one per lost node (a storm opens a record for
// each). Another party's object for a node is looked for only when a
// remediation is about to be requested (remediate).
func (r *Reconciler) readRemediations(ctx context.Context, v *memberView) {
	v.remediations = map[string]remediationView{}
	for _, n := range v.nodes {
		rec := v.records[n.Name]
		if rec == nil || rec.Spec.NodeUID != string(n.UID) || rec.Status.Remediation == nil {
			continue
		}
		v.remediations[n.Name] = r.findRemediation(ctx, v, n, rec)
	}
}

// findRemediation reads the remediation the record names or, when it names
// none, looks for one for this node under the policy's kind and namespace:
// ours under the record's name (created by a pass whose recording failed),
// another party's under the name of the node's Machine when the host holds
// it (Cluster API's convention) or of the node (NodeHealthCheck's). An
// object whose annotations name another member or node is not about this
// one.
func (r *Reconciler) findRemediation(ctx context.Context, v *memberView, n *corev1.Node, rec *v1alpha1.NodeRecovery) remediationView {
	if rr := rec.Status.Remediation; rr != nil {
		u, err := r.getRemediation(ctx, rr.APIVersion, rr.Kind, rr.Namespace, rr.Name)
		switch {
		case apierrors.IsNotFound(err):
			return remediationView{}
		case err != nil:
			return remediationView{err: describeRemediationError(rr.Kind, err)}
		}
		o := r.observe(u, v, n, rec)
		return remediationView{observed: &o}
	}
	pol := remediationPolicy(v)
	if pol == nil {
		return remediationView{}
	}
	kind, ns := pol.Template.RemediationKind(), pol.Template.Namespace
	names := []string{rec.Name}
	if m := hostMachine(v, n); m != nil && m.Namespace == ns {
		names = append(names, m.Name)
	}
	names = append(names, n.Name)
	for _, name := range slices.Compact(names) {
		u, err := r.getRemediation(ctx, pol.Template.APIVersion, kind, ns, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return remediationView{err: describeRemediationError(kind, err)}
		}
		if _, ok := u.GetAnnotations()[contract.AnnotationRemediationCluster]; ok && !remediation.AboutNode(u, v.cluster, n.Name) {
			continue // fedfailover's, about a node of this name in another member
		}
		o := r.observe(u, v, n, rec)
		return remediationView{observed: &o}
	}
	return remediationView{}
}

// observe reads u's state; it is tied to the node when it is ours, names
// this member and node, or is named after the node's Machine in the host.
func (r *Reconciler) observe(u *unstructured.Unstructured, v *memberView, n *corev1.Node, rec *v1alpha1.NodeRecovery) remediation.Observed {
	o := remediation.Read(u, string(rec.UID))
	m := hostMachine(v, n)
	o.Tied = o.Ours || remediation.AboutNode(u, v.cluster, n.Name) ||
		(m != nil && m.Namespace == u.GetNamespace() && m.Name == u.GetName())
	return o
}

// hostMachine is the node's Machine (tied to it by nodeRef and providerID)
// when the host holds it; nil otherwise. Remediation objects live in the
// host: a Machine read from the member's management cluster has its
// namespace and name in another API server, where a host object of the
// same names is not about it, so neither a name match nor the
// failover.fedfailover.io/machine annotation uses it.
func hostMachine(v *memberView, n *corev1.Node) *clusterv1.Machine {
	m := v.machines[n.Name]
	if m == nil || v.machineClients.Management != "" || fencing.MachineOfNode(n, m) != "" {
		return nil
	}
	return m
}

func (r *Reconciler) getRemediation(ctx context.Context, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// describeRemediationError says what an installation lacks when the
// remediation kind cannot be read.
func describeRemediationError(kind string, err error) string {
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Sprintf("the host serves no %s (is its remediator installed?): %v", kind, err)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("fedfailover may not read %s: enable the kind in the installation (chart value nodeRecovery.remediation.kinds): %v", kind, err)
	}
	return fmt.Sprintf("reading %s: %v", kind, err)
}

// remediationDecision is the remediation's decision for the node (pure).
func remediationDecision(in planInput) remediation.Decision {
	ri := remediation.Input{Now: in.Now, Observed: in.Remediation.observed, LossSince: in.Sighting.lossAt}
	if in.Policy != nil {
		ri.Policy = in.Policy.Remediation
	}
	if in.Record != nil {
		ri.Recorded = in.Record.Status.Remediation
	}
	if ri.Policy == nil && ri.Recorded == nil {
		return remediation.Decision{}
	}
	return remediation.Decide(ri)
}

// remediationProof is the remediation's success as fencing evidence, ""
// when there is none for this loss.
func remediationProof(in planInput) string {
	if in.Remediation.observed == nil {
		return ""
	}
	return remediationDecision(in).Proof
}

// decideRemediation continues decide for a node lost without fencing
// evidence whose policy names a remediation template, or whose record names
// a remediation (pure). It reports false when no remediation is involved.
func decideRemediation(in planInput, p *plan) bool {
	if in.Record == nil || in.Record.Status.Remediation == nil {
		if in.Policy == nil || in.Policy.Remediation == nil || p.Loss.By != v1alpha1.NodeLossDetectionNotReady {
			return false // remediation is for nodes lost without evidence
		}
	}
	if why := in.Remediation.err; why != "" {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, "remediation: "+why+"; "+p.Verdict.Message()
		p.RequeueAfter = remediationRecheck
		return true
	}
	rd := remediationDecision(in)
	p.Remediation = rd
	switch rd.Action {
	case remediation.Request, remediation.Adopt:
		p.Phase, p.Step, p.Message = v1alpha1.RecoveryPhaseRemediating, stepRemediate, rd.Message
	case remediation.Wait:
		p.Phase, p.Message = v1alpha1.RecoveryPhaseRemediating, rd.Message+"; nothing destructive is done until it reports success"
		if p.RequeueAfter == 0 || rd.RequeueAfter < p.RequeueAfter {
			p.RequeueAfter = rd.RequeueAfter
		}
	case remediation.Fail:
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, rd.Message+"; "+p.Verdict.Message()
	default:
		if rd.Message == "" {
			return false
		}
		p.Message = rd.Message + "; " + p.Verdict.Message()
	}
	return true
}

// remediate requests the node's remediation, or records the one found for
// it, after the live check that this replica holds the member and that the
// Node is the same and still not Ready (a member that cannot be reached
// fails it: no remediation is requested then). Pause and dry run were
// applied before (apply).
func (r *Reconciler) remediate(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	rec, pol := p.record, remediationPolicy(v)
	if rec == nil || pol == nil {
		return 0, fmt.Errorf("no NodeRecovery record or remediation policy for node %s", n.Name)
	}
	kind := pol.Template.RemediationKind()
	if err := r.confirmStillLost(ctx, v, n); err != nil {
		var np *errNotProvenLive
		if errors.As(err, &np) {
			p.Phase, p.Message = v1alpha1.RecoveryPhaseLost, "no remediation requested: "+np.why
			return forceDeleteRecheck, nil
		}
		return 0, err
	}
	// Look again, live: another party may have created one since the pass
	// read, or a pass whose recording failed created ours.
	found := r.findRemediation(ctx, v, n, rec)
	if found.err != "" {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, "remediation: "+found.err
		return remediationRecheck, nil
	}
	if o := found.observed; o != nil {
		return remediation.Timeout(pol), r.adoptRemediation(ctx, v, n, p, *o, pol)
	}
	if p.Remediation.Action == remediation.Adopt {
		return time.Second, nil // the object seen is gone: decide again
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(pol.Template.APIVersion)
	tmpl.SetKind(pol.Template.Kind)
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: pol.Template.Namespace, Name: pol.Template.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || apierrors.IsForbidden(err) {
			p.Phase = v1alpha1.RecoveryPhaseBlocked
			p.Message = fmt.Sprintf("remediation template %s %s/%s cannot be read, so no remediation is requested: %v",
				pol.Template.Kind, pol.Template.Namespace, pol.Template.Name, err)
			return remediationRecheck, nil
		}
		return 0, fmt.Errorf("reading remediation template: %w", err)
	}
	target := remediation.Target{Cluster: v.cluster, Node: n.Name, NodeUID: string(n.UID), ProviderID: n.Spec.ProviderID}
	if m := hostMachine(v, n); m != nil {
		target.Machine = m.Namespace + "/" + m.Name
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeRecovery", Name: rec.Name, UID: rec.UID}
	obj, err := remediation.Stamp(tmpl, rec.Name, target, owner)
	if err != nil {
		p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, "no remediation requested: "+err.Error()
		return remediationRecheck, nil //nolint:nilerr // a template that cannot be stamped is the node's state, not a failed pass
	}
	if err := r.host.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return time.Second, nil // the next pass finds and records it
		}
		if meta.IsNoMatchError(err) || apierrors.IsForbidden(err) {
			p.Phase, p.Message = v1alpha1.RecoveryPhaseBlocked, "no remediation requested: "+describeRemediationError(kind, err)
			return remediationRecheck, nil
		}
		return 0, fmt.Errorf("creating remediation %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	now := r.now()
	if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Remediation = &v1alpha1.RemediationRecord{APIVersion: obj.GetAPIVersion(), Kind: kind, Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: string(obj.GetUID()), RequestedAt: metav1.NewTime(now)}
	}); err != nil {
		return 0, fmt.Errorf("recording the remediation: %w", err)
	}
	ref := fmt.Sprintf("%s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	metrics.NodeRemediations.WithLabelValues(v.cluster, metrics.RemediationRequested).Inc()
	r.report(ctx, v, n, corev1.EventTypeNormal, ReasonRemediationRequested, "Remediate",
		fmt.Sprintf("requested remediation %s (template %s/%s) for a node lost without fencing evidence; %s",
			ref, pol.Template.Namespace, pol.Template.Name, p.Verdict.Message()))
	p.Phase = v1alpha1.RecoveryPhaseRemediating
	p.Message = fmt.Sprintf("waiting for remediation %s since %s (timeout %s); nothing destructive is done until it reports success",
		ref, now.UTC().Format(time.RFC3339), remediation.Timeout(pol))
	return remediation.Timeout(pol), nil
}

// wouldRemediate reports, once per loss, what a policy in dry run would
// request: nothing is written.
func (r *Reconciler) wouldRemediate(ctx context.Context, v *memberView, n *corev1.Node, p *plan) {
	p.Message = "dry run: nothing written; " + p.Message
	pol := remediationPolicy(v)
	if pol == nil || !r.store.changed(v.cluster, n.Name, transitionDryRunRemediate) {
		return
	}
	metrics.NodeRemediations.WithLabelValues(v.cluster, metrics.RemediationDryRun).Inc()
	r.report(ctx, v, n, corev1.EventTypeNormal, ReasonWouldRemediate, "Remediate",
		fmt.Sprintf("dry run: would request a %s from template %s/%s for a node lost without fencing evidence",
			pol.Template.RemediationKind(), pol.Template.Namespace, pol.Template.Name))
}

// adoptRemediation records an object found for the node as the loss's
// remediation: never a second one for the same node.
func (r *Reconciler) adoptRemediation(ctx context.Context, v *memberView, n *corev1.Node, p *plan, o remediation.Observed, pol *v1alpha1.RemediationSpec) error {
	now := r.now()
	if err := r.updateRecord(ctx, p.record, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Remediation = &v1alpha1.RemediationRecord{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			UID: o.UID, Foreign: !o.Ours, RequestedAt: metav1.NewTime(now)}
	}); err != nil {
		return fmt.Errorf("recording the remediation: %w", err)
	}
	who := "requested by fedfailover"
	if !o.Ours {
		who = "created by another party"
		metrics.NodeRemediations.WithLabelValues(v.cluster, metrics.RemediationAdopted).Inc()
		r.report(ctx, v, n, corev1.EventTypeNormal, ReasonRemediationAdopted, "Remediate",
			fmt.Sprintf("remediation %s was created for this node by another party: waiting for it instead of requesting another", o.Ref()))
	}
	p.Phase = v1alpha1.RecoveryPhaseRemediating
	p.Message = fmt.Sprintf("waiting for remediation %s (%s) since %s (timeout %s); nothing destructive is done until it reports success",
		o.Ref(), who, now.UTC().Format(time.RFC3339), remediation.Timeout(pol))
	return nil
}

// liveRemediationProof re-reads the loss's remediation right before a
// destructive write: its success counts only as read now.
func (r *Reconciler) liveRemediationProof(ctx context.Context, v *memberView, live *corev1.Node, p *plan) string {
	rec := p.record
	if rec == nil || live == nil || rec.Status.Remediation == nil {
		return "" // only a recorded remediation can be this loss's proof
	}
	view := r.findRemediation(ctx, v, live, rec)
	if view.observed == nil {
		return ""
	}
	in := planInput{Record: rec, Remediation: view, Sighting: p.sighting, Now: r.now()}
	if v.policy != nil {
		in.Policy = v.policy.Spec.NodeRecovery
	}
	return remediationProof(in)
}

// recordRemediationResult writes, once, how the loss's remediation ended
// (the result is shown, and a failure or timeout is final for the loss),
// and counts it.
func recordRemediationResult(cluster string, st *v1alpha1.NodeRecoveryRecordStatus, d remediation.Decision, now time.Time) {
	rr := st.Remediation
	if rr == nil || d.Result == "" || rr.Result != "" {
		return
	}
	rr.Result, rr.Message, rr.FinishedAt = d.Result, policystatus.Truncate(d.Message, 1024), metaTimePtr(now)
	metrics.NodeRemediations.WithLabelValues(cluster, map[v1alpha1.RemediationResult]string{
		v1alpha1.RemediationSucceeded: metrics.RemediationSucceeded, v1alpha1.RemediationFailed: metrics.RemediationFailed,
		v1alpha1.RemediationTimedOut: metrics.RemediationTimedOut}[d.Result]).Inc()
}

// deleteRemediation deletes the loss's remediation object when it is
// fedfailover's (another party's is its owner's to delete): the node is
// back, or the loss is otherwise over.
func (r *Reconciler) deleteRemediation(ctx context.Context, rec *v1alpha1.NodeRecovery) (string, error) {
	rr := rec.Status.Remediation
	if rr == nil || rr.Foreign || rr.UID == "" {
		return "", nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(rr.APIVersion, rr.Kind))
	u.SetNamespace(rr.Namespace)
	u.SetName(rr.Name)
	uid := types.UID(rr.UID)
	err := r.host.Delete(ctx, u, client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		return fmt.Sprintf("; remediation %s %s/%s deleted", rr.Kind, rr.Namespace, rr.Name), nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), meta.IsNoMatchError(err):
		return "", nil // gone, or another object under its name
	}
	return "", fmt.Errorf("deleting remediation %s %s/%s: %w", rr.Kind, rr.Namespace, rr.Name, err)
}

// remediationMembers maps a remediation object to the member it names, or
// to every member (another party's object).
func (r *Reconciler) remediationMembers(ctx context.Context, o client.Object) []reconcile.Request {
	if c := o.GetAnnotations()[contract.AnnotationRemediationCluster]; c != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: c}}}
	}
	return r.allMembers(ctx, o)
}

// watchRemediations adds a watch on each remediation kind the installation
// enables and the host serves, so that a remediation's result brings the
// next pass at once.
func (r *Reconciler) watchRemediations(mgr ctrl.Manager, kinds []schema.GroupVersionKind) []schema.GroupVersionKind {
	var served []schema.GroupVersionKind
	for _, gvk := range kinds {
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			ctrl.Log.WithName("noderecovery").Info("Remediation kind not served by the host; not watched", "kind", gvk.String(), "reason", err.Error())
			continue
		}
		served = append(served, gvk)
	}
	return served
}
