//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/lab"
)

// stuckWindow is how long baseline 1 watches the evicted StatefulSet pod stay
// stuck after its eviction. Kubernetes has no timer that would release it
// later (the pod waits for a kubelet that never comes back), so the window
// only has to outlast every periodic actor that could: pod GC (20 s period)
// and the attach-detach reconciler (which would otherwise force-detach after
// 6 min but still never delete the pod). 60 s is three pod-GC periods.
const stuckWindow = 60 * time.Second

// Baseline 1: a StatefulSet pod with an RWO volume on a powered-off node is
// not replaced until someone applies the out-of-service taint.
func TestBaselineStatefulSetOnPoweredOffNode(t *testing.T) {
	ctx := t.Context()
	const member, ns, name = "member1", "baseline-sts", "db"
	cl := theLab.MustClient(member)
	if _, err := theLab.CreateStatefulSetWithVolumes(ctx, member, ns, name, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespaceAndWait(t, cl, ns) }) // after the node is restored
	pod := name + "-0"
	var node, pv string
	eventually(t, 90*time.Second, "db-0 Running with its volume attached", func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, pod)
		if err != nil {
			return false, err.Error()
		}
		if !lab.PodReady(p) {
			return false, fmt.Sprintf("phase %s on %q", p.Status.Phase, p.Spec.NodeName)
		}
		node = p.Spec.NodeName
		return true, ""
	})
	pv, err := pvcVolume(ctx, cl, ns, lab.VolumeTemplateName+"-"+pod)
	if err != nil {
		t.Fatal(err)
	}
	if att, _, err := attachments(ctx, cl, pv); err != nil || !slices.Equal(att, []string{node}) {
		t.Fatalf("volume %s attached to %v (err %v), want only %s", pv, att, err, node)
	}
	t.Logf("db-0 runs on %s with %s attached", node, pv)
	t.Cleanup(func() { restoreNode(t, member, node) })

	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	// The lab played CAPI: the Machine is being deleted, infrastructure gone.
	m, err := theLab.Machine(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	infra := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
	if m.DeletionTimestamp == nil || infra == nil || infra.Status != metav1.ConditionFalse || infra.Reason != clusterv1.MachineInfrastructureDeletedReason {
		t.Fatalf("Machine %s evidence missing: deletionTimestamp=%v InfrastructureReady=%+v", node, m.DeletionTimestamp, infra)
	}
	notReady := eventually(t, 60*time.Second, node+" NotReady", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		s := lab.NodeReadyStatus(n)
		return s != corev1.ConditionTrue, "Ready=" + string(s)
	})
	t.Logf("%s NotReady %.1fs after power-off", node, notReady.Seconds())
	var uid string
	eventually(t, 2*time.Minute, "db-0 evicted (Terminating)", func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, pod)
		if err != nil {
			return false, err.Error()
		}
		uid = string(p.UID)
		return p.DeletionTimestamp != nil, "not terminating yet"
	})
	t.Logf("db-0 Terminating %.1fs after power-off", time.Since(powerOff).Seconds())
	// The point of the baseline: nothing replaces the pod.
	holds(t, stuckWindow, "db-0 stuck Terminating on the dead node", func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, pod)
		if err != nil {
			return false, "db-0: " + err.Error()
		}
		if string(p.UID) != uid || p.Spec.NodeName != node || lab.PodReady(p) {
			return false, fmt.Sprintf("db-0 replaced: uid %s node %s phase %s", p.UID, p.Spec.NodeName, p.Status.Phase)
		}
		att, _, err := attachments(ctx, cl, pv)
		if err != nil || slices.ContainsFunc(att, func(n string) bool { return n != node }) {
			return false, fmt.Sprintf("volume attached elsewhere: %v (err %v)", att, err)
		}
		return true, ""
	})
	baseline(t, "sts-poweroff-not-recovered", time.Since(powerOff))

	// What a human (or fedfailover) does once the node is known to be off.
	taintAt := time.Now()
	setOutOfService(t, member, node, true)
	eventually(t, 2*time.Minute, "db-0 Running on another node with its volume attached only there", func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, pod)
		if err != nil {
			return false, err.Error()
		}
		if !lab.PodReady(p) || p.Spec.NodeName == node {
			return false, fmt.Sprintf("db-0 %s on %q", p.Status.Phase, p.Spec.NodeName)
		}
		att, all, err := attachments(ctx, cl, pv)
		if err != nil {
			return false, err.Error()
		}
		if !slices.Equal(att, []string{p.Spec.NodeName}) || !slices.Equal(all, []string{p.Spec.NodeName}) {
			return false, fmt.Sprintf("attached to %v, attachments for %v", att, all)
		}
		return true, ""
	})
	baseline(t, "sts-out-of-service-recovery", time.Since(taintAt))
}

