package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	fpolicy "github.com/fedfailover/fedfailover/internal/policy"
)

// memberView is what one pass reads about a member.
type memberView struct {
	cluster  string
	client   client.Client
	kfc      *kubefedv1beta1.KubeFedCluster
	policy   *v1alpha1.FailoverPolicy // nil: no policy with node recovery on
	nodes    []*corev1.Node
	pods     map[string][]*cachedpod.Pod // by node
	vas      map[string][]*storagev1.VolumeAttachment
	byClaim  map[string][]*cachedpod.Pod
	machines map[string]*clusterv1.Machine
	// machineClients reach the API server of the Machines (host or
	// management cluster); machinesUnavailable says why the member's
	// management cluster gave no Machines (empty otherwise).
	machineClients      member.MachineClients
	machinesUnavailable string
	// records are the active NodeRecovery records, by node; finished are the
	// closed ones (for retention).
	records  map[string]*v1alpha1.NodeRecovery
	finished []*v1alpha1.NodeRecovery
	// sightings are when each not-Ready node's loss was first seen.
	sightings map[string]sighting
	// leases are this process's readings of the kubelet Leases it reads: of
	// the nodes with fencing evidence (see wantLease), by node.
	leases map[string]leaseView
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
	// remediations are the remediation objects of the nodes whose loss may
	// involve one (readRemediations), by node.
	remediations map[string]remediationView
	// nodeEvents are the member Events of this pass, written at its end
	// (writeNodeEvents).
	nodeEvents []*corev1.Event
}

func (r *Reconciler) dryRun(v *memberView) bool { return v.policy != nil && v.policy.Spec.DryRun }

// paused: the governing policy stops every write to the member at once.
func (r *Reconciler) paused(v *memberView) bool { return v.policy != nil && v.policy.Spec.Paused }

// load gathers the member's state from the member cache and the host.
func (r *Reconciler) load(ctx context.Context, cluster string) (*memberView, error) {
	cl, err := r.members.GetClient(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if err := r.ensureWatches(ctx, cluster); err != nil {
		return nil, err
	}
	v := &memberView{cluster: cluster, client: cl, pods: map[string][]*cachedpod.Pod{},
		vas: map[string][]*storagev1.VolumeAttachment{}, byClaim: map[string][]*cachedpod.Pod{}}
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
		v.sightings[n.Name] = r.sightings.observe(cluster, n, now)
	}
	err = member.VisitCached(ctx, cl, "", func(p *cachedpod.Pod) {
		if p.NodeName != "" {
			v.pods[p.NodeName] = append(v.pods[p.NodeName], p)
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
	r.machines(ctx, v)
	if v.machineOwners, err = r.machineOwners(ctx, v); err != nil {
		return nil, err
	}
	r.readLeases(ctx, v)
	r.readRemediations(ctx, v)
	return v, nil
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

func parseVersion(major, minor string) (int, int) {
	ma, _ := strconv.Atoi(strings.TrimSuffix(major, "+"))
	mi, _ := strconv.Atoi(strings.TrimSuffix(minor, "+"))
	return ma, mi
}

// podScope decides which pods node recovery force-deletes and tracks.
type podScope struct {
	scope fpolicy.Scope
	// nsLabels holds the labels of the namespaces a namespaceSelector
	// selects (nil without one).
	nsLabels map[string]map[string]string
}

// newPodScope resolves spec.nodeRecovery.pods; a namespaceSelector is
// resolved against the member's Namespaces (read live: they are not cached).
func newPodScope(ctx context.Context, r client.Reader, nr *v1alpha1.NodeRecoverySpec) (podScope, error) {
	s, err := fpolicy.PodScope(nr)
	if err != nil {
		return podScope{}, err
	}
	out := podScope{scope: s}
	if sel := s.NamespaceSelector(); sel != nil {
		var list corev1.NamespaceList
		if err := r.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return out, fmt.Errorf("listing namespaces: %w", err)
		}
		out.nsLabels = map[string]map[string]string{}
		for _, ns := range list.Items {
			out.nsLabels[ns.Name] = ns.Labels
		}
	}
	return out, nil
}

func (s podScope) matches(p *cachedpod.Pod) bool {
	o := fpolicy.Object{Labels: p.Labels, Namespace: p.Namespace}
	if s.nsLabels != nil {
		l, ok := s.nsLabels[p.Namespace]
		if !ok {
			return false // the member did not list it as selected
		}
		o.NamespaceLabels = l
	}
	return s.scope.Matches(o)
}

// inScope lists the in-scope pods bound to the node.
func inScope(v *memberView, node string) []*cachedpod.Pod {
	var out []*cachedpod.Pod
	for _, p := range v.pods[node] {
		if v.scope.matches(p) {
			out = append(out, p)
		}
	}
	return out
}

// podClaims returns the namespace/name of every claim a pod mounts
// (ephemeral volumes' claims are named <pod>-<volume>).
func podClaims(p *cachedpod.Pod) []string {
	var out []string
	for _, v := range p.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Namespace+"/"+p.Name+"-"+v.Name)
		}
	}
	return out
}

