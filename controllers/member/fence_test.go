package member

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func fencedPodClient(t *testing.T, holds *atomic.Bool, funcs interceptor.Funcs) (client.Client, *writeFence) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	inner := interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod).Build(), funcs)
	f := newWriteFence("m1", holds.Load, 0)
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

// A write that hangs (a member API server that accepted the request and
// never answers) is cut at the write timeout the options derive from the
// shard Lease timings, well before another replica may take the member
// over, and the fence counts it as returned.
func TestFenceCutsASlowWriteAtTheTimeout(t *testing.T) {
	o := Options{Shard: ShardOptions{Namespace: "ns", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
		RetryPeriod: 500 * time.Millisecond}}.withDefaults()
	gap := o.Shard.LeaseDuration - o.Shard.RenewDeadline
	if o.WriteTimeout <= 0 || o.WriteTimeout >= gap {
		t.Fatalf("write timeout %s, want within (0, %s)", o.WriteTimeout, gap)
	}
	var requests atomic.Int32
	gone := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leaving
		<-r.Context().Done()               // never answers; returns when the client gives up
		gone <- struct{}{}
	}))
	defer func() { srv.CloseClientConnections(); srv.Close() }()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	live, err := client.NewWithWatch(&rest.Config{Host: srv.URL}, client.Options{Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	f := newWriteFence("m1", func() bool { return true }, o.WriteTimeout)
	c := f.fenced(live)

	start := time.Now()
	err = c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	took := time.Since(start)
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests reached the server, want 1", n)
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging delete returned %v, want a deadline exceeded", err)
	}
	if took < o.WriteTimeout || took >= gap {
		t.Errorf("the write returned after %s, want at the write timeout %s (before the %s gap)", took, o.WriteTimeout, gap)
	}
	select {
	case <-gone:
	case <-time.After(gap):
		t.Error("the request was not cancelled on the server's side")
	}
	if !f.close(time.Second) {
		t.Error("the cut write is still counted in flight")
	}
}
