// Package noderecovery recovers the pods with PersistentVolumes of lost
// member nodes: it detects lost nodes, asks internal/fencing whether each is
// proven off, applies the out-of-service taint (or force-deletes), tracks
// the replacements and removes its taint when the node comes back. Its
// memory is on the host, where only fedfailover writes: one NodeRecovery
// record per loss (intent, action, result), so a restart resumes where it
// stopped and nothing a member-level writer can forge decides anything.
package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	fpolicy "github.com/fedfailover/fedfailover/internal/policy"
	"github.com/fedfailover/fedfailover/internal/policystatus"
	"github.com/fedfailover/fedfailover/internal/wake"
)

// Host side.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler runs node recovery for one member per request (the request
// name is the member's name): storm guard and cooldown are member-wide, and
// one worker per member means no two workers ever act on the same member at
// once.
type Reconciler struct {
	host      client.Client
	apiReader client.Reader
	members   memberAccess
	recorder  recorder.EventRecorder
	store     *store
	sightings *sightings
	opts      Options
	ctrl      controller.Controller
	capi      bool
	now       func() time.Time
}

// memberView is what one pass reads about a member.
type memberView struct {
	cluster  string
	client   client.Client
	kfc      *kubefedv1beta1.KubeFedCluster
	policy   *v1alpha1.FailoverPolicy // nil: no policy with node recovery on
	nodes    []*corev1.Node
	pods     map[string][]*corev1.Pod // by node
	vas      map[string][]*storagev1.VolumeAttachment
	byClaim  map[string][]*corev1.Pod
	machines map[string]*clusterv1.Machine
	// records are the active NodeRecovery records, by node; finished are the
	// closed ones (for retention).
	records  map[string]*v1alpha1.NodeRecovery
	finished []*v1alpha1.NodeRecovery
	// sightings are when each not-Ready node's loss was first seen.
	sightings map[string]sighting
	// taintsLeft says, per node, why fedfailover's taint stays (this pass).
	taintsLeft []string
	// machineOwners names, by node, who already remediates its Machine (see
	// machineOwner); gathered only when the policy may request deletion.
	machineOwners map[string]string
	scope         podScope
	nodeScope     labels.Selector // the policy's nodeSelector; nil without a policy
	major         int
	minor         int
	suspended     bool
	hold          string // why new recoveries wait (see planInput.Hold)
	// nodeEvents are the member Events of this pass, written at its end
	// (writeNodeEvents).
	nodeEvents []*corev1.Event
}

