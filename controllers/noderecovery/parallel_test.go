package noderecovery

import (
	"context"
	"fmt"
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