// claimsOf lists, sorted and unique, the claims of pods.
func claimsOf(pods []*cachedpod.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, podClaims(p)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// indexRecordCluster indexes NodeRecovery records by spec.cluster.
const indexRecordCluster = "spec.cluster"

// memberRecords lists a member's records from the manager's cache: the
// active one per node, and the finished ones (for retention).
func (r *Reconciler) memberRecords(ctx context.Context, cluster string) (active map[string]*v1alpha1.NodeRecovery, finished []*v1alpha1.NodeRecovery, err error) {
	var list v1alpha1.NodeRecoveryList
	if err := r.host.List(ctx, &list, client.MatchingFields{indexRecordCluster: cluster}); err != nil {
		return nil, nil, fmt.Errorf("listing NodeRecovery records: %w", err)
	}
	active = map[string]*v1alpha1.NodeRecovery{}
	for i := range list.Items {
		rec := &list.Items[i]
		if rec.Status.Phase == v1alpha1.RecoveryPhaseFinished {
			finished = append(finished, rec)
			continue
		}
		// Two active records for one node cannot be made by one worker per
		// member; if some appear, the oldest is the one continued.
		if old := active[rec.Spec.Node]; old == nil || rec.CreationTimestamp.Before(&old.CreationTimestamp) {
			active[rec.Spec.Node] = rec
		}
	}
	return active, finished, nil
}

// sighting is when fedfailover first saw a node's loss and its current
// Ready condition, on the host's clock. notReadyFor and assumeFencedAfter are
// measured with it, so no decision compares a member's clock with the host's.
type sighting struct {
	uid    types.UID
	status corev1.ConditionStatus
	since  time.Time // the condition's lastTransitionTime (member clock), compared for equality only
	lossAt time.Time // host clock: the loss was first seen
	condAt time.Time // host clock: this Ready condition was first seen
}

// sightings remembers the not-Ready nodes seen, per member and node, by
// this process. After a restart it starts again from now.
type sightings struct {
	mu sync.Mutex
	m  map[string]sighting
	// leases are this process's readings of kubelet Leases, per member and
	// node (evidence-first detection). Never recorded: after a restart the
	// silence is measured again from the first reading.
	leases map[string]fencing.LeaseSighting
}

func newSightings() *sightings {
	return &sightings{m: map[string]sighting{}, leases: map[string]fencing.LeaseSighting{}}
}

// observe returns the node's sighting, updating it; the zero sighting for a
// Ready node (which forgets it).
func (s *sightings) observe(cluster string, n *corev1.Node, now time.Time) sighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cluster + "/" + n.Name
	cur := nodecond.Ready(n)
	if cur == nil || cur.Status == corev1.ConditionTrue {
		delete(s.m, key)
		return sighting{}
	}
	// Only this process's own sightings start a wait: a time read back from a
	// record was written by another process (its clock, or a back-dated
	// status patch). After a restart or a takeover the waits start again
	// from now: a later recovery, never an earlier one.
	prev, ok := s.m[key]
	next := sighting{uid: n.UID, status: cur.Status, since: cur.LastTransitionTime.Time, lossAt: now, condAt: now}
	if ok && prev.uid == n.UID && nodecond.SameLoss(prev.status, prev.since, cur) {
		next.lossAt = prev.lossAt
		if prev.status == cur.Status && prev.since.Equal(next.since) {
			next.condAt = prev.condAt
		}
	}
	s.m[key] = next
	return next
}

