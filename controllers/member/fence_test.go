package member

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func fencedPodClient(t *testing.T, holds *atomic.Bool, funcs interceptor.Funcs) (client.Client, *writeFence) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	inner := interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod).Build(), funcs)
	f := newWriteFence("m1", holds.Load)
	return f.fenced(inner), f
}

func podKey() client.ObjectKey { return client.ObjectKey{Namespace: "ns", Name: "p"} }

// A write is refused, and never sent, while the replica does not hold the
// member; reads still pass.
func TestFenceRefusesWritesWithoutTheHold(t *testing.T) {
	var holds atomic.Bool
	c, _ := fencedPodClient(t, &holds, interceptor.Funcs{})
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), podKey(), pod); err != nil {
		t.Fatalf("read refused: %v", err)
	}
	var notHeld *ErrNotHeld
	if err := c.Delete(context.Background(), pod); !errors.As(err, &notHeld) {
		t.Fatalf("delete without the hold: %v, want ErrNotHeld", err)
	}
	if err := c.Status().Update(context.Background(), pod); !errors.As(err, &notHeld) {
		t.Fatalf("status update without the hold: %v, want ErrNotHeld", err)
	}
	if err := c.Get(context.Background(), podKey(), &corev1.Pod{}); err != nil {
		t.Fatalf("the refused delete reached the API server: %v", err)
	}
	holds.Store(true)
	if err := c.Delete(context.Background(), pod); err != nil {
		t.Fatalf("delete with the hold: %v", err)
	}
}

// Closing the fence waits for the write in flight and then admits no more.
func TestFenceCloseWaitsForTheWriteInFlight(t *testing.T) {
	var holds atomic.Bool
	holds.Store(true)
	sent, finish := make(chan struct{}), make(chan struct{})
	c, f := fencedPodClient(t, &holds, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			close(sent)
			<-finish
			return c.Delete(ctx, obj, opts...)
		},
	})
	writeErr := make(chan error, 1)
	go func() {
		writeErr <- c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	}()
	<-sent

	closed := make(chan bool, 1)
	go func() { closed <- f.close(time.Minute) }()
	// The fence closes at once for new writes, while the old one is in flight.
	poll(t, 5*time.Second, "a new write refused once closing", func() error {
		var notHeld *ErrNotHeld
		if err := c.Patch(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
			client.RawPatch("application/merge-patch+json", []byte(`{}`))); !errors.As(err, &notHeld) {
			return errors.New("patch admitted")
		}
		return nil
	})
	select {
	case <-closed:
		t.Fatal("close returned while a write was in flight")
	default:
	}
	close(finish)
	if err := <-writeErr; err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	if !<-closed {
		t.Fatal("close reported the writes not drained after the write returned")
	}
}

// A write that does not return within the bound is reported, so the Lease
// is left to expire rather than released.
func TestFenceCloseReportsAWriteStillInFlight(t *testing.T) {
	var holds atomic.Bool
	holds.Store(true)
	sent, finish := make(chan struct{}), make(chan struct{})
	defer close(finish)
	c, f := fencedPodClient(t, &holds, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			close(sent)
			<-finish
			return nil
		},
	})
	go func() {
		_ = c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	}()
	<-sent
	if f.close(50 * time.Millisecond) {
		t.Fatal("close reported drained with a write still in flight")
	}
}
