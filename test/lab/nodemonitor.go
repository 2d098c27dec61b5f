package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The lab's node monitor stands in for kube-controller-manager's
// node-lifecycle controller on labs that run without it (NoNodeLifecycle),
// for the lab's own nodes only (static bulk nodes have no lease and stay as
// written). Like that controller it judges a node by when it last saw the
// node's Lease change, on its own clock, never by the times written in it:
// once the Lease has not changed for the node monitor grace period, the
// node's conditions become Unknown (reason NodeStatusUnknown), its pods'
// Ready conditions False, and it gets the unreachable NoSchedule and
// NoExecute taints; once the kubelet (kwok)
// reports Ready again, the taints go. The taint-eviction controller, still
// running, evicts the pods that do not tolerate the NoExecute taint.

// Taint keys and the condition reason the node-lifecycle controller uses.
const (
	UnreachableTaint  = "node.kubernetes.io/unreachable"
	nodeStatusUnknown = "NodeStatusUnknown"
)

// leaseSighting is when the monitor last saw a node's Lease change.
type leaseSighting struct {
	resourceVersion string
	changed         time.Time
	// marked: the monitor made the node unreachable and has not undone it.
	marked bool
	// admitted: the monitor saw the node Ready without the not-ready
	// taint the API server puts on every new Node; a new Lease (a node
	// replaced under the same name) undoes it.
	admitted bool
	leaseUID types.UID
}

// monitorAction is what the node monitor does to one node.
type monitorAction int

const (
	monitorNone monitorAction = iota
	// monitorMarkUnreachable: the Lease is stale; the conditions become
	// Unknown and the unreachable taints are added.
	monitorMarkUnreachable
	// monitorUntaint: the node reports Ready again; the unreachable taints
	// are removed.
	monitorUntaint
)

// judgeNode decides from the node's Ready status, whether it carries the
// unreachable taints, and how long ago (monitor's clock) its Lease last
// changed.
func judgeNode(ready corev1.ConditionStatus, tainted bool, sinceLeaseChange, grace time.Duration) monitorAction {
	switch {
	case sinceLeaseChange > grace && (ready != corev1.ConditionUnknown || !tainted):
		return monitorMarkUnreachable
	case sinceLeaseChange <= grace && ready == corev1.ConditionTrue && tainted:
		return monitorUntaint
	}
	return monitorNone
}

// markUnreachable sets a node's kubelet conditions to Unknown, as the
// node-lifecycle controller does when a node stops posting status: status,
// reason and message change, the transition time is now when the status
// changed, the heartbeat time is kept.
func markUnreachable(st *corev1.NodeStatus, now metav1.Time) {
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		i := slices.IndexFunc(st.Conditions, func(c corev1.NodeCondition) bool { return c.Type == t })
		if i < 0 {
			st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: t, LastHeartbeatTime: now})
			i = len(st.Conditions) - 1
		}
		c := &st.Conditions[i]
		if c.Status != corev1.ConditionUnknown {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, nodeStatusUnknown, "Kubelet stopped posting node status."
	}
}

// unreachableTaints is spec.taints with the unreachable NoSchedule and
// NoExecute taints added (on) or removed (off); changed says whether it
// differs.
func unreachableTaints(taints []corev1.Taint, on bool, now metav1.Time) (out []corev1.Taint, changed bool) {
	out = slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == UnreachableTaint })
	if on {
		out = append(out,
			corev1.Taint{Key: UnreachableTaint, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: UnreachableTaint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		changed = !hasUnreachableTaints(taints)
	} else {
		changed = len(out) != len(taints)
	}
	return out, changed
}

// hasUnreachableTaints reports both unreachable taints present.
func hasUnreachableTaints(taints []corev1.Taint) bool {
	n := 0
	for _, t := range taints {
		if t.Key == UnreachableTaint && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
			n++
		}
	}
	return n == 2
}

// monitorPeriod is how often the node monitor looks (the lab's
// kube-controller-manager --node-monitor-period).
const monitorPeriod = 2 * time.Second

