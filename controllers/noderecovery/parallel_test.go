package noderecovery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// TestFencedNodePodsDeletedInParallel: a fenced Node's pods are
// force-deleted concurrently, on the proof the pass made for the Node. One
// at a time, a goal-size lab node's hundred pods held its member's pass for
// 15 s, and each loss found on that member meanwhile waited as long for its
// taint (taint p99 84 s). Each delete here is held until a second one is in
// flight, or for 5 s: deletes made one at a time never get there.
func TestFencedNodePodsDeletedInParallel(t *testing.T) {
	objs := []client.Object{lostNode("n1", t0.Add(-time.Minute)), readyNode("n2")}
	const pods = 8
	for i := range pods {
		claim := fmt.Sprintf("data-db-%d", i)
		objs = append(objs, claimPod(fmt.Sprintf("db-%d", i), "n1", claim, true), boundClaim(claim, fmt.Sprintf("pv-db-%d", i)))
	}
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(), objs...)
	var inFlight, most atomic.Int32
	fm := w.r.members.(*fakeMembers)
	fm.client = interceptor.NewClient(w.member.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				for deadline := time.Now().Add(5 * time.Second); most.Load() < 2 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	w.passLost()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("n1 not tainted")
	}
	if got := most.Load(); got < 2 {
		t.Errorf("at most %d pod delete in flight, want several: the pods went one at a time", got)
	}
	for i := range pods {
		if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("db-%d", i)}) {
			t.Errorf("pod db-%d of the fenced node not force-deleted", i)
		}
	}
}

// TestEveryLostNodeTaintedBeforeAnyPodDeleted: a pass taints every node it
// proves fenced before it deletes any node's pods. Deleting a node's
// hundred pods first kept the next lost node of the same pass waiting
// seconds for its taint (behind the deletes and the member's rate limit).
func TestEveryLostNodeTaintedBeforeAnyPodDeleted(t *testing.T) {
	second := lostNode("n2", t0.Add(-time.Minute))
	second.Spec.ProviderID = "kwok://n2"
	objs := []client.Object{lostNode("n1", t0.Add(-time.Minute)), second, readyNode("n3")}
	for _, node := range []string{"n1", "n2"} {
		for i := range 3 {
			claim := fmt.Sprintf("data-%s-%d", node, i)
			objs = append(objs, claimPod(fmt.Sprintf("db-%s-%d", node, i), node, claim, true), boundClaim(claim, "pv-"+claim))
		}
	}
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(), objs...)
	fm := w.r.members.(*fakeMembers)
	m2 := deletedMachine()
	m2.Name, m2.UID, m2.Spec.ProviderID, m2.Status.NodeRef.Name = "n2", "uid-machine-n2", "kwok://n2", "n2"
	// Created, then deleted: its finalizer holds it deleting, as the fake
	// client refuses to create an object already deleting.
	live := m2.DeepCopy()
	live.DeletionTimestamp = nil
	if err := w.host.Create(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if err := w.host.Delete(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	fm.machines["n2"] = m2

	var firstDelete sync.Once
	untainted := []string{"(no pod deleted)"}
	fm.client = interceptor.NewClient(w.member.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				firstDelete.Do(func() {
					untainted = nil
					for _, name := range []string{"n1", "n2"} {
						n := &corev1.Node{}
						if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil || !nodeHasOOSTaint(n) {
							untainted = append(untainted, name)
						}
					}
				})
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	w.passLost()
	if len(untainted) > 0 {
		t.Errorf("at the pass's first pod delete, lost nodes %v had no out-of-service taint yet", untainted)
	}
	for _, node := range []string{"n1", "n2"} {
		if !nodeHasOOSTaint(w.node(node)) {
			t.Errorf("%s not tainted", node)
		}
		for i := range 3 {
			if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("db-%s-%d", node, i)}) {
				t.Errorf("pod db-%s-%d of the fenced node not force-deleted", node, i)
			}
		}
	}
}