func setOutOfService(t *testing.T, member, node string, on bool) {
	t.Helper()
	cl := theLab.MustClient(member)
	ctx := context.Background()
	n := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	taints := n.Spec.Taints[:0]
	for _, tn := range n.Spec.Taints {
		if tn.Key != corev1.TaintNodeOutOfService {
			taints = append(taints, tn)
		}
	}
	if on {
		taints = append(taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	}
	n.Spec.Taints = taints
	if err := cl.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
}

// restoreNode powers a node back on and removes the out-of-service taint so
// the next baseline finds a healthy lab.
func restoreNode(t *testing.T, member, node string) {
	ctx := context.Background()
	if err := theLab.Restore(ctx, node); err != nil {
		t.Errorf("restore %s: %v", node, err)
		return
	}
	setOutOfService(t, member, node, false)
	if err := theLab.WaitNodeReady(ctx, theLab.MustClient(member), node, corev1.ConditionTrue, 60*time.Second); err != nil {
		t.Errorf("restore %s: %v", node, err)
	}
}

// Baseline 2: a FederatedDeployment spread by an RSP over two members, one
// without room. kubefed schedules the unschedulable replicas on the other
// member only after its fixed 60 s threshold (and leaves them desired, as
// overflow, on the full member too).
func TestBaselineKubefedRSPMovesReplicasAfterThreshold(t *testing.T) {
	ctx := t.Context()
	const ns, name, full, total = "baseline-rsp", "web", "member2", 6
	host := theLab.MustClient(lab.HostName)
	m1, m2 := theLab.MustClient("member1"), theLab.MustClient(full)
	if err := theLab.ExhaustCapacity(ctx, full, lab.ExhaustCordon); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := theLab.RestoreCapacity(context.Background(), full); err != nil {
			t.Errorf("restore capacity: %v", err)
		}
	})
	if err := theLab.ApplyYAML(ctx, lab.HostName, lab.FederatedDeploymentYAML(ns, name, total, theLab.Members())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, k := range []string{"ReplicaSchedulingPreference", "FederatedDeployment"} {
			u := &unstructured.Unstructured{}
			gv := "types.kubefed.io/v1beta1"
			if k == "ReplicaSchedulingPreference" {
				gv = "scheduling.kubefed.io/v1alpha1"
			}
			u.SetAPIVersion(gv)
			u.SetKind(k)
			u.SetNamespace(ns)
			u.SetName(name)
			_ = host.Delete(context.Background(), u)
		}
	})
	// The RSP first splits the replicas half and half; member2's stay Pending.
	replicas := func(ctx context.Context, cl client.Client) (spec, ready int32, err error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return 0, 0, err
		}
		if d.Spec.Replicas != nil {
			spec = *d.Spec.Replicas
		}
		return spec, d.Status.ReadyReplicas, nil
	}
	eventually(t, 90*time.Second, "RSP split 3/3", func(ctx context.Context) (bool, string) {
		s1, r1, err1 := replicas(ctx, m1)
		s2, _, err2 := replicas(ctx, m2)
		if err1 != nil || err2 != nil {
			return false, fmt.Sprintf("member1: %v, member2: %v", err1, err2)
		}
		return s1 == total/2 && r1 == total/2 && s2 == total/2, fmt.Sprintf("member1 %d (ready %d), member2 %d", s1, r1, s2)
	})
	var unschedulableSince time.Time
	eventually(t, 90*time.Second, "member2 replicas Unschedulable", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := m2.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					if unschedulableSince.IsZero() || c.LastTransitionTime.Time.Before(unschedulableSince) {
						unschedulableSince = c.LastTransitionTime.Time
					}
				}
			}
		}
		return !unschedulableSince.IsZero(), fmt.Sprintf("%d pods in member2, none unschedulable", len(pods.Items))
	})
	t.Logf("member2 pods unschedulable since %s", unschedulableSince.Format(time.RFC3339))
	eventually(t, 4*time.Minute, fmt.Sprintf("all %d replicas ready in member1", total), func(ctx context.Context) (bool, string) {
		s1, r1, err := replicas(ctx, m1)
		if err != nil {
			return false, err.Error()
		}
		return s1 == total && r1 == total, fmt.Sprintf("member1 %d (ready %d)", s1, r1)
	})
	moved := time.Since(unschedulableSince)
	baseline(t, "kubefed-rsp-move-unschedulable", moved)
	// kubefed's podanalyzer ignores unschedulable pods younger than 60 s.
	if moved < 55*time.Second {
		t.Fatalf("replicas moved after %.1fs; kubefed's 60 s unschedulable threshold should have held them", moved.Seconds())
	}
	// kubefed adds the planner's overflow back to the full cluster: member2
	// keeps its Pending replicas, so the federation runs total+3 desired
	// replicas instead of moving them.
	s2, r2, err := replicas(ctx, m2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("member2 still wants %d replicas (%d ready): kubefed keeps the overflow in place", s2, r2)
	if r2 != 0 {
		t.Fatalf("member2 is cordoned but reports %d ready replicas", r2)
	}
}