// forget drops a member's sightings (it is gone or unselected).
func (s *sightings) forget(cluster string, keep func(node string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if c, node, _ := cut(k); c == cluster && !keep(node) {
			delete(s.m, k)
		}
	}
	for k := range s.leases {
		if c, node, _ := cut(k); c == cluster && !keep(node) {
			delete(s.leases, k)
		}
	}
}

// observeLease folds a reading of a node's kubelet Lease, taken at now, into
// the node's Lease sighting and returns it.
func (s *sightings) observeLease(cluster string, n *corev1.Node, r fencing.LeaseReading, now time.Time) fencing.LeaseSighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cluster + "/" + n.Name
	next := fencing.ObserveLease(s.leases[key], n.UID, r, now)
	s.leases[key] = next
	return next
}

// lease returns the node's Lease sighting (zero when none).
func (s *sightings) lease(cluster string, n *corev1.Node) fencing.LeaseSighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[cluster+"/"+n.Name]
	if l.NodeUID != n.UID {
		return fencing.LeaseSighting{}
	}
	return l
}

// forgetLease drops a node's Lease readings: it is read no more.
func (s *sightings) forgetLease(cluster, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, cluster+"/"+node)
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func cut(key string) (string, string, bool) { return strings.Cut(key, "/") }

// machines maps node names to Machines, read from the host or from the
// member's management cluster; without Cluster API (or a Cluster for the
// member) it is empty and the verdict says what is missing. A management
// cluster that cannot be read gives no Machine (no evidence, never a fence):
// the reason goes into every verdict of the pass and, on a change, into an
// event on the policy.
func (r *Reconciler) machines(ctx context.Context, v *memberView) {
	mc, err := r.members.MachineClients(ctx, v.cluster)
	if err == nil {
		v.machineClients = mc
		v.machines, err = r.members.MachinesByNode(ctx, v.cluster)
	}
	var me *member.ManagementError
	switch {
	case errors.As(err, &me):
		v.machines, v.machinesUnavailable = nil, me.Error()
		if v.policy != nil && r.store.changed(v.cluster, "/management", transitionUnavailable) {
			ctrl.LoggerFrom(ctx).Info("Node recovery: "+me.Error(), "reason", ReasonEvidenceUnavailable)
			r.recorder.Eventf(v.policy, nil, corev1.EventTypeWarning, ReasonEvidenceUnavailable, "Gather", "%s", me.Error())
		}
		return
	case err != nil:
		ctrl.LoggerFrom(ctx).V(1).Info("No Machines for member", "reason", err.Error())
		v.machines = nil
	}
	if r.store.changed(v.cluster, "/management", "") && v.policy != nil && mc.Management != "" {
		r.recorder.Eventf(v.policy, nil, corev1.EventTypeNormal, ReasonEvidenceAvailable, "Gather",
			"management cluster of member %s (kubeconfig Secret %s) can be read again", v.cluster, mc.Management)
	}
}

