package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func kwokKey(cluster, node string) string { return cluster + "/" + CompKwok + "/" + node }

// findNode returns the member and node state of a node name.
func (l *Lab) findNode(node string) (*State, *ClusterState, *NodeState, *Proc, error) {
	st, err := l.State()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c, n := st.NodeCluster(node)
	if c == nil {
		return nil, nil, nil, nil, fmt.Errorf("no node %q in the lab", node)
	}
	return st, c, n, st.Proc(kwokKey(c.Name, node)), nil
}

// PowerOff switches a node off: its kwok is SIGKILLed (lease and status stop,
// its pods are never finished) and the chosen evidence is written to its
// Machine.
func (l *Lab) PowerOff(ctx context.Context, node string, ev Evidence) error {
	_, c, _, p, err := l.findNode(node)
	if err != nil {
		return err
	}
	if p != nil {
		stopProc(p, 0)
	}
	if err := l.setEvidence(c.Name, node, string(ev)); err != nil {
		return err
	}
	return l.applyEvidence(ctx, node, ev)
}

// ApplyEvidence writes the evidence PowerOff leaves on a node's Machine
// without switching the node off: its kwok keeps running and renewing its
// Lease, as a node does whose Machine was deleted by mistake or whose
// provider reports it off wrongly. Restore clears it.
func (l *Lab) ApplyEvidence(ctx context.Context, node string, ev Evidence) error {
	_, c, _, _, err := l.findNode(node)
	if err != nil {
		return err
	}
	if err := l.setEvidence(c.Name, node, string(ev)); err != nil {
		return err
	}
	return l.applyEvidence(ctx, node, ev)
}

// Faulted reports whether a node is powered off, partitioned or carries
// power-off evidence on its Machine, as the lab left it: its Node may still
// report Ready=True (the member marks it NotReady only after the grace
// period), so only the lab knows. Restore undoes all three.
func (l *Lab) Faulted(node string) (bool, error) {
	_, _, n, p, err := l.findNode(node)
	if err != nil {
		return false, err
	}
	return n.Evidence != "" || p == nil || procState(p.PID) != ProcRunning, nil
}

// Partition freezes a node's kwok (SIGSTOP): the node looks dead to the
// control plane but keeps its state, as behind a network partition.
func (l *Lab) Partition(node string) error {
	_, _, _, p, err := l.findNode(node)
	if err != nil {
		return err
	}
	if p == nil || procState(p.PID) != ProcRunning {
		return fmt.Errorf("node %s is not running (kwok %v)", node, p)
	}
	signalGroup(p.PID, syscall.SIGSTOP)
	return nil
}

// Heal ends a partition (SIGCONT).
func (l *Lab) Heal(node string) error {
	_, _, _, p, err := l.findNode(node)
	if err != nil {
		return err
	}
	if p == nil || procState(p.PID) == ProcGone {
		return fmt.Errorf("node %s is powered off; use restore", node)
	}
	signalGroup(p.PID, syscall.SIGCONT)
	return nil
}

// Restore powers a node back on: kwok restarts for the same Node object and
// its Machine evidence is cleared. A partitioned node is healed.
func (l *Lab) Restore(ctx context.Context, node string) error {
	_, c, n, p, err := l.findNode(node)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("node %s has no kwok process record", node)
	}
	// The infrastructure reports the power back before the node's kubelet
	// runs again, as a provider does: evidence never outlives the off.
	if err := l.clearEvidence(ctx, c.Name, *n); err != nil {
		return err
	}
	if err := l.setEvidence(c.Name, node, ""); err != nil {
		return err
	}
	switch procState(p.PID) {
	case ProcStopped:
		signalGroup(p.PID, syscall.SIGCONT)
	case ProcGone:
		if _, err := l.restartProc(ctx, p.Key(), nil); err != nil {
			return err
		}
	}
	return nil
}