// monitorNodesOnce runs one pass of the node monitor over a member's lab
// nodes: one list of the member's node Leases (only kwok-run nodes have
// one) and a read of a node only when its Lease is stale or the monitor
// has marked it.
func (l *Lab) monitorNodesOnce(ctx context.Context, st *State, c *ClusterState) error {
	if p := st.Proc(c.Name + "/" + CompAPIServer); p == nil || procState(p.PID) != ProcRunning {
		return nil // member API server down on purpose
	}
	cl, err := l.Client(c.Name)
	if err != nil {
		return err
	}
	var leases coordinationv1.LeaseList
	if err := cl.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease)); err != nil {
		return err
	}
	rv, uids := map[string]string{}, map[string]types.UID{}
	for _, x := range leases.Items {
		rv[x.Name], uids[x.Name] = x.ResourceVersion, x.UID
	}
	now := time.Now()
	for _, n := range c.Nodes {
		key := c.Name + "/" + n.Name
		l.mu.Lock()
		if l.leases == nil {
			l.leases = map[string]leaseSighting{}
		}
		seen, ok := l.leases[key]
		if !ok || seen.resourceVersion != rv[n.Name] {
			seen.resourceVersion, seen.changed = rv[n.Name], now
			if seen.leaseUID != uids[n.Name] {
				seen.leaseUID, seen.admitted = uids[n.Name], false
			}
			l.leases[key] = seen
		}
		l.mu.Unlock()
		since := now.Sub(seen.changed)
		if since <= l.opts.NodeMonitorGracePeriod && !seen.marked && seen.admitted {
			continue
		}
		node := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !seen.admitted && NodeReadyStatus(node) == corev1.ConditionTrue {
			if err := admitNode(ctx, cl, node); err != nil {
				return fmt.Errorf("%s: node %s: %w", c.Name, n.Name, err)
			}
			seen.admitted = true
			l.mu.Lock()
			l.leases[key] = seen
			l.mu.Unlock()
		}
		var on bool
		switch judgeNode(NodeReadyStatus(node), hasUnreachableTaints(node.Spec.Taints), since, l.opts.NodeMonitorGracePeriod) {
		case monitorMarkUnreachable:
			on = true
		case monitorUntaint:
			on = false
		default:
			continue
		}
		if err := l.setUnreachable(ctx, cl, node, on); err != nil {
			return fmt.Errorf("%s: node %s (unreachable %t): %w", c.Name, n.Name, on, err)
		}
		l.mu.Lock()
		seen.marked = on
		l.leases[key] = seen
		l.mu.Unlock()
	}
	return nil
}

// admitNode removes the not-ready NoSchedule taint the API server puts on
// every new Node (TaintNodesByCondition) from a node its kubelet reports
// Ready, as the node-lifecycle controller does; without it no pod would
// ever be scheduled on the lab's nodes.
func admitNode(ctx context.Context, cl client.Client, node *corev1.Node) error {
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
	})
	if len(taints) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = taints
	return ignoreNotFound(cl.Update(ctx, node))
}

// setUnreachable writes the status (on only) and then the taints, each an
// optimistic update: on a conflict the error is returned and the monitor's
// mark left as it was, so the next pass tries again.
func (l *Lab) setUnreachable(ctx context.Context, cl client.Client, node *corev1.Node, on bool) error {
	now := metav1.Now()
	if on && NodeReadyStatus(node) != corev1.ConditionUnknown {
		markUnreachable(&node.Status, now)
		if err := cl.Status().Update(ctx, node); err != nil {
			return ignoreNotFound(err)
		}
		l.logf("lab: node %s: lease not renewed for %s, conditions Unknown", node.Name, l.opts.NodeMonitorGracePeriod)
		if err := markPodsNotReady(ctx, cl, node.Name, now); err != nil {
			return err
		}
	}
	taints, changed := unreachableTaints(node.Spec.Taints, on, now)
	if !changed {
		return nil
	}
	node.Spec.Taints = taints
	return ignoreNotFound(cl.Update(ctx, node))
}

// markPodsNotReady sets the Ready condition of the node's pods False, as
// the node-lifecycle controller does for a node that stopped posting
// status (the kubelet sets it again when it is back).
func markPodsNotReady(ctx context.Context, cl client.Client, node string, now metav1.Time) error {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !podNotReady(&p.Status, now) {
			continue
		}
		if err := cl.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("pod %s/%s not ready: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// podNotReady turns a pod's Ready condition False; it says whether it
// changed.
func podNotReady(st *corev1.PodStatus, now metav1.Time) bool {
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, now
			return true
		}
	}
	return false
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
