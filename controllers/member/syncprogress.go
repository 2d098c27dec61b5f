package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// A member's first list can take minutes (20,000 pods on a busy API server)
// and, with client-go's streaming lists (WatchListClient, on by default in
// client-go 0.37) or the reflector's paginated list as fallback, nothing
// reaches the informer's store until the whole list is in. Progress is
// therefore measured where it happens: the response bytes each informer's
// list and watch requests read, counted by a transport wrapper for the
// requests an informer tags through their context.

// kindProgress is what one cached kind's informer has received so far.
type kindProgress struct {
	name     string
	informer cache.Informer
	bytes    atomic.Int64 // response bytes read by its list and watch requests
	objects  atomic.Int64 // objects received (each passes its transform)
	// broken counts its list and watch requests that failed on the way
	// (no response: the API server gone, the network cut) or whose
	// response broke off mid-stream. Each is a gap the informer fills only
	// once its reflector tries again, on its own backoff.
	broken atomic.Int64
}

type progressKey struct{}

// withProgress tags every list and watch request of lw with p, so the
// transport counts what they read.
func withProgress(lw toolscache.ListerWatcher, p *kindProgress) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return inner.ListWithContext(context.WithValue(ctx, progressKey{}, p), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
			return inner.WatchWithContext(context.WithValue(ctx, progressKey{}, p), opts)
		},
	}
}

// countingTransport counts the body bytes of successful responses to
// tagged requests (error responses a reflector retries are no progress),
// and the tagged requests that failed or broke off (kindProgress.broken).
type countingTransport struct{ rt http.RoundTripper }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	p, ok := req.Context().Value(progressKey{}).(*kindProgress)
	switch {
	case !ok:
		return resp, err
	case err != nil:
		if req.Context().Err() == nil { // not the informer itself stopping
			p.broken.Add(1)
		}
		return resp, err
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return resp, err
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &p.bytes, broken: &p.broken, ctx: req.Context()}
	return resp, nil
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport underneath.
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

type countingBody struct {
	io.ReadCloser
	n, broken *atomic.Int64
	ctx       context.Context
	failed    bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	// A watch the server ends cleanly (its timeout) reads io.EOF; one cut
	// off (the server killed, the connection lost) reads another error.
	if err != nil && !errors.Is(err, io.EOF) && !b.failed && b.ctx.Err() == nil {
		b.failed = true
		b.broken.Add(1)
	}
	return n, err
}

// countObjects wraps a kind's transform to count the objects received.
func countObjects(t toolscache.TransformFunc, n *atomic.Int64) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		n.Add(1)
		return t(obj)
	}
}

// syncStatus is a snapshot of a syncing connection.
type syncStatus struct {
	synced bool
	bytes  int64 // read so far by the informers not synced yet
	kinds  []kindSync
}

type kindSync struct {
	name    string
	synced  bool
	objects int64
}

// syncProgress is when a syncing connection last made progress.
type syncProgress struct {
	at    time.Time
	bytes int64
}

// advance is the stall rule: progress is any byte read by an informer that
// has not synced since the last look. It returns the new progress mark and
// whether the connection has stalled (nothing read for stall).
func (p syncProgress) advance(st syncStatus, now time.Time, stall time.Duration) (syncProgress, bool) {
	return p.advanceBytes(st.bytes, now, stall)
}

// advanceBytes is the same rule for any count of bytes read.
func (p syncProgress) advanceBytes(bytes int64, now time.Time, stall time.Duration) (syncProgress, bool) {
	if bytes != p.bytes {
		return syncProgress{at: now, bytes: bytes}, false
	}
	return p, now.Sub(p.at) >= stall
}

// syncingMessage says what the cache has received so far, e.g. "syncing
// for 40s: 4500 Pods received, 2000 Nodes synced, ...; 12.0 MiB read".

func syncingMessage(st syncStatus, elapsed time.Duration, watchErr string) string {
	parts := make([]string, 0, len(st.kinds))
	for _, k := range st.kinds {
		verb := "received"
		if k.synced {
			verb = "synced"
		}
		parts = append(parts, fmt.Sprintf("%d %ss %s", k.objects, k.name, verb))
	}
	msg := fmt.Sprintf("syncing for %s: %s; %s read", elapsed.Round(time.Second), strings.Join(parts, ", "), byteSize(st.bytes))
	if watchErr != "" {
		msg += "; last watch error: " + watchErr
	}
	return msg
}

func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