// machineOwners finds who already remediates each of the member's Machines,
// when the policy may ask for Machine deletion. MachineHealthChecks are read
// live (rare, and their CRD may be absent), once per namespace.
func (r *Reconciler) machineOwners(ctx context.Context, v *memberView) (map[string]string, error) {
	if v.policy == nil || !v.policy.Spec.NodeRecovery.Fencing.RequestMachineDeletion || len(v.machines) == 0 {
		return nil, nil
	}
	ready := map[string]bool{}
	for _, n := range v.nodes {
		ready[n.Name] = nodecond.IsReady(n)
	}
	mhcs := map[string][]clusterv1.MachineHealthCheck{}
	out := map[string]string{}
	for node, m := range v.machines {
		if ready[node] {
			continue // never a deletion candidate: no live list for it
		}
		list, ok := mhcs[m.Namespace]
		if !ok {
			var l clusterv1.MachineHealthCheckList
			if err := r.machineReader(v).List(ctx, &l, client.InNamespace(m.Namespace)); err != nil && !isNoMatch(err) {
				return nil, fmt.Errorf("listing MachineHealthChecks: %w", err)
			}
			list = l.Items
			mhcs[m.Namespace] = list
		}
		if owner := machineOwner(m, list); owner != "" {
			out[node] = owner
		}
	}
	return out, nil
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }

// leaseView is what a pass knows of a node's kubelet Lease: this process's
// readings, and why the Lease could not be read in this pass, if it could
// not.
type leaseView struct {
	fencing.LeaseSighting
	err string
}

// silence is the Lease's verdict: silent only when read in this pass (or
// within leaseReadEvery) and unchanged over the silence window.
func (l leaseView) silence() fencing.Silence {
	if l.err != "" {
		return fencing.Silence{Why: l.err}
	}
	return l.Silent()
}

// leaseReadEvery: a node's Lease is read at most this often (host clock).
// Passes follow every watched event of the member; the silence window is
// many times longer.
const leaseReadEvery = time.Second

// readLeases reads, with one GET each through the member's live client, the
// kubelet Lease of each node wantLease picks (the nodes with positive
// evidence that their machine is off), and folds every reading into this
// process's sightings. No other Lease is read and none is cached: at 2,000
// nodes per member, a watch on every Lease would bring 200 updates a second
// per member for the few nodes that ever carry evidence.
func (r *Reconciler) readLeases(ctx context.Context, v *memberView) {
	v.leases = map[string]leaseView{}
	var live client.Client
	var liveErr error
	now := r.now()
	for _, n := range v.nodes {
		prev := r.sightings.lease(v.cluster, n)
		if !wantLease(v, n, prev, now) {
			r.sightings.forgetLease(v.cluster, n.Name)
			continue
		}
		if !prev.LastAt.IsZero() && !now.Before(prev.LastAt) && now.Sub(prev.LastAt) < leaseReadEvery {
			v.leases[n.Name] = leaseView{LeaseSighting: prev}
			continue
		}
		if live == nil && liveErr == nil {
			live, liveErr = r.members.GetUncachedClient(ctx, v.cluster)
		}
		if liveErr != nil {
			v.leases[n.Name] = leaseView{LeaseSighting: prev, err: "its kubelet Lease cannot be read: " + liveErr.Error()}
			continue
		}
		reading, err := readLease(ctx, live, n)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Kubelet Lease not read", "node", n.Name, "reason", err.Error())
			v.leases[n.Name] = leaseView{LeaseSighting: prev, err: err.Error()}
			continue
		}
		v.leases[n.Name] = leaseView{LeaseSighting: r.sightings.observeLease(v.cluster, n, reading, now)}
	}
}

// readLease reads the node's kubelet Lease from the member's API server.
func readLease(ctx context.Context, c client.Reader, n *corev1.Node) (fencing.LeaseReading, error) {
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: fencing.NodeLeaseNamespace, Name: n.Name}
	if err := c.Get(ctx, key, l); err != nil {
		if apierrors.IsNotFound(err) {
			return fencing.LeaseReading{}, fmt.Errorf("its kubelet Lease %s does not exist", key)
		}
		return fencing.LeaseReading{}, fmt.Errorf("its kubelet Lease %s cannot be read: %w", key, err)
	}
	return fencing.ReadLease(l, n.UID), nil
}

// machineReader reads from the API server of the member's Machines.
func (r *Reconciler) machineReader(v *memberView) client.Reader {
	if v.machineClients.Live != nil {
		return v.machineClients.Live
	}
	return r.apiReader
}
