//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/poll"
)

// eventually polls cond every 500ms until it returns true or the deadline
// passes, then fails the test with the last reason given.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) time.Duration {
	t.Helper()
	return poll.T(t, timeout, 500*time.Millisecond, what, poll.Reason(cond))
}

// holds checks cond every interval for the whole window and fails as soon
// as it does not hold: it asserts that something keeps being true.
func holds(t *testing.T, window time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx := t.Context()
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		if ok, why := cond(ctx); !ok {
			t.Fatalf("%s stopped holding: %s", what, why)
		}
		select {
		case <-ctx.Done():
			t.Fatal("context cancelled")
		case <-time.After(time.Second):
		}
	}
}

func getPod(ctx context.Context, cl client.Client, ns, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
}

// attachments returns the nodes a PV is attached to (status.attached) and
// all nodes it has a VolumeAttachment for.
func attachments(ctx context.Context, cl client.Client, pv string) (attached, any []string, err error) {
	vas := &storagev1.VolumeAttachmentList{}
	if err := cl.List(ctx, vas); err != nil {
		return nil, nil, err
	}
	for _, va := range vas.Items {
		if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv {
			continue
		}
		any = append(any, va.Spec.NodeName)
		if va.Status.Attached {
			attached = append(attached, va.Spec.NodeName)
		}
	}
	return attached, any, nil
}

func baseline(t *testing.T, name string, d time.Duration) {
	t.Helper()
	t.Logf("%s took %.1fs", name, d.Seconds())
	fmt.Printf("BASELINE %s seconds=%.1f\n", name, d.Seconds())
}

func pvcVolume(ctx context.Context, cl client.Client, ns, claim string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		return "", err
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s/%s not bound", ns, claim)
	}
	return pvc.Spec.VolumeName, nil
}