// Replace swaps a dead node for a fresh one of the same name: the old Node
// object is deleted (its pods are garbage-collected by Kubernetes), a new
// Node and Machine are created and kwok starts for it.
func (l *Lab) Replace(ctx context.Context, node string) error {
	_, c, n, p, err := l.findNode(node)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("node %s has no kwok process record", node)
	}
	stopProc(p, 0)
	cl, err := l.Client(c.Name)
	if err != nil {
		return err
	}
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := cl.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := pollUntil(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})), nil
	}); err != nil {
		return fmt.Errorf("old node %s not deleted: %w", node, err)
	}
	// The replacement Machine exists before its Node registers and its
	// kubelet runs, as Cluster API creates it.
	if err := l.clearEvidence(ctx, c.Name, *n); err != nil {
		return err
	}
	if err := l.setEvidence(c.Name, node, ""); err != nil {
		return err
	}
	if err := l.createNode(ctx, cl, c, *n); err != nil {
		return err
	}
	_, err = l.restartProc(ctx, p.Key(), nil)
	return err
}

func (l *Lab) setEvidence(cluster, node, ev string) error {
	return UpdateState(l.Dir, func(s *State) error {
		_, n := s.NodeCluster(node)
		if n != nil {
			n.Evidence = ev
		}
		return nil
	})
}

// KillAPIServer SIGKILLs a cluster's kube-apiserver (whole-member failure as
// seen from the host and kubefed).
func (l *Lab) KillAPIServer(cluster string) error { return l.killComponent(cluster, CompAPIServer) }

// killComponent SIGKILLs one control-plane process of a cluster.
func (l *Lab) killComponent(cluster, comp string) error {
	st, err := l.State()
	if err != nil {
		return err
	}
	p := st.Proc(cluster + "/" + comp)
	if p == nil {
		return fmt.Errorf("no %s for cluster %q", comp, cluster)
	}
	stopProc(p, 0)
	return nil
}

// RestartAPIServer starts a killed kube-apiserver again and waits for /readyz.
func (l *Lab) RestartAPIServer(ctx context.Context, cluster string) error {
	c, err := l.clusterState(cluster)
	if err != nil {
		return err
	}
	cs, err := l.clientset(c)
	if err != nil {
		return err
	}
	_, err = l.restartProc(ctx, cluster+"/"+CompAPIServer, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	return err
}

// SchedulerLogPath is a cluster's kube-scheduler log.
func SchedulerLogPath(c *ClusterState) string {
	return filepath.Join(c.Dir, "logs", "kube-scheduler.log")
}

// Capacity exhaustion modes.
const (
	// ExhaustCordon marks every node unschedulable: running pods stay, new
	// pods stay Pending (Unschedulable).
	ExhaustCordon = "cordon"
	// ExhaustFill schedules one filler pod per node requesting all CPU that
	// is still free, so the nodes stay schedulable but full.
	ExhaustFill = "fill"
)

// LabNamespace holds objects the lab itself creates in members (fillers).
const LabNamespace = "fedfailover-lab"

// ExhaustCapacity leaves a member without room for new pods. When it
// fails it restores the member's capacity, so that no caller leaves a
// member cordoned or filled behind it.
func (l *Lab) ExhaustCapacity(ctx context.Context, cluster, mode string) error {
	if err := l.exhaustCapacity(ctx, cluster, mode); err != nil {
		if rerr := l.RestoreCapacity(context.WithoutCancel(ctx), cluster); rerr != nil {
			return errors.Join(err, fmt.Errorf("restoring the capacity of %s: %w", cluster, rerr))
		}
		return err
	}
	return nil
}

func (l *Lab) exhaustCapacity(ctx context.Context, cluster, mode string) error {
	c, err := l.memberState(cluster)
	if err != nil {
		return err
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	switch mode {
	case ExhaustCordon, "":
		err = l.setUnschedulable(ctx, cl, c, true)
	case ExhaustFill:
		err = l.fillNodes(ctx, cl, c)
	default:
		return fmt.Errorf("unknown exhaust mode %q (want %s or %s)", mode, ExhaustCordon, ExhaustFill)
	}
	if err != nil {
		return err
	}
	return probeUnschedulable(ctx, cl)
}

// probeVerdictWithin bounds how long the capacity probe waits for the
// scheduler to see the nodes change. After its API server restarts, a
// member's kube-scheduler can lag it by more than a minute: its informers
// come back on client-go's reflector backoff (up to 30 s, doubled by
// jitter), and meanwhile it schedules on the old view of the nodes (seen
// on the lab: probes placed for 15 s on nodes cordoned 82 s after a
// restart) or does not see new pods at all.
const probeVerdictWithin = 2 * time.Minute

// probeUnschedulable returns once the scheduler itself reports that a small
// pod does not fit, so callers never race the scheduler's view of the nodes.
// A probe scheduled anyway was placed before the scheduler saw the nodes
// change: it is deleted and another one tried, within probeVerdictWithin.
func probeUnschedulable(ctx context.Context, cl client.Client) error {
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LabNamespace}}); err != nil {
		return err
	}
	var placed string
	probes, unanswered := 0, 0
	err := pollUntil(ctx, probeVerdictWithin, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		unschedulable, node, err := probeOnce(ctx, cl)
		probes++
		switch {
		case node != "":
			placed = node
		case !unschedulable && err == nil:
			unanswered++
		}
		return unschedulable, err
	})
	switch {
	case err != nil && placed != "":
		return fmt.Errorf("capacity probe was scheduled to %s (%d probes, %d without a verdict): the member still has room: %w", placed, probes, unanswered, err)
	case err != nil:
		return fmt.Errorf("the member's scheduler gave none of %d capacity probes a verdict: %w", probes, err)
	}
	return nil
}

