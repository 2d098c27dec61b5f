package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// Explanation says why a node was or was not recovered.
type Explanation struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	// Policy is the FailoverPolicy whose node recovery covers the member.
	Policy string `json:"policy,omitempty"`
	// Verdict is a one-line answer; Detail says more.
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
	// Recovery is the node's entry in the policy's status.recoveries.
	Recovery *v1alpha1.NodeRecoveryStatus `json:"recovery,omitempty"`
	// Records are the node's NodeRecovery records: active first, then the
	// finished ones, newest first.
	Records []RecordView `json:"records,omitempty"`
	Storm   StormView    `json:"stormGuard"`
	Machine *MachineView `json:"machine,omitempty"`
	// Fencing is the fencing verdict computed now from the host's Machine,
	// for a node that is (assumed) not Ready.
	Fencing   *FencingView  `json:"fencing,omitempty"`
	Decisions []DecisionRow `json:"decisions,omitempty"`
	Notes     []string      `json:"notes,omitempty"`
}

// RecordView is one NodeRecovery record of the node.
type RecordView struct {
	Name   string                            `json:"name"`
	Active bool                              `json:"active"`
	Spec   v1alpha1.NodeRecoveryRecordSpec   `json:"spec"`
	Status v1alpha1.NodeRecoveryRecordStatus `json:"status"`
}

// StormView is the member's storm guard: its state from the member's
// RecoveryGuard, its limits from the policy.
type StormView struct {
	Active       bool   `json:"active"`
	LostNodes    int32  `json:"lostNodes"`
	NodesTotal   int32  `json:"nodesTotal"`
	MaxUnhealthy string `json:"maxUnhealthy,omitempty"`
	Cooldown     string `json:"cooldown,omitempty"`
	// Guard is the RecoveryGuard's name; empty when the member has none
	// (no storm was ever recorded there).
	Guard string `json:"recoveryGuard,omitempty"`
	// EndedAt is when the last storm ended (the cooldown runs from it).
	EndedAt *metav1.Time `json:"endedAt,omitempty"`
	Message string       `json:"message,omitempty"`
}

// MachineView is what the host's Machine says about the node.
type MachineView struct {
	Name string `json:"name"`
	// Source is where it was read when not in the host: the member's
	// management cluster.
	Source     string       `json:"source,omitempty"`
	Deleting   *metav1.Time `json:"deletionTimestamp,omitempty"`
	Conditions []string     `json:"conditions,omitempty"`
}

// FencingView is a fencing.Result for printing.
type FencingView struct {
	Fenced         bool       `json:"fenced"`
	Reason         string     `json:"reason"`
	Found          []string   `json:"found,omitempty"`
	Missing        []string   `json:"missing,omitempty"`
	AssumeFencedAt *time.Time `json:"assumeFencedAt,omitempty"`
}

// MachineSource is where explain reads Cluster API objects: the host, and
// for members whose KubeFedCluster names a management cluster
// (contract.AnnotationCAPIManagementCluster) that cluster, reached with a
// context of the user's own kubeconfig (--management-context), never with
// the manager's kubeconfig Secret.
type MachineSource struct {
	Host client.Reader
	// Management reads the management cluster; nil when no
	// --management-context was given.
	Management client.Reader
	// ManagementContext names the kubeconfig context of Management.
	ManagementContext string
}

// memberCAPICluster finds the member's Cluster API Cluster as the
// controllers do (internal/capimap), from its KubeFedCluster's annotations,
// in the host or in its management cluster. where is "" for the host, else
// says which management cluster was read; a note says why none could be.
func memberCAPICluster(ctx context.Context, src MachineSource, s *Snapshot, cluster string) (capi capimap.Reader, cl types.NamespacedName, where, note string, err error) {
	m := capimap.Member{Name: cluster}
	if k := s.cluster(cluster); k != nil {
		m = capimap.MemberOf(k)
	}
	capi = capimap.Reader{Reader: src.Host}
	secret, inManagement, derr := contract.DecodeCAPIManagementCluster(m.Annotations)
	switch {
	case derr != nil:
		return capi, cl, "", fmt.Sprintf("member %s's Machines are in a management cluster, but its KubeFedCluster's annotation is unusable, so fedfailover uses no Machine evidence for it: %v", cluster, derr), nil
	case inManagement && src.Management == nil:
		return capi, cl, "", fmt.Sprintf("member %s's Cluster API objects are in a management cluster (annotation %s=%s, the manager's kubeconfig Secret): "+
			"pass --management-context with a context of your kubeconfig for that cluster to read its Machine", cluster, contract.AnnotationCAPIManagementCluster, secret), nil
	case inManagement:
		capi.Reader = src.Management
		where = fmt.Sprintf("management cluster (context %s)", src.ManagementContext)
	}
	cl, err = capi.Cluster(ctx, m)
	return capi, cl, where, "", err
}

