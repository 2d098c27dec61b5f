package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The recovery benchmark's federation: one member with enough nodes that a
// replacement always has somewhere to go.
const (
	rcMember     = "member1"
	rcWorkload   = "db"
	rcPolicy     = "bench-recovery"
	rcSamplePace = 100 * time.Millisecond
	rcGoalP95    = 5.0
)

type rcOptions struct {
	runs          int
	nodes         int
	notReadyFor   time.Duration
	bound         time.Duration
	baselineBound time.Duration
	baseline      bool
	dir           string
	// detection is the --detection flag; detections what it selects, in
	// the order the runs alternate between them.
	detection  string
	detections []v1alpha1.NodeLossDetection
	// grace is the member's kube-controller-manager
	// --node-monitor-grace-period; leaseSeconds the kwok nodes' Lease
	// duration (renewed every quarter of it).
	grace        time.Duration
	leaseSeconds int
}

// Kubernetes' defaults for the timings a node loss is detected by: the
// node monitor grace period of kube-controller-manager and the kubelet's
// nodeLeaseDurationSeconds.
const (
	rcDefaultGrace        = 50 * time.Second
	rcDefaultLeaseSeconds = 40
)

// rcBoth is the --detection value that measures both detections.
const rcBoth = "both"

// rcParseDetection turns --detection into the detections measured: both
// (Evidence, then NotReady) by default.
func rcParseDetection(s string) ([]v1alpha1.NodeLossDetection, error) {
	switch strings.ToLower(s) {
	case "", rcBoth:
		return []v1alpha1.NodeLossDetection{v1alpha1.NodeLossDetectionEvidence, v1alpha1.NodeLossDetectionNotReady}, nil
	case strings.ToLower(string(v1alpha1.NodeLossDetectionEvidence)):
		return []v1alpha1.NodeLossDetection{v1alpha1.NodeLossDetectionEvidence}, nil
	case strings.ToLower(string(v1alpha1.NodeLossDetectionNotReady)):
		return []v1alpha1.NodeLossDetection{v1alpha1.NodeLossDetectionNotReady}, nil
	}
	return nil, fmt.Errorf("--detection must be %s, %s or %s, got %q",
		v1alpha1.NodeLossDetectionEvidence, v1alpha1.NodeLossDetectionNotReady, rcBoth, s)
}

// validate checks the flags and fills in the detections.
func (o *rcOptions) validate() error {
	if o.runs < 1 {
		return fmt.Errorf("--runs must be at least 1, got %d", o.runs)
	}
	if o.nodes < 3 {
		return fmt.Errorf("--nodes must be at least 3, got %d", o.nodes)
	}
	if o.leaseSeconds < 4 {
		return fmt.Errorf("--node-lease-seconds must be at least 4, got %d", o.leaseSeconds)
	}
	// kube-controller-manager needs a grace period longer than the renew
	// interval, or every node flaps NotReady between two renewals.
	if renew := time.Duration(o.leaseSeconds) * time.Second / 4; o.grace <= renew {
		return fmt.Errorf("--node-monitor-grace-period %s must exceed the Lease renew interval %s (a quarter of --node-lease-seconds)", o.grace, renew)
	}
	d, err := rcParseDetection(o.detection)
	if err != nil {
		return err
	}
	o.detections = d
	return nil
}

// rcSlot is one run of the session: the i-th run of a detection.
type rcSlot struct {
	Detection v1alpha1.NodeLossDetection
	Run       int
}

// rcSchedule alternates the detections run by run (E1 N1 E2 N2 ...), so
// that both see the same machine load over the session.
func rcSchedule(detections []v1alpha1.NodeLossDetection, runs int) []rcSlot {
	var out []rcSlot
	for i := 1; i <= runs; i++ {
		for _, d := range detections {
			out = append(out, rcSlot{Detection: d, Run: i})
		}
	}
	return out
}

// rcFigureStart is where figure (a) starts, "evidence" in the table: for
// Evidence, the Machine evidence written (fedfailover may find the node
// lost from then on, once its Lease is silent); for NotReady, the later of
// that and the node lost by its Ready condition (lastTransitionTime +
// notReadyFor), zero while the node was not seen NotReady.
func rcFigureStart(d v1alpha1.NodeLossDetection, evidence, lost time.Time) time.Time {
	if d == v1alpha1.NodeLossDetectionEvidence {
		return evidence
	}
	if lost.IsZero() {
		return time.Time{}
	}
	if lost.After(evidence) {
		return lost
	}
	return evidence
}