// Reconcile runs one node recovery pass over a member.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.Name)
	ctx = ctrl.LoggerInto(ctx, log)
	v, err := r.load(ctx, req.Name)
	if errors.Is(err, member.ErrNotConnected) {
		// The member's connect event brings us back.
		log.V(1).Info("Member not connected; waiting", "reason", err.Error())
		return ctrl.Result{}, r.reportUnreachable(ctx, req.Name, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// One reading decides the pass: the storm guard counts as lost exactly
	// the nodes that each node's decision below treats as lost.
	now := r.now()
	storm, err := r.stormStep(ctx, v, now)
	if errors.Is(err, errStaleGuard) {
		// The cache has not seen the latest RecoveryGuard yet.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	v.suspended, v.hold = storm.Suspended, storm.hold
	rep := memberReport{Storm: storm.Suspended, StormMessage: storm.message}
	if v.policy != nil {
		rep.Policy = v.policy.Name
	}
	var next wake.Soonest
	next.In(now, storm.ResumeAt.Sub(now))
	var errs []error
	for _, n := range v.nodes {
		st, after, err := r.reconcileNode(ctx, v, n, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
		if st != nil {
			rep.Recoveries = append(rep.Recoveries, *st)
		}
		next.In(now, after)
	}
	for _, name := range orphanNodes(v) {
		st, after, err := r.reconcileOrphan(ctrl.LoggerInto(ctx, log.WithValues("node", name)), v, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("deleted node %s: %w", name, err))
		}
		if st != nil {
			rep.Recoveries = append(rep.Recoveries, *st)
		}
		next.In(now, after)
	}
	rep.TaintsLeft = v.taintsLeft
	if err := r.closeDeleted(ctx, v); err != nil {
		errs = append(errs, err)
	}
	r.writeNodeEvents(ctx, v)
	if err := r.pruneRecords(ctx, v.finished); err != nil {
		errs = append(errs, err)
	}
	observeMember(v.cluster, v.nodes, v.records, rep.Recoveries)
	r.store.publish(v.cluster, rep)
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	// A member with a recovery going on is looked at every ResyncPeriod, so
	// evidence that appears without an event we watch is still seen; a quiet
	// one every IdleResync (policy selection also depends on KubeFedCluster
	// labels).
	resync := r.opts.ResyncPeriod
	if len(rep.Recoveries) == 0 && !rep.Storm {
		resync = r.opts.IdleResync
	}
	return ctrl.Result{RequeueAfter: next.After(now, 0, resync)}, nil
}

// load gathers the member's state from the member cache and the host.
func (r *Reconciler) load(ctx context.Context, cluster string) (*memberView, error) {
	cl, err := r.members.GetClient(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if err := r.ensureWatches(ctx, cluster); err != nil {
		return nil, err
	}
	v := &memberView{cluster: cluster, client: cl, pods: map[string][]*corev1.Pod{},
		vas: map[string][]*storagev1.VolumeAttachment{}, byClaim: map[string][]*corev1.Pod{}}
	if v.kfc, v.policy, err = r.policyFor(ctx, cluster); err != nil {
		return nil, err
	}
	if ver, err := r.members.ServerVersion(cluster); err == nil {
		v.major, v.minor = parseVersion(ver.Major, ver.Minor)
	}
	if v.policy != nil {
		if v.scope, err = newPodScope(ctx, cl, v.policy.Spec.NodeRecovery); err != nil {
			return nil, err
		}
		if v.nodeScope, err = fpolicy.Nodes(v.policy.Spec.NodeRecovery); err != nil {
			return nil, err // ForMember already refused a policy with an invalid one
		}
	}
	// The nodes, pods and VolumeAttachments below are the cache's own
	// objects, not copies (member.VisitCached): a pass reads every node and
	// pod of the member, and even a list without deep copies copies each
	// (20,000 pods per member, 80 MB held at once at 3 x 2,000 x 10). They
	// are never modified: every write patches a DeepCopy or a live read.
	err = member.VisitCached(ctx, cl, "", func(n *corev1.Node) { v.nodes = append(v.nodes, n) })
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if v.records, v.finished, err = r.memberRecords(ctx, cluster); err != nil {
		return nil, err
	}
	v.sightings = map[string]sighting{}
	now := r.now()
	for _, n := range v.nodes {
		v.sightings[n.Name] = r.sightings.observe(cluster, n, v.records[n.Name], now)
	}
	err = member.VisitCached(ctx, cl, "", func(p *corev1.Pod) {
		if p.Spec.NodeName != "" {
			v.pods[p.Spec.NodeName] = append(v.pods[p.Spec.NodeName], p)
		}
		for _, c := range podClaims(p) {
			v.byClaim[c] = append(v.byClaim[c], p)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	err = member.VisitCached(ctx, cl, "", func(va *storagev1.VolumeAttachment) {
		v.vas[va.Spec.NodeName] = append(v.vas[va.Spec.NodeName], va)
	})
	if err != nil {
		return nil, fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	v.machines = r.machines(ctx, cluster)
	if v.machineOwners, err = r.machineOwners(ctx, v); err != nil {
		return nil, err
	}
	return v, nil
}

// machines maps node names to Machines; without Cluster API (or a Cluster
// for the member) it is empty and the verdict says what is missing.
func (r *Reconciler) machines(ctx context.Context, cluster string) map[string]*clusterv1.Machine {
	if !r.capi {
		return nil
	}
	ms, err := r.members.MachinesByNode(ctx, cluster)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("No Machines for member", "reason", err.Error())
		return nil
	}
	return ms
}

// policyFor returns the member's KubeFedCluster and the FailoverPolicy that
// governs its node recovery (internal/policy.ForMember).
func (r *Reconciler) policyFor(ctx context.Context, cluster string) (*kubefedv1beta1.KubeFedCluster, *v1alpha1.FailoverPolicy, error) {
	kfc, err := r.members.KubeFedCluster(ctx, cluster)
	if err != nil {
		return nil, nil, err
	}
	var list v1alpha1.FailoverPolicyList
	if err := r.host.List(ctx, &list); err != nil {
		return nil, nil, fmt.Errorf("listing FailoverPolicies: %w", err)
	}
	return kfc, fpolicy.ForMember(list.Items, kfc.Labels).Governing, nil
}

// reconcileNode decides and acts for one node on the pass's clock reading.
// It returns the node's status entry (nil when there is nothing to report)
// and when to look again, counted from now.
func (r *Reconciler) reconcileNode(ctx context.Context, v *memberView, n *corev1.Node, now time.Time) (*v1alpha1.NodeRecoveryStatus, time.Duration, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("node", n.Name))
	if err := r.closeReplaced(ctx, v, n); err != nil {
		return nil, 0, err
	}
	n, err := r.migrate(ctx, v, n)
	if err != nil {
		return nil, 0, err
	}
	in := planInput{Node: n, Record: v.records[n.Name], Sighting: v.sightings[n.Name],
		Machine: v.machines[n.Name], MachineOwner: v.machineOwners[n.Name],
		ServerMajor: v.major, ServerMinor: v.minor, Suspended: v.suspended, Hold: v.hold, Now: now,
		MachineDeletionEnabled: r.opts.EnableMachineDeletion}
	if v.policy != nil && v.nodeScope.Matches(labels.Set(n.Labels)) {
		// A node outside nodeSelector is treated as if no policy covered it:
		// nothing new is started; a recovery already acted on is tracked.
		in.Policy = v.policy.Spec.NodeRecovery
	}
	p := decide(in)
	if in.Record == nil && p.Phase != "" && v.policy != nil {
		rec, err := r.openRecord(ctx, v, n, in.Machine, in.Sighting, &p)
		if errors.Is(err, errRecordNotSeenYet) {
			return recoveryStatus(v.cluster, n, in.Machine, p, v), time.Second, nil
		}
		if err != nil {
			return nil, 0, err
		}
		v.records[n.Name] = rec
	}
	p.record = v.records[n.Name]
	after, err := r.apply(ctx, v, n, &p)
	if p.taintLeft != "" {
		v.taintsLeft = append(v.taintsLeft, p.taintLeft)
	}
	if err == nil {
		if p.record != nil && p.record.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			err = r.syncRecord(ctx, v, p.record, &p)
		}
	}
	if apierrors.IsConflict(err) {
		// A record or the Node changed since the cache showed it (often our
		// own write of the last pass): decide again on the new one.
		ctrl.LoggerFrom(ctx).V(1).Info("Stale read; deciding again", "reason", err.Error())
		return recoveryStatus(v.cluster, n, in.Machine, p, v), time.Second, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if after == 0 {
		after = p.RequeueAfter
	}
	return recoveryStatus(v.cluster, n, in.Machine, p, v), after, nil
}

func recoveryStatus(cluster string, n *corev1.Node, m *clusterv1.Machine, p plan, v *memberView) *v1alpha1.NodeRecoveryStatus {
	if p.Phase == "" {
		return nil
	}
	st := &v1alpha1.NodeRecoveryStatus{Cluster: cluster, Node: n.Name, Phase: p.Phase, Method: p.Method,
		Message: policystatus.Truncate(p.Message, 1024)}
	if m != nil {
		st.Machine = m.Namespace + "/" + m.Name
	}
	if !p.LostSince.IsZero() {
		t := metaTime(p.LostSince)
		st.LostSince = &t
	}
	switch {
	case !p.Rec.ActedAt.IsZero():
		t := metaTime(p.Rec.ActedAt)
		st.FencedAt = &t
		st.Evidence = p.Rec.FencedBy
		st.AffectedPods = int32(len(p.Rec.Claims))
	case p.Verdict.Fenced:
		st.Evidence = p.Verdict.Reason
	}
	if st.AffectedPods == 0 && v.policy != nil {
		st.AffectedPods = int32(len(inScope(v, n.Name)))
	}
	return st
}

// inScope lists the in-scope pods bound to the node.
func inScope(v *memberView, node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range v.pods[node] {
		if v.scope.matches(p) {
			out = append(out, p)
		}
	}
	return out
}

func parseVersion(major, minor string) (int, int) {
	ma, _ := strconv.Atoi(strings.TrimSuffix(major, "+"))
	mi, _ := strconv.Atoi(strings.TrimSuffix(minor, "+"))
	return ma, mi
}
