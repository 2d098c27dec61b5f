package rebalance

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// nodeFanOutWindow is how long member Node changes after a fan-out are
// gathered into the next one.
const nodeFanOutWindow = 500 * time.Millisecond

// fanOut queues every RSP once for a burst of changes instead of once per
// change. A member Node change concerns every RSP, and a member's first
// list (thousands of Node creates) or a burst of node status changes
// listed every RSP and mapped each of them per Node event: at 6,000 nodes
// and 500 RSPs, gigabytes of garbage in the first minute. The first change
// of a burst fans out at once, so a lone change waits for nothing; the
// changes that come within the window after a fan-out are gathered into
// one more when it ends.
type fanOut struct {
	window time.Duration
	emit   func() // queues every RSP

	mu      sync.Mutex
	open    bool // a window runs: changes are gathered
	pending bool // a change came in the window
}

// trigger records a change: a fan-out now, or at the end of the window.
func (f *fanOut) trigger() {
	f.mu.Lock()
	if f.open {
		f.pending = true
		f.mu.Unlock()
		return
	}
	f.open = true
	f.mu.Unlock()
	f.fire()
}

// windowEnded fans out what came in the window, and opens another.
func (f *fanOut) windowEnded() {
	f.mu.Lock()
	if !f.pending {
		f.open = false
		f.mu.Unlock()
		return
	}
	f.pending = false
	f.mu.Unlock()
	f.fire()
}

// fire fans out and opens a window.
func (f *fanOut) fire() {
	f.emit()
	time.AfterFunc(f.window, f.windowEnded)
}

// allRSPsHandler is an event handler that queues every RSP for each burst
// of events (fanOut). Its queue is the controller's, the same for every
// event.
func (r *Reconciler) allRSPsHandler(window time.Duration) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	var (
		once sync.Once
		q    queue
		f    = &fanOut{window: window}
	)
	f.emit = func() {
		for _, req := range r.allRSPs(context.Background(), "") {
			q.Add(req)
		}
	}
	trigger := func(qq queue) {
		once.Do(func() { q = qq })
		f.trigger()
	}
	return handler.Funcs{
		CreateFunc:  func(_ context.Context, _ event.CreateEvent, q queue) { trigger(q) },
		UpdateFunc:  func(_ context.Context, _ event.UpdateEvent, q queue) { trigger(q) },
		DeleteFunc:  func(_ context.Context, _ event.DeleteEvent, q queue) { trigger(q) },
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q queue) { trigger(q) },
	}
}