func recoveryCmd() *cobra.Command {
	var o rcOptions
	cmd := &cobra.Command{
		Use:   "recovery",
		Short: "Seconds from a powered-off node's fencing evidence to its StatefulSet pod Running elsewhere, by detection, vs no operator",
		Long: `Starts a host and one member (kubefed joined, kwok nodes, the lab's fake CSI
attacher) with the member's node monitor grace period and the nodes' kubelet
Lease duration of the flags (Kubernetes' defaults: 50 s and 40 s), and
measures node recovery of a StatefulSet pod with a ReadWriteOnce volume.

Baseline (first, no fedfailover running, no policy): a one-replica
StatefulSet runs with its volume attached; its node is powered off (kwok
SIGKILLed, Machine deleted with InfrastructureReady=False/InfrastructureDeleted).
It is reported recovered only if the replacement runs elsewhere with the
volume attached there within --baseline-bound of the power-off; otherwise
baseline_recovered is false and the time it was observed stuck is given
(Kubernetes never replaces it on its own). Then the out-of-service taint is
applied by hand, as the baseline e2e test does, and the time from the taint
to the replacement Running is reported too.

Runs (--runs per detection): fedfailover's controllers run in this process
through controllers.Setup (the controller defaults cmd/manager uses), with a
FailoverPolicy: nodeRecovery detection=(the run's), notReadyFor=--not-ready-for,
fencing by Machine infrastructure deletion, method Auto, maxUnhealthy 40%.
--detection both (the default) alternates Evidence and NotReady runs in one
session on one lab, the policy's detection changed between runs; Evidence or
NotReady runs only that one. Each run creates a fresh StatefulSet in its own
namespace, waits until its pod is Running with its volume attached, powers
off the pod's node with evidence machine-deleted, and samples every 100 ms
until the replacement pod is Ready on another node with its volume attached
there and nowhere else ("Running"). Then the node is powered back on and the
run ends only when the node is Ready again, fedfailover has removed its
out-of-service taint and closed the node's NodeRecovery record.

  poweroff_to_running  from just before the node's kwok is killed to Running.
  evidence_to_running  figure (a), from "evidence" to Running. "Evidence" is
                       where the detection may find the node lost at the
                       earliest:
                         Evidence: the Machine evidence written (PowerOff
                           returned: the lab has deleted the Machine and set
                           InfrastructureReady=False/InfrastructureDeleted).
                           fedfailover then reads the node's kubelet Lease
                           and finds it lost once the Lease stayed unchanged
                           for a renew interval + 4 % + 1 s (11.4 s with the
                           40 s Lease): (a) includes that silence window.
                         NotReady: the later of the Machine evidence written
                           and the node lost: its Ready condition's
                           lastTransitionTime (written by kube-controller-
                           manager, whole seconds) + notReadyFor, the instant
                           at which fedfailover's own Lost() turns true. It
                           is what fedfailover adds once it may act.
Also shown: power-off -> out-of-service taint observed, evidence -> taint,
how many runs were tainted while the Node still reported Ready=True, and
when fedfailover recorded that it acted (status.actedAt of the node's
NodeRecovery record on the host; whole seconds). A node goes NotReady a
grace period after its last Lease renewal, checked every 5 s: an Evidence
run is usually over before that, so its power-off -> NotReady is "-".

Goal (issue 5): NotReady's evidence_to_running p95 <= 5 s. p95 is
nearest-rank, so with fewer than 20 runs it is the worst run. A run that does
not recover within --bound makes the median and p95 null, never a number.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRecoveryBench(ctx, cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().IntVar(&o.runs, "runs", 5, "powered-off nodes recovered by fedfailover, per detection")
	cmd.Flags().IntVar(&o.nodes, "nodes", 3, "kwok nodes in the member (maxUnhealthy 40% allows one lost node per 2.5)")
	cmd.Flags().StringVar(&o.detection, "detection", rcBoth, "the policy's nodeRecovery.detection: Evidence, NotReady, or both (alternating runs in one session)")
	cmd.Flags().DurationVar(&o.notReadyFor, "not-ready-for", 10*time.Second, "the policy's nodeRecovery.notReadyFor")
	cmd.Flags().DurationVar(&o.grace, "node-monitor-grace-period", rcDefaultGrace, "the member kube-controller-manager's --node-monitor-grace-period (Kubernetes' default 50s; the lab's own default is 16s)")
	cmd.Flags().IntVar(&o.leaseSeconds, "node-lease-seconds", rcDefaultLeaseSeconds, "the kwok nodes' kubelet Lease duration, renewed every quarter of it (the kubelet's default 40; the lab's own default is 8)")
	cmd.Flags().DurationVar(&o.bound, "bound", 120*time.Second, "give up waiting for a run's replacement Running after this long from power-off")
	cmd.Flags().DurationVar(&o.baselineBound, "baseline-bound", 120*time.Second, "how long after power-off the no-operator baseline is watched")
	cmd.Flags().BoolVar(&o.baseline, "baseline", true, "measure the no-operator baseline")
	cmd.Flags().StringVar(&o.dir, "dir", "", "lab directory (default: a temporary directory)")
	return cmd
}

// rcBench is one benchmark session on one lab.
type rcBench struct {
	out     io.Writer
	o       rcOptions
	l       *lab.Lab
	hostCfg *rest.Config
	host    client.Client
	member  client.Client
}

func runRecoveryBench(ctx context.Context, out io.Writer, o rcOptions) (err error) {
	b := &rcBench{out: out, o: o}
	b.progress("starting the lab (host + 1 member, %d nodes, kubefed; node monitor grace period %s, kubelet Lease %ds)", o.nodes, o.grace, o.leaseSeconds)
	var down func() error
	if b.l, down, err = upLab(ctx, o.dir, lab.Options{Members: 1, Nodes: o.nodes,
		NodeMonitorGracePeriod: o.grace, NodeLeaseSeconds: o.leaseSeconds}, b.progress); err != nil {
		return err
	}
	defer downWith(&err, down)
	if err := b.connect(); err != nil {
		return err
	}

	var base *rcBaseline
	if o.baseline {
		base, err = b.baselineRun(ctx)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}

	b.progress("starting fedfailover in this process")
	op, err := startOperator(ctx, b.hostCfg, controllers.Options{}, rcMember)
	if err != nil {
		return err
	}
	defer func() {
		if serr := op.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.createPolicy(ctx, o.detections[0]); err != nil {
		return err
	}
	defer func() {
		pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: rcPolicy}}
		if derr := b.host.Delete(context.Background(), pol); derr != nil && !apierrors.IsNotFound(derr) && err == nil {
			err = derr
		}
	}()

	var runs []rcRun
	for _, slot := range rcSchedule(o.detections, o.runs) {
		if err := b.setDetection(ctx, slot.Detection); err != nil {
			return err
		}
		r, err := b.run(ctx, slot)
		if err != nil {
			return fmt.Errorf("%s run %d: %w", slot.Detection, slot.Run, err)
		}
		b.progress("%s run %d/%d node %s: power-off->taint %s (Ready=True then: %s), evidence->taint %s, evidence->Running %s, power-off->Running %s",
			slot.Detection, slot.Run, o.runs, r.Node, rcFmt(r.TaintSeconds), rcFmtBool(r.TaintedWhileReady), rcFmt(r.EvidenceToTaintSeconds),
			rcFmt(r.EvidenceToRunningSeconds), rcFmt(r.PoweroffToRunningSeconds))
		runs = append(runs, r)
	}
	return b.report(runs, base)
}

func (b *rcBench) progress(format string, args ...any) { progress(b.out, format, args...) }

// connect installs the FailoverPolicy CRD in the lab host and makes the
// host and member clients.
func (b *rcBench) connect() (err error) {
	if b.hostCfg, b.host, err = labHost(b.l); err != nil {
		return err
	}
	b.member, err = b.l.Client(rcMember)
	return err
}

// createWorkload creates a one-replica StatefulSet with an RWO volume in a
// fresh namespace and waits until its pod runs with the volume attached.
func (b *rcBench) createWorkload(ctx context.Context, ns string) (node, pv string, err error) {
	if _, err := b.l.CreateStatefulSetWithVolumes(ctx, rcMember, ns, rcWorkload, 1); err != nil {
		return "", "", err
	}
	err = poll(ctx, 2*time.Minute, rcWorkload+"-0 Running with its volume attached", func(ctx context.Context) (bool, string, error) {
		p, pvName, ok, why, err := b.replacement(ctx, ns, "")
		if err != nil || !ok {
			return false, why, nil //nolint:nilerr // a failed read is retried until the deadline
		}
		node, pv = p.Spec.NodeName, pvName
		return true, "", nil
	})
	return node, pv, err
}

// deleteWorkload deletes a run's namespace and PV without waiting.
func (b *rcBench) deleteWorkload(ns string) {
	ctx := context.Background()
	_ = b.member.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	_ = b.member.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%s-%s-0", ns, rcWorkload)}})
}

func rcHasOOSTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

func rcReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// baselineRun powers off the node of a StatefulSet pod with no operator
// running, watches it for --baseline-bound, then applies the out-of-service
// taint by hand and restores the node.
func (b *rcBench) baselineRun(ctx context.Context) (*rcBaseline, error) {
	ns := "bench-recovery-baseline"
	defer b.deleteWorkload(ns)
	node, pv, err := b.createWorkload(ctx, ns)
	if err != nil {
		return nil, err
	}
	base := &rcBaseline{Node: node}
	b.progress("baseline: %s-0 runs on %s; powering it off with no operator, watching %s", rcWorkload, node, b.o.baselineBound)
	powerOff := time.Now()
	if err := b.l.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		return nil, err
	}
	defer func() {
		if err := b.restoreBaselineNode(context.Background(), node); err != nil {
			b.progress("baseline: restoring %s: %v", node, err)
		}
	}()
	recovered, err := b.waitRunning(ctx, ns, node, pv, powerOff.Add(b.o.baselineBound))
	if err != nil {
		return nil, err
	}
	base.ObservedStuckSeconds = round1(time.Since(powerOff).Seconds())
	if recovered {
		base.Recovered = true
		base.PoweroffToRunning = ptr.To(base.ObservedStuckSeconds)
		b.progress("baseline: replacement Running %.1fs after power-off without fedfailover", base.ObservedStuckSeconds)
		return base, nil
	}
	base.PodState = b.podState(ctx, ns)
	b.progress("baseline: not recovered after %.1fs (%s); applying the out-of-service taint by hand", base.ObservedStuckSeconds, base.PodState)
	base.ManualTaintAfterStuck = base.ObservedStuckSeconds
	taintAt := time.Now()
	if err := b.setOutOfService(ctx, node, true); err != nil {
		return nil, err
	}
	ok, err := b.waitRunning(ctx, ns, node, pv, taintAt.Add(b.o.bound))
	if err != nil {
		return nil, err
	}
	base.ManualTaintRecovered = ok
	if ok {
		base.ManualTaintToRunning = ptr.To(round1(time.Since(taintAt).Seconds()))
	}
	b.progress("baseline: manual taint -> Running %s", rcFmt(base.ManualTaintToRunning))
	return base, nil
}

func (b *rcBench) setOutOfService(ctx context.Context, node string, on bool) error {
	n := &corev1.Node{}
	if err := b.member.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeOutOfService {
			taints = append(taints, t)
		}
	}
	if on {
		taints = append(taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	}
	n.Spec.Taints = taints
	return b.member.Patch(ctx, n, patch)
}

// restoreBaselineNode powers the node on, removes the hand-made taint and
// waits until it is Ready.
func (b *rcBench) restoreBaselineNode(ctx context.Context, node string) error {
	if err := b.l.Restore(ctx, node); err != nil {
		return err
	}
	if err := b.setOutOfService(ctx, node, false); err != nil {
		return err
	}
	return b.l.WaitNodeReady(ctx, b.member, node, corev1.ConditionTrue, 90*time.Second)
}

// policy is the node recovery policy the runs of a detection use.
func (b *rcBench) policy(d v1alpha1.NodeLossDetection) *v1alpha1.NodeRecoverySpec {
	return rcPolicySpec(b.o.notReadyFor, d)
}

func rcPolicySpec(notReadyFor time.Duration, d v1alpha1.NodeLossDetection) *v1alpha1.NodeRecoverySpec {
	pct := intstr.FromString("40%")
	return &v1alpha1.NodeRecoverySpec{
		NotReadyFor: v1alpha1.Duration(notReadyFor.String()), Detection: d, Method: v1alpha1.RecoveryMethodAuto,
		MaxUnhealthy: &pct, StormCooldown: "5s",
		Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true},
	}
}

func (b *rcBench) createPolicy(ctx context.Context, d v1alpha1.NodeLossDetection) error {
	p := &v1alpha1.FailoverPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: rcPolicy},
		Spec:       v1alpha1.FailoverPolicySpec{NodeRecovery: b.policy(d)},
	}
	return b.host.Create(ctx, p)
}

// setDetection sets the policy's detection for the next run and waits
// until fedfailover's node recovery has written the policy's status at the
// new generation: its cache, which every member pass reads the policy from,
// has the change then.
func (b *rcBench) setDetection(ctx context.Context, d v1alpha1.NodeLossDetection) error {
	p := &v1alpha1.FailoverPolicy{}
	if err := b.host.Get(ctx, client.ObjectKey{Name: rcPolicy}, p); err != nil {
		return err
	}
	if p.Spec.NodeRecovery.Detection != d {
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.NodeRecovery.Detection = d
		if err := b.host.Patch(ctx, p, patch); err != nil {
			return fmt.Errorf("setting the policy's detection to %s: %w", d, err)
		}
	}
	return poll(ctx, time.Minute, fmt.Sprintf("policy status at the generation with detection %s", d), func(ctx context.Context) (bool, string, error) {
		cur := &v1alpha1.FailoverPolicy{}
		if err := b.host.Get(ctx, client.ObjectKey{Name: rcPolicy}, cur); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionStormActive)
		if cur.Spec.NodeRecovery.Detection != d || c == nil || c.ObservedGeneration != cur.Generation {
			return false, fmt.Sprintf("detection %s, generation %d, StormActive %+v", cur.Spec.NodeRecovery.Detection, cur.Generation, c), nil
		}
		return true, "", nil
	})
}

// waitClean waits until every member node is Ready, without the
// out-of-service taint, and fedfailover has closed every NodeRecovery
// record of the member.
func (b *rcBench) waitClean(ctx context.Context) error {
	return poll(ctx, 90*time.Second, "every node Ready without the out-of-service taint, no active NodeRecovery", func(ctx context.Context) (bool, string, error) {
		nodes := &corev1.NodeList{}
		if err := b.member.List(ctx, nodes); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if lab.NodeReadyStatus(n) != corev1.ConditionTrue || rcHasOOSTaint(n) {
				return false, fmt.Sprintf("%s Ready=%s taints=%v", n.Name, lab.NodeReadyStatus(n), n.Spec.Taints), nil
			}
		}
		recs, err := b.records(ctx, "")
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		for i := range recs {
			if recs[i].Status.Phase != v1alpha1.RecoveryPhaseFinished {
				return false, fmt.Sprintf("NodeRecovery %s still %s", recs[i].Name, recs[i].Status.Phase), nil
			}
		}
		return true, "", nil
	})
}

// records lists the member's NodeRecovery records on the host, of one node
// when node is set.
func (b *rcBench) records(ctx context.Context, node string) ([]v1alpha1.NodeRecovery, error) {
	var list v1alpha1.NodeRecoveryList
	if err := b.host.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing NodeRecovery records: %w", err)
	}
	var out []v1alpha1.NodeRecovery
	for _, r := range list.Items {
		if r.Spec.Cluster == rcMember && (node == "" || r.Spec.Node == node) {
			out = append(out, r)
		}
	}
	return out, nil
}

// actedAt reads when fedfailover acted on the node from its active
// NodeRecovery record. The record's result (status.actedAt) is written
// right after the action, so it may lag the taint: poll briefly.
func (b *rcBench) actedAt(ctx context.Context, node string) (name string, at time.Time, err error) {
	err = poll(ctx, 10*time.Second, "NodeRecovery of "+node+" with status.actedAt", func(ctx context.Context) (bool, string, error) {
		recs, err := b.records(ctx, node)
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		for i := range recs {
			if st := recs[i].Status; st.Phase != v1alpha1.RecoveryPhaseFinished && st.ActedAt != nil {
				name, at = recs[i].Name, st.ActedAt.Time
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d records of the node, none active with actedAt", len(recs)), nil
	})
	return name, at, err
}

// run is one measured recovery with fedfailover.
func (b *rcBench) run(ctx context.Context, slot rcSlot) (r rcRun, err error) {
	r.Run, r.Detection = slot.Run, slot.Detection
	if err := b.waitClean(ctx); err != nil {
		return r, err
	}
	ns := fmt.Sprintf("bench-recovery-%s-%d", strings.ToLower(string(slot.Detection)), slot.Run)
	defer b.deleteWorkload(ns)
	node, pv, err := b.createWorkload(ctx, ns)
	if err != nil {
		return r, err
	}
	r.Node = node

	powerOff := time.Now()
	r.PowerOffAt = powerOff.UTC().Format(time.RFC3339Nano)
	if err := b.l.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		return r, err
	}
	evidence := time.Now()
	r.EvidenceWrittenSeconds = rcRound3(evidence.Sub(powerOff).Seconds())
	defer func() {
		if rerr := b.restore(context.Background(), node); rerr != nil && err == nil {
			err = rerr
		}
	}()

	var lost, tainted, running, oldGone, vaGone, scheduled, attached time.Time
	deadline := powerOff.Add(b.o.bound)
	for running.IsZero() && time.Now().Before(deadline) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n := &corev1.Node{}
		if err := b.member.Get(sctx, client.ObjectKey{Name: node}, n); err == nil {
			if c := rcReadyCondition(n); c != nil && c.Status != corev1.ConditionTrue && lost.IsZero() {
				r.NotReadySeconds = ptr.To(rcRound3(time.Since(powerOff).Seconds()))
				lost = c.LastTransitionTime.Add(b.o.notReadyFor)
			}
			if rcHasOOSTaint(n) && tainted.IsZero() {
				tainted = time.Now()
				r.TaintedWhileReady = ptr.To(lab.NodeReadyStatus(n) == corev1.ConditionTrue)
			}
		}
		if smp, err := b.sample(sctx, ns, node, pv); err == nil {
			now := time.Now()
			for _, st := range []struct {
				seen bool
				at   *time.Time
			}{
				{!tainted.IsZero() && !smp.oldPod, &oldGone}, {!tainted.IsZero() && !smp.oldVA, &vaGone},
				{smp.scheduled != "", &scheduled}, {smp.attached, &attached}, {smp.running != "", &running},
			} {
				if st.seen && st.at.IsZero() {
					*st.at = now
				}
			}
			if smp.running != "" {
				r.ReplacementNode = smp.running
			}
		}
		cancel()
		if running.IsZero() {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(rcSamplePace):
			}
		}
	}
	if !lost.IsZero() {
		r.LostSeconds = ptr.To(rcRound3(lost.Sub(powerOff).Seconds()))
	}
	fenced := rcFigureStart(slot.Detection, evidence, lost)
	since := func(at time.Time) *float64 {
		if at.IsZero() || fenced.IsZero() {
			return nil
		}
		return ptr.To(rcRound3(at.Sub(fenced).Seconds()))
	}
	if !tainted.IsZero() {
		r.TaintSeconds = ptr.To(rcRound3(tainted.Sub(powerOff).Seconds()))
		r.EvidenceToTaintSeconds = since(tainted)
		name, acted, err := b.actedAt(ctx, node)
		if err != nil {
			return r, err
		}
		r.Record, r.ActedAt = name, acted.UTC().Format(time.RFC3339)
		r.ActedSeconds = ptr.To(rcRound3(acted.Sub(powerOff).Seconds()))
	}
	for _, st := range []struct {
		at  time.Time
		out **float64
	}{{oldGone, &r.OldPodGoneSeconds}, {vaGone, &r.OldAttachmentGoneSeconds}, {scheduled, &r.ScheduledSeconds}, {attached, &r.AttachedSeconds}} {
		*st.out = since(st.at)
	}
	if !running.IsZero() {
		r.PoweroffToRunningSeconds = ptr.To(rcRound3(running.Sub(powerOff).Seconds()))
		r.EvidenceToRunningSeconds = since(running)
	}
	return r, nil
}

// restore powers the node back on; fedfailover must then remove its taint
// and close the record (checked by the next run's waitClean, and here for
// the last).
func (b *rcBench) restore(ctx context.Context, node string) error {
	if err := b.l.Restore(ctx, node); err != nil {
		return err
	}
	if err := b.l.WaitNodeReady(ctx, b.member, node, corev1.ConditionTrue, 90*time.Second); err != nil {
		return err
	}
	return b.waitClean(ctx)
}