// probeOnce creates one probe pod and deletes it again; it reports whether
// the scheduler found it unschedulable within 5 s, or the node it chose.
func probeOnce(ctx context.Context, cl client.Client) (unschedulable bool, node string, err error) {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lab-capacity-probe-", Namespace: LabNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "probe", Image: PauseImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
		}}},
	}
	if err := cl.Create(ctx, probe); err != nil {
		return false, "", err
	}
	defer func() {
		zero := int64(0)
		_ = cl.Delete(context.Background(), probe, &client.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	err = pollUntil(ctx, 5*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return false, err
		}
		if node = p.Spec.NodeName; node != "" {
			return true, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable = true
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && !unschedulable && node == "" {
		return false, "", nil // no verdict yet: try again
	}
	return unschedulable, node, err
}

// RestoreCapacity undoes ExhaustCapacity (both modes).
func (l *Lab) RestoreCapacity(ctx context.Context, cluster string) error {
	c, err := l.memberState(cluster)
	if err != nil {
		return err
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	if err := l.setUnschedulable(ctx, cl, c, false); err != nil {
		return err
	}
	err = cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(LabNamespace), client.MatchingLabels{"app": "lab-filler"})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func (l *Lab) setUnschedulable(ctx context.Context, cl client.Client, c *ClusterState, on bool) error {
	for _, n := range c.Nodes {
		node := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return err
		}
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = on
		if err := cl.Patch(ctx, node, patch); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) fillNodes(ctx context.Context, cl client.Client, c *ClusterState) error {
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LabNamespace}}); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		node := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return err
		}
		free := node.Status.Allocatable.Cpu().DeepCopy()
		for _, p := range pods.Items {
			if p.Spec.NodeName != n.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, ctr := range p.Spec.Containers {
				free.Sub(*ctr.Resources.Requests.Cpu())
			}
		}
		if free.Sign() <= 0 {
			continue
		}
		filler := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "lab-filler-" + n.Name, Namespace: LabNamespace, Labels: map[string]string{"app": "lab-filler"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"kubernetes.io/hostname": n.Name},
				Containers: []corev1.Container{{
					Name: "filler", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: free}},
				}},
			},
		}
		if err := createIgnoreExists(ctx, cl, filler); err != nil {
			return err
		}
	}
	return nil
}