// FindMachine returns the Machine of a member node, found as the
// controllers find it (internal/capimap), in the host or in the member's
// management cluster (where names it; empty for the host). Nil with a note
// when there is none: no Cluster API CRDs, no Cluster for the member, no
// Machine for the node, a management cluster not given.
func FindMachine(ctx context.Context, src MachineSource, s *Snapshot, cluster, node string) (m *clusterv1.Machine, where, note string, err error) {
	capi, cl, where, note, err := memberCAPICluster(ctx, src, s, cluster)
	if note != "" {
		return nil, "", note, nil
	}
	if err != nil {
		note, err := mappingNote(err, resClusters, "")
		return nil, where, note, inManagement(err, src, where)
	}
	m, err = capi.MachineForNode(ctx, cl, node)
	if err != nil {
		note, err := mappingNote(err, resMachines, cl.Namespace)
		return nil, where, note, inManagement(err, src, where)
	}
	return m, where, "", nil
}

// inManagement says that a failed read was of the management cluster.
func inManagement(err error, src MachineSource, where string) error {
	if err == nil || where == "" {
		return err
	}
	return fmt.Errorf("reading the %s: %w", where, err)
}

// mappingNote turns an error of the mapping that only says what is missing
// into a note; read failures stay errors, explained.
func mappingNote(err error, res resource, namespace string) (string, error) {
	if apierrors.IsNotFound(err) && errors.Is(err, capimap.ErrNoCluster) {
		return err.Error(), nil // the annotated Cluster, not its CRD, is missing
	}
	explained := Explain(err, res, namespace)
	switch {
	case isCRDMissing(explained):
		return explained.Error(), nil
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return "", explained
	case errors.Is(err, capimap.ErrNoCluster), errors.Is(err, capimap.ErrNoMachine):
		return err.Error(), nil
	}
	return "", explained
}

// BuildExplanation explains one node from the snapshot and its Machine
// (read where says: "" for the host); machineNote explains a nil machine
// (e.g. Cluster API not installed).
func BuildExplanation(s *Snapshot, cluster, node string, machine *clusterv1.Machine, where, machineNote string) (Explanation, error) {
	if s.cluster(cluster) == nil && !s.anyMemberStatus(cluster) && !s.hasRecords(cluster) {
		return Explanation{}, fmt.Errorf("unknown member cluster %q (KubeFedClusters: %s)", cluster, strings.Join(s.clusterNames(), ", "))
	}
	e := Explanation{Cluster: cluster, Node: node, Records: recordViews(s.nodeRecords(cluster, node))}
	pol, rec, unusable := s.recoveryOf(cluster, node)
	e.Decisions = s.nodeDecisions(cluster, node)
	e.Notes = recordNotes(e.Records)
	if pol == nil {
		e.Verdict = "Not covered"
		e.Detail = "no FailoverPolicy with node recovery enabled selects member " + cluster
		for _, u := range unusable {
			e.Notes = append(e.Notes, fmt.Sprintf("policy %s has node recovery enabled but acts on nothing new: %s", u.Policy.Name, u.Err))
		}
		return e, nil
	}
	e.Policy, e.Recovery = pol.Name, rec
	e.Storm = s.stormOf(pol, cluster)
	e.Verdict, e.Detail = verdictOf(pol, rec, e.Records, e.Decisions, s.Now)
	switch {
	case machine != nil:
		e.Machine = machineView(machine)
		e.Machine.Source = where
	case machineNote != "":
		e.Notes = append(e.Notes, machineNote)
	default:
		e.Notes = append(e.Notes, fmt.Sprintf("no Cluster API Machine of member %s's Cluster has status.nodeRef.name=%s", cluster, node))
	}
	e.Fencing = fencingOf(pol, lostSince(rec, e.Records), node, machine, s.Now)
	e.Notes = append(e.Notes, "the CLI reads only the host cluster: evidence on the member's Node object itself (e.g. the external fence annotation on the Node) is not visible here",
		oldMarksNote)
	return e, nil
}

// oldMarksNote: recovery state lives only in host records now; what an
// older fedfailover left on the member Node is not read by any decision.
const oldMarksNote = "failover.fedfailover.io/* recovery annotations an older fedfailover left on the member's Node are ignored: " +
	"the manager migrates them once into a NodeRecovery record (marked migrated) and removes them"

