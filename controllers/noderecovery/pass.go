// Package noderecovery recovers the pods with PersistentVolumes of lost
// member nodes: it detects lost nodes, asks internal/fencing whether each is
// proven off, applies the out-of-service taint (or force-deletes), tracks
// the replacements and removes its taint when the node comes back. Its
// memory is on the host, where only fedfailover writes: one NodeRecovery
// record per loss (intent, action, result), so a restart resumes where it
// stopped and nothing a member-level writer can forge decides anything.
//
// A pass over a member is one pipeline (Reconcile), each stage in its file:
// gather.go reads the member view; storm.go decides member-wide and
// decide.go, purely, every node; act.go carries the decisions out, every
// destructive write after a live re-check; record.go keeps the host records
// and writes the pass's one summary (records, status, events, gauges).
package noderecovery

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
)

// Host side.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// NodeRecovery records are fedfailover's memory of each loss, on the host
// where member-level writers cannot forge them.
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=noderecoveries,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=noderecoveries/status,verbs=get;update;patch
//
// The storm state of each member is its RecoveryGuard, on the host.
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=recoveryguards,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=recoveryguards/status,verbs=get;update;patch

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
	pacer     pacer
	opts      Options
	ctrl      controller.Controller
	capi      bool
	now       func() time.Time
}

// Reconcile runs one node recovery pass over a member: gather, decide, act,
// record, each stage over every node of the member before the next starts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.Name)
	ctx = ctrl.LoggerInto(ctx, log)

	// 1. Gather: the member view, from the member cache and the host.
	v, err := r.load(ctx, req.Name)
	if errors.Is(err, member.ErrNotConnected) {
		// The member's connect event brings us back.
		log.V(1).Info("Member not connected; waiting", "reason", err.Error())
		return ctrl.Result{}, r.reportUnreachable(ctx, req.Name, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	// 2. Decide. One reading decides the pass: the storm guard counts as lost
	// exactly the nodes that each node's decision below treats as lost. The
	// guard is member-wide and persisted before any node is decided.
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
	// Each node's record is made to fit its Node first (a re-created Node's
	// closed, an older version's node marks migrated): decide reads both.
	nodes := r.settle(ctx, v)
	for _, np := range nodes {
		if np.failed == nil {
			np.in, np.plan = decideNode(v, np.node, now, r.opts.EnableMachineDeletion)
		}
	}

	// 3. Act on the decisions: every destructive write re-checks its proof
	// live first. Every node lost in the pass is tainted before any node's
	// pods are deleted. Nodes that no longer exist but left pods or
	// attachments behind are decided and acted on in one small step each.
	for _, np := range nodes {
		r.actOn(ctrl.LoggerInto(ctx, np.log), v, np)
	}
	for _, np := range nodes {
		r.deleteTaintedPods(ctrl.LoggerInto(ctx, np.log), v, np)
	}
	orphans := r.reconcileOrphans(ctx, v)

	// 4. Record: the pass's one summary (records, status, events, gauges)
	// and when to look again.
	return r.summarise(ctx, v, now, storm, nodes, orphans)
}

// nodePass is one node's way through the stages of a pass.
type nodePass struct {
	log  logr.Logger // carries the node's name
	node *corev1.Node
	in   planInput
	plan plan
	// failed ends the node's pass early (settling or opening its record
	// failed): nothing more is done for it, and the pass fails at its end.
	failed error
	// recordPending: its new record is not in the cache yet; nothing was
	// done, and the node is looked at again in a second.
	recordPending bool
	// after and err are what acting on the plan returned.
	after time.Duration
	err   error
}

// outcome is how one node's pass ended: its status entry (nil when there is
// nothing to report), when to look again (counted from the pass's clock
// reading), and its error.
type outcome struct {
	status *v1alpha1.NodeRecoveryStatus
	after  time.Duration
	err    error
}
