package member

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotHeld refuses a write to a member this replica may not write to:
// its Lease is not held with margin (sharding), or the connection is being
// torn down.
type ErrNotHeld struct{ Cluster, Why string }

func (e *ErrNotHeld) Error() string {
	return fmt.Sprintf("write to member %s refused: %s", e.Cluster, e.Why)
}

// writeFence lets a member's writes through only while this replica may
// write to the member, and counts the ones in flight so a hand-over can
// wait for them: the next owner must not act while a write sent under the
// old hold may still land.
type writeFence struct {
	cluster string
	holds   func() bool // Cache.HoldsMember for the cluster

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

func newWriteFence(cluster string, holds func() bool) *writeFence {
	return &writeFence{cluster: cluster, holds: holds}
}

// begin admits one write; end must be called when its request returned.
func (f *writeFence) begin() (end func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, &ErrNotHeld{Cluster: f.cluster, Why: "the connection is being torn down"}
	}
	if !f.holds() {
		return nil, &ErrNotHeld{Cluster: f.cluster, Why: "this replica does not hold the member's lease"}
	}
	f.inflight.Add(1)
	return f.inflight.Done, nil
}

// close admits no more writes and waits up to within for the ones in
// flight; it reports whether they all returned. A connection without a
// fence (unit tests build bare ones) has none in flight.
func (f *writeFence) close(within time.Duration) bool {
	if f == nil {
		return true
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		f.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

// do runs one write through the fence.
func (f *writeFence) do(write func() error) error {
	end, err := f.begin()
	if err != nil {
		return err
	}
	defer end()
	return write()
}

// fencedClient is a member client whose every write goes through the
// member's fence; reads pass straight through.
type fencedClient struct {
	client.Client
	fence *writeFence
}

func (c fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.fence.do(func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.fence.do(func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.fence.do(func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.fence.do(func() error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.fence.do(func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.fence.do(func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c fencedClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c fencedClient) SubResource(sub string) client.SubResourceClient {
	return fencedSubResource{SubResourceClient: c.Client.SubResource(sub), fence: c.fence}
}

// fencedSubResource fences a subresource's writes (status, eviction, ...).
type fencedSubResource struct {
	client.SubResourceClient
	fence *writeFence
}

func (c fencedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return c.fence.do(func() error { return c.SubResourceClient.Create(ctx, obj, sub, opts...) })
}

func (c fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return c.fence.do(func() error { return c.SubResourceClient.Update(ctx, obj, opts...) })
}

func (c fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return c.fence.do(func() error { return c.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}

func (c fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return c.fence.do(func() error { return c.SubResourceClient.Apply(ctx, obj, opts...) })
}
