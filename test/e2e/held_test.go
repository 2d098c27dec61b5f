//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// heldFinalizer is a foreign finalizer (a backup agent, a service mesh)
// that keeps a deleted pod object until its owner removes it.
const heldFinalizer = "backup.example.com/snapshot"

// A Deployment pod with an RWO volume, held by a foreign finalizer, on a
// powered-off node recovered with the ForceDelete method: the pod is
// force-deleted once and then waited for, and the recovery goes on to the
// node's VolumeAttachments. The record says which finalizer it waits for.
// Before the member cache kept finalizers, the held pod was force-deleted
// again every pass and the attachment step never came.
func TestNodeRecoveryForceDeletePastAPodHeldByAFinalizer(t *testing.T) {
	ctx := t.Context()
	const cluster, ns, app = "member2", "nr-held", "app"
	startNodeRecovery(t)
	nrPolicy(t, "nr-held", func(s *v1alpha1.NodeRecoverySpec) { s.Method = v1alpha1.RecoveryMethodForceDelete })
	cl := theLab.MustClient(cluster)
	if _, err := theLab.CreateDeploymentWithVolume(ctx, cluster, ns, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pod := runningPod(t, cl, ns, app, 90*time.Second, "")
	node := pod.Spec.NodeName
	pv, err := pvcVolume(ctx, cl, ns, app)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "volume attached", func(ctx context.Context) (bool, string) { return volumeOnlyOn(ctx, cl, pv, node) })
	var va storagev1.VolumeAttachment
	vas := &storagev1.VolumeAttachmentList{}
	if err := cl.List(ctx, vas); err != nil {
		t.Fatal(err)
	}
	for _, x := range vas.Items {
		if x.Spec.NodeName == node && x.Spec.Source.PersistentVolumeName != nil && *x.Spec.Source.PersistentVolumeName == pv {
			va = x
		}
	}
	if va.UID == "" {
		t.Fatalf("no VolumeAttachment of %s on %s", pv, node)
	}
	hold(t, cl, pod)
	restoreAfter(t, cluster, node)

	start := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodForceDelete, "MachineInfrastructureDeleted")
	want := fmt.Sprintf("waiting for finalizer %s on pod %s/%s", heldFinalizer, ns, pod.Name)
	eventually(t, 90*time.Second, "the record waiting for the held pod's finalizer", func(ctx context.Context) (bool, string) {
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return rec != nil && strings.Contains(rec.Status.Message, want), describeRecord(rec)
	})
	// The held pod is still there, force-deleted (grace 0) once, not
	// replaced under its UID.
	p, err := getPod(ctx, cl, ns, pod.Name)
	if err != nil || p.UID != pod.UID || p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("held pod %s: %+v (err %v), want it force-deleted and kept by its finalizer", pod.Name, p, err)
	}
	// The recovery goes on to the attachment step: the dead node's
	// VolumeAttachment is deleted while the held pod still exists. (Whether
	// the replacement then gets the volume is the attach-detach
	// controller's: it may attach it to the dead node again while the held
	// pod's stale status says its containers run. docs/safety.md.)
	eventually(t, 60*time.Second, "the dead node's VolumeAttachment deleted", func(ctx context.Context) (bool, string) {
		cur := &storagev1.VolumeAttachment{}
		err := cl.Get(ctx, client.ObjectKey{Name: va.Name}, cur)
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != va.UID) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("VolumeAttachment %s (uid %s) still there, deleting=%v", va.Name, va.UID, cur.DeletionTimestamp != nil)
	})
	if p, err := getPod(ctx, cl, ns, pod.Name); err != nil || p.UID != pod.UID {
		t.Fatalf("held pod gone before its finalizer was removed (err %v)", err)
	}
	t.Logf("the dead node's VolumeAttachment deleted %.1fs after power-off, the held pod still waiting for %s", time.Since(start).Seconds(), heldFinalizer)
}

// hold adds heldFinalizer to the pod and removes it when the test ends.
func hold(t *testing.T, cl client.Client, pod *corev1.Pod) {
	t.Helper()
	patch := client.MergeFrom(pod.DeepCopy())
	held := pod.DeepCopy()
	held.Finalizers = append(held.Finalizers, heldFinalizer)
	if err := cl.Patch(t.Context(), held, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		p, err := getPod(ctx, cl, pod.Namespace, pod.Name)
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Errorf("releasing the held pod: %v", err)
			return
		}
		base := p.DeepCopy()
		p.Finalizers = nil
		if err := cl.Patch(ctx, p, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("releasing the held pod: %v", err)
		}
	})
}
