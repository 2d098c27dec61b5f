package member

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
// old hold may still land. Each write it admits gets a deadline timeout
// after its admission (Options.WriteTimeout, shorter than the gap between
// the Lease's renew deadline and its duration): a write admitted while the
// hold was valid is cut before another replica may take the member over.
type writeFence struct {
	cluster string
	holds   func() bool // Cache.HoldsMember for the cluster
	timeout time.Duration

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

// newWriteFence fences the writes to cluster; timeout bounds each write
// (none when zero: unit tests only).
func newWriteFence(cluster string, holds func() bool, timeout time.Duration) *writeFence {
	return &writeFence{cluster: cluster, holds: holds, timeout: timeout}
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

// do runs one write through the fence, with the fence's deadline on its
// context: the request is cancelled when it passes, so the write is never
// in flight longer than the timeout after it was admitted.
func (f *writeFence) do(ctx context.Context, write func(ctx context.Context) error) error {
	end, err := f.begin()
	if err != nil {
		return err
	}
	defer end()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	if err := write(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("write to member %s cut after %s (the member write timeout): %w", f.cluster, f.timeout, err)
		}
		return err
	}
	return nil
}

// fenced returns c with every write, subresource writes included, sent
// through the fence; reads pass straight through.
func (f *writeFence) fenced(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return f.do(ctx, func(ctx context.Context) error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}