// Baseline 3: a partitioned node that heals loses nothing; its pods return
// to Running (same pods, same node, volumes still attached there).
func TestBaselinePartitionHeals(t *testing.T) {
	ctx := t.Context()
	const member, ns = "member2", "baseline-partition"
	cl := theLab.MustClient(member)
	node := lab.NodeName(member, 1)
	if _, err := theLab.CreateDeploymentWithVolume(ctx, member, ns, "app"); err != nil {
		t.Fatal(err)
	}
	// Its pod is pinned to the node: left behind, it would be a claim no
	// later recovery of that node can ever see replaced.
	t.Cleanup(func() { deleteNamespaceAndWait(t, cl, ns) })
	// Pin the stateful Deployment to the node to partition.
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	if err := cl.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{} // pod uid -> name
	eventually(t, 90*time.Second, "app pod Running on "+node, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		clear(before)
		for _, p := range pods.Items {
			if lab.PodReady(&p) && p.Spec.NodeName == node {
				before[string(p.UID)] = p.Name
			}
		}
		return len(before) == 1 && len(pods.Items) == 1, fmt.Sprintf("%d pods, %d ready on %s", len(pods.Items), len(before), node)
	})
	pv, err := pvcVolume(ctx, cl, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) })
	start := time.Now()
	eventually(t, 60*time.Second, node+" NotReady while partitioned", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		s := lab.NodeReadyStatus(n)
		return s != corev1.ConditionTrue, "Ready=" + string(s)
	})
	t.Logf("%s NotReady %.1fs into the partition", node, time.Since(start).Seconds())
	if err := theLab.Heal(node); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	eventually(t, 90*time.Second, node+" Ready and the same pod Running again", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			return false, "node not Ready"
		}
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if _, ok := before[string(p.UID)]; ok && lab.PodReady(&p) && p.Spec.NodeName == node {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods, original not Running", len(pods.Items))
	})
	baseline(t, "partition-heal-recovery", time.Since(healed))
	// Nothing lost: the claim is still bound to the same volume, attached to
	// the same node only.
	if got, err := pvcVolume(ctx, cl, ns, "app"); err != nil || got != pv {
		t.Fatalf("claim now bound to %q (err %v), want %s", got, err, pv)
	}
	if att, all, err := attachments(ctx, cl, pv); err != nil || !slices.Equal(att, []string{node}) || !slices.Equal(all, []string{node}) {
		t.Fatalf("volume %s attached to %v, attachments %v (err %v), want only %s", pv, att, all, err, node)
	}
}