func recordViews(recs []v1alpha1.NodeRecovery) []RecordView {
	var out []RecordView
	for i := range recs {
		out = append(out, RecordView{Name: recs[i].Name, Active: active(&recs[i]), Spec: recs[i].Spec, Status: recs[i].Status})
	}
	return out
}

// recordNotes flags what a reader could take the wrong way: two active
// records for one node (fedfailover continues the oldest).
func recordNotes(recs []RecordView) []string {
	n := 0
	for _, r := range recs {
		if r.Active {
			n++
		}
	}
	if n > 1 {
		return []string{fmt.Sprintf("%d active NodeRecovery records for this node: fedfailover continues the oldest", n)}
	}
	return nil
}

// activeRecord is the node's active record, or nil.
func activeRecord(recs []RecordView) *RecordView {
	if len(recs) > 0 && recs[0].Active {
		return &recs[0]
	}
	return nil
}

// lostSince is where the fencing verdict measures assumeFencedAfter from,
// as the controller does: when fedfailover first saw the node's current
// Ready condition (host clock), else when the policy says the loss began.
func lostSince(rec *v1alpha1.NodeRecoveryStatus, recs []RecordView) *metav1.Time {
	if a := activeRecord(recs); a != nil && a.Status.ReadyObservedAt != nil {
		return a.Status.ReadyObservedAt
	}
	if rec != nil {
		return rec.LostSince
	}
	return nil
}

func (s *Snapshot) anyMemberStatus(cluster string) bool {
	for i := range s.Policies {
		for _, m := range s.Policies[i].Status.Members {
			if m.Name == cluster {
				return true
			}
		}
	}
	return false
}

// recoveryOf finds the policy covering the node's member: the one with a
// recovery entry for the node, else the one that governs the member's node
// recovery (and the policies that cannot tell, for a note).
func (s *Snapshot) recoveryOf(cluster, node string) (*v1alpha1.FailoverPolicy, *v1alpha1.NodeRecoveryStatus, []policy.Unusable) {
	for i := range s.Policies {
		for j, r := range s.Policies[i].Status.Recoveries {
			if r.Cluster == cluster && r.Node == node {
				return &s.Policies[i], &s.Policies[i].Status.Recoveries[j], nil
			}
		}
	}
	sel := s.recoveryPolicy(cluster)
	return sel.Governing, nil, sel.Unusable
}

// nodeDecisions are the recent decisions whose object is the node or whose
// message names it.
func (s *Snapshot) nodeDecisions(cluster, node string) []DecisionRow {
	var out []DecisionRow
	for i := range s.Policies {
		for _, d := range s.Policies[i].Status.RecentDecisions {
			if d.Cluster != cluster {
				continue
			}
			if d.Object == "Node/"+node || strings.HasSuffix(d.Object, "/"+node) || strings.Contains(d.Message, node) {
				out = append(out, DecisionRow{Policy: s.Policies[i].Name, Decision: d})
			}
		}
	}
	sortDecisions(out)
	return out
}

func (s *Snapshot) stormOf(p *v1alpha1.FailoverPolicy, cluster string) StormView {
	var v StormView
	for _, m := range p.Status.Members {
		if m.Name == cluster {
			v.NodesTotal = m.NodesTotal
		}
	}
	c := s.memberCounts(s.recoveryRows(), cluster)
	v.Active, v.LostNodes = c.suspended, c.lost
	nr := p.Spec.NodeRecovery
	if nr.MaxUnhealthy != nil {
		v.MaxUnhealthy = nr.MaxUnhealthy.String()
	}
	v.Cooldown = string(nr.StormCooldown)
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionStormActive && c.Status == metav1.ConditionTrue {
			v.Message = c.Message
		}
	}
	if g := s.guard(cluster); g != nil {
		v.Guard, v.EndedAt = g.Name, g.Status.StormEndedAt
		if g.Status.Message != "" {
			v.Message = g.Status.Message
		}
	}
	return v
}

// verdictOf answers "was it recovered?" from the recovery going on (the
// policy's entry, else the active record), else from the last finished
// record, else from the decisions about the node.
func verdictOf(p *v1alpha1.FailoverPolicy, rec *v1alpha1.NodeRecoveryStatus, recs []RecordView, decisions []DecisionRow, now time.Time) (string, string) {
	if rec != nil {
		return phaseVerdict(rec.Phase, rec.Evidence, rec.Method, rec.Remediation, rec.Message)
	}
	if a := activeRecord(recs); a != nil {
		rem := ""
		if rr := a.Status.Remediation; rr != nil {
			rem = fmt.Sprintf("%s %s/%s", rr.Kind, rr.Namespace, rr.Name)
		}
		return phaseVerdict(a.Status.Phase, a.Status.Evidence, a.Status.Method, rem, a.Status.Message)
	}
	if len(recs) > 0 {
		last := recs[0]
		return "No recovery in progress", fmt.Sprintf("the last recovery finished %s ago (%s): %s",
			age(last.Status.FinishedAt, now), orDash(last.Status.FinishReason), oneLine(last.Status.Message))
	}
	if len(decisions) > 0 {
		d := decisions[0]
		return "No recovery in progress", fmt.Sprintf("last decision %s (%s): %s", d.Action, d.Reason, d.Message)
	}
	why := fmt.Sprintf("no recovery recorded: the node is Ready, or not Ready for less than notReadyFor (%s), or the member is unreachable",
		orDash(string(p.Spec.NodeRecovery.NotReadyFor)))
	if p.Spec.NodeRecovery.Detection != v1alpha1.NodeLossDetectionNotReady {
		why += "; with detection Evidence, a node whose Machine shows it off is lost once fedfailover has read its kubelet Lease unchanged for a renew interval and a margin (14s by default)"
	}
	return "Not lost", why
}

// phaseVerdict answers from a recovery's phase; remediation names the
// remediation it involves ("" when none) and message is its message.
func phaseVerdict(phase v1alpha1.RecoveryPhase, evidence string, method v1alpha1.RecoveryMethod, remediation, message string) (string, string) {
	switch {
	case phase == v1alpha1.RecoveryPhaseRemediating:
		return "Lost: waiting for remediation " + orDash(remediation), oneLine(message)
	case phase == v1alpha1.RecoveryPhaseBlocked && remediation != "":
		return "Not recovered: remediation " + remediation + " did not fence the node", oneLine(message)
	}
	switch phase {
	case v1alpha1.RecoveryPhaseRecovered:
		return "Recovered", fmt.Sprintf("fenced by %s, pods released with %s", orDash(evidence), orDash(string(method)))
	case v1alpha1.RecoveryPhaseRecovering, v1alpha1.RecoveryPhaseFenced, v1alpha1.RecoveryPhaseActing:
		return "Recovering", fmt.Sprintf("fenced by %s; waiting for replacement pods to run", orDash(evidence))
	case v1alpha1.RecoveryPhaseBlocked:
		return "Not recovered: no fencing evidence", "volumes are never released without proof that the node is off"
	case v1alpha1.RecoveryPhaseSuspended:
		return "Not recovered: storm guard", "too many nodes of the member are lost at once; recovery is suspended"
	}
	return "Lost, not recovered yet", "the node is lost; fencing evidence is being checked"
}

func machineView(m *clusterv1.Machine) *MachineView {
	v := &MachineView{Name: m.Namespace + "/" + m.Name}
	if m.DeletionTimestamp != nil {
		v.Deleting = m.DeletionTimestamp
	}
	for _, c := range m.Status.Conditions {
		v.Conditions = append(v.Conditions, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, orDash(c.Reason)))
	}
	return v
}

// fencingOf runs the fencing verdict on the host's Machine for a node that
// is not Ready (the member may be unreachable: the CLI never reads it).
func fencingOf(p *v1alpha1.FailoverPolicy, since *metav1.Time, node string, m *clusterv1.Machine, now time.Time) *FencingView {
	n := &corev1.Node{}
	n.Name = node
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	if m != nil {
		// The CLI cannot read the member's Node, so it cannot compare
		// providerIDs: it assumes they match (the controller checks them,
		// fencing.MachineOfNode). A Machine without one still fails here.
		n.Spec.ProviderID = m.Spec.ProviderID
	}
	in := fencing.Input{Node: n, Machine: m, Policy: p.Spec.NodeRecovery.Fencing, Now: now}
	if since != nil {
		in.LostSince = since.Time
	}
	r := fencing.Verdict(in)
	v := &FencingView{Fenced: r.Fenced, Reason: r.Reason, Missing: r.Missing}
	for _, e := range r.Found {
		v.Found = append(v.Found, fmt.Sprintf("%s: %s", e.Kind, e.Detail))
	}
	if !r.AssumeFencedAt.IsZero() {
		t := r.AssumeFencedAt.UTC()
		v.AssumeFencedAt = &t
	}
	return v
}
