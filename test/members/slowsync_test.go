package members

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/transport"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

const mSyncDuration = "fedfailover_member_cache_sync_duration_seconds"

// podLists slows or stalls the responses to one member API server's pod
// list and watch requests, as a loaded API server does, and records when
// each initial list (a list, or a watch that sends the initial events)
// started.
type podLists struct {
	host string
	// slowFor > 0: each response body hands out at most chunk bytes per
	// read, one read per every, for slowFor after its request started.
	slowFor, every time.Duration
	chunk          int
	// stall: response bodies never hand out a byte.
	stall bool
	// starveProbes: while the pod list is slowed, the health probe (a
	// one-node list) gets no answer until it gives up, as on an API server
	// busy with that list.
	starveProbes bool
	// unanswered: the health probe gets no answer while set, whatever the
	// pod lists do.
	unanswered atomic.Bool

	mu     sync.Mutex
	starts []time.Time
}

func (p *podLists) wrap() transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		return wrapped{rt: rt, f: func(req *http.Request) (*http.Response, error) {
			isProbe := req.URL.Host == p.host && req.URL.Path == "/api/v1/nodes" && req.URL.Query().Get("limit") == "1"
			if isProbe && (p.unanswered.Load() || p.starveProbes && p.slowing()) {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Host != p.host || req.Method != http.MethodGet || req.URL.Path != "/api/v1/pods" {
				return resp, err
			}
			q := req.URL.Query()
			if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
				p.mu.Lock()
				p.starts = append(p.starts, time.Now())
				p.mu.Unlock()
			}
			switch {
			case p.stall:
				resp.Body = &stalledBody{ReadCloser: resp.Body, ctx: req.Context(), closed: make(chan struct{})}
			case p.slowFor > 0:
				resp.Body = &slowBody{ReadCloser: resp.Body, until: time.Now().Add(p.slowFor), every: p.every, chunk: p.chunk}
			}
			return resp, nil
		}}
	}
}

// slowing reports whether the first pod list is in its slow phase.
func (p *podLists) slowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.starts) > 0 && time.Since(p.starts[0]) < p.slowFor
}

// initialLists returns when each initial pod list started.
func (p *podLists) initialLists() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.starts)
}

// wrapped is a RoundTripper around rt that closing idle connections sees
// through.
type wrapped struct {
	rt http.RoundTripper
	f  func(*http.Request) (*http.Response, error)
}

func (w wrapped) RoundTrip(r *http.Request) (*http.Response, error) { return w.f(r) }
func (w wrapped) WrappedRoundTripper() http.RoundTripper            { return w.rt }

// slowBody is a response arriving a little at a time: it keeps coming, so
// the list makes progress, but slowly.
type slowBody struct {
	io.ReadCloser
	until time.Time
	every time.Duration
	chunk int
}

func (b *slowBody) Read(p []byte) (int, error) {
	if time.Now().Before(b.until) {
		time.Sleep(b.every) // the simulated server's pace, not a synchronisation
		p = p[:min(len(p), b.chunk)]
	}
	return b.ReadCloser.Read(p)
}

// stalledBody never hands out a byte: an API server that accepted the
// request and then sent nothing.
type stalledBody struct {
	io.ReadCloser
	ctx       context.Context
	closeOnce sync.Once
	closed    chan struct{}
}

func (b *stalledBody) Read([]byte) (int, error) {
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-b.closed:
		return 0, io.ErrClosedPipe
	}
}

func (b *stalledBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// makePods creates n pods in the member, so its pod list is more than the
// few bytes a slow body lets through in its slow phase.
func makePods(t *testing.T, m *memberEnv, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
		if err := m.client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.client.Delete(context.Background(), p) })
	}
}

// wantUnknown checks that a syncing member is unknown to every job: not
// connected, no client, not listed, unknown (the rebalance rule).
func wantUnknown(h *harness, cluster string) error {
	st := h.cache.MemberStatuses(context.Background(), []string{cluster})[0]
	switch {
	case st.Connected || st.Reason != member.ReasonSyncing:
		return errorf("status connected=%v reason=%s message=%q, want Syncing", st.Connected, st.Reason, st.Message)
	case !strings.HasPrefix(st.Message, "syncing for "):
		return errorf("message %q, want the sync's progress", st.Message)
	case !h.cache.Unknown(cluster) || h.cache.Connected(cluster):
		return errorf("unknown=%v connected=%v, want unknown and not connected", h.cache.Unknown(cluster), h.cache.Connected(cluster))
	case slices.Contains(h.cache.ConnectedClusters(), cluster):
		return errorf("listed in ConnectedClusters")
	}
	if _, err := h.cache.GetUncachedClient(context.Background(), cluster); !errors.Is(err, member.ErrNotConnected) {
		return errorf("GetUncachedClient while syncing: %v, want ErrNotConnected", err)
	}
	return nil
}

func countEvents(t *testing.T, f *federation, cluster, reason string) int {
	n := 0
	for _, e := range f.events(t, cluster) {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func hostOf(t *testing.T, m *memberEnv) string {
	t.Helper()
	u, err := url.Parse(m.cfg.Host)
	must(t, err)
	return u.Host
}

// A first pod list that takes three times the stall timeout but keeps
// reading is not cut short: one list, no reconnect, and meanwhile the
// member is unknown (syncing), never failed.
func TestSlowFirstListStillConnects(t *testing.T) {
	for _, starve := range []bool{false, true} {
		t.Run(map[bool]string{false: "probes answered", true: "probes time out meanwhile"}[starve], func(t *testing.T) {
			slowFirstListConnects(t, starve)
		})
	}
}

// slowFirstListConnects: with starveProbes the health probes time out while
// the list is slow (more than FailureThreshold of them), as seen at the goal
// size, where each one tore the sync down and started it again from zero.
func slowFirstListConnects(t *testing.T, starveProbes bool) {
	f := env(t)
	alpha := f.members["alpha"]
	name := map[bool]string{false: "slow", true: "starved"}[starveProbes]
	makePods(t, alpha, name, 30)
	// 64 bytes every 200 ms for 6 s: about 2 KB of a list of 30 pods. With
	// the probes starved, 12 s: room for FailureThreshold (3) probes to
	// time out one after another (2 s each, one per second).
	slowFor := 6 * time.Second
	if starveProbes {
		slowFor = 12 * time.Second
	}
	lists := &podLists{host: hostOf(t, alpha), slowFor: slowFor, every: 200 * time.Millisecond, chunk: 64, starveProbes: starveProbes}
	opts := testOptions()
	opts.SyncStallTimeout = 2 * time.Second
	opts.WrapTransport = lists.wrap()
	h := startManager(t, f, opts)

	f.join(t, "alpha", name, nil)
	eventually(t, 5*time.Second, name+" syncing", func() error {
		if len(lists.initialLists()) == 0 {
			return errorf("no pod list yet")
		}
		return wantUnknown(h, name)
	})
	// Meanwhile: unknown throughout, and the message counts what came in.
	progressed := false
	eventually(t, 3*slowFor, name+" connected", func() error {
		if h.cache.Connected(name) {
			return nil
		}
		if err := wantUnknown(h, name); err != nil {
			t.Fatalf("while syncing: %v", err)
		}
		msg := h.cache.MemberStatuses(context.Background(), []string{name})[0].Message
		progressed = progressed || (strings.Contains(msg, "Pods received") && !strings.Contains(msg, "; 0 B read"))
		return errorf("still syncing")
	})
	starts := lists.initialLists()
	if took := time.Since(starts[0]); took < slowFor {
		t.Errorf("connected %s after the first pod list started, before its slow phase (%s) ended: was it slowed?", took, slowFor)
	}
	if len(starts) != 1 {
		t.Errorf("%d initial pod lists, want 1: the slow list was restarted", len(starts))
	}
	if !progressed {
		t.Error("the syncing message never showed pods and bytes received")
	}
	h.waitState(t, time.Second, name, true, member.ReasonConnected)
	if h.cache.Unknown(name) {
		t.Error("connected, still unknown")
	}
	if n, _ := series(t, mSyncDuration, name); n != 1 {
		t.Errorf("%s{cluster=%s} has %v samples, want 1", mSyncDuration, name, n)
	}
	if n, _ := series(t, mDisconnect, name, "reason", member.ReasonProbeFailed); n != 0 {
		t.Errorf("%v teardowns for failed probes while the sync was reading, want none", n)
	}
	if n, _ := series(t, mDisconnect, name, "reason", member.ReasonCacheSyncFailed); n != 0 {
		t.Errorf("%v teardowns for a stalled sync, want none", n)
	}
	eventually(t, 5*time.Second, "Syncing and Connected events", func() error {
		if s, c := countEvents(t, f, name, member.ReasonSyncing), countEvents(t, f, name, member.ReasonConnected); s != 1 || c != 1 {
			return errorf("%d Syncing and %d Connected events, want one each", s, c)
		}
		return nil
	})
	c, err := h.cache.GetReader(context.Background(), name)
	must(t, err)
	var pods int
	must(t, member.VisitCached(context.Background(), c, "default", func(*cachedpod.Pod) { pods++ }))
	if pods < 30 {
		t.Errorf("%d pods in the cache, want at least 30", pods)
	}
}

// A list that reads nothing at all is torn down after the stall timeout,
// and the attempts that follow wait longer each time (RetryPeriod doubled
// per failure). The member stays unknown: it was never synced.
func TestStalledFirstListIsRetriedWithBackoff(t *testing.T) {
	f := env(t)
	beta := f.members["beta"]
	lists := &podLists{host: hostOf(t, beta), stall: true}
	opts := testOptions()
	opts.SyncStallTimeout = 2 * time.Second
	opts.RetryPeriod, opts.MaxRetryPeriod = time.Second, 8*time.Second
	opts.WrapTransport = lists.wrap()
	h := startManager(t, f, opts)

	f.join(t, "beta", "stalled", nil)
	eventually(t, 5*time.Second, "stalled syncing", func() error {
		if len(lists.initialLists()) == 0 {
			return errorf("no pod list yet")
		}
		return wantUnknown(h, "stalled")
	})
	h.waitState(t, 2*opts.SyncStallTimeout+2*opts.ProbePeriod, "stalled", false, member.ReasonCacheSyncFailed)
	if !h.cache.Unknown("stalled") {
		t.Error("a member never synced counts as known after a stalled sync")
	}
	// Four attempts: delays of 1, 2 and 4 s after each teardown.
	eventually(t, 40*time.Second, "four attempts", func() error {
		if n := len(lists.initialLists()); n < 4 {
			return errorf("%d attempts", n)
		}
		return nil
	})
	s := lists.initialLists()
	gaps := []time.Duration{s[1].Sub(s[0]), s[2].Sub(s[1]), s[3].Sub(s[2])}
	// Each gap is the stall timeout, up to one look (ProbePeriod) to see
	// it, and the backoff delay.
	if low := opts.SyncStallTimeout + opts.RetryPeriod - 100*time.Millisecond; gaps[0] < low {
		t.Errorf("first retry %s after the first attempt, want at least stall + retry period (%s)", gaps[0], low)
	}
	if gaps[2]-gaps[0] < 3*opts.RetryPeriod-opts.ProbePeriod-100*time.Millisecond {
		t.Errorf("gaps between attempts %v: want them to grow (backoff 1s, 2s, 4s)", gaps)
	}
	if n, _ := series(t, mDisconnect, "stalled", "reason", member.ReasonCacheSyncFailed); n < 3 {
		t.Errorf("%v stalled-sync teardowns counted, want at least 3", n)
	}
	if n, _ := series(t, mSyncDuration, "stalled"); n != 0 {
		t.Errorf("%s{cluster=stalled} has %v samples, want none", mSyncDuration, n)
	}
}

// A synced member whose probes go unanswered while its watches still read
// (a busy API server) is not connected, for both jobs a failed member as
// before, but its cache is kept: when the probes are answered again it is
// connected with no new list. Once its watches too read nothing for the
// stall timeout, the cache is torn down and listed again.
func TestUnansweredProbesKeepTheSyncedCache(t *testing.T) {
	f := env(t)
	alpha := f.members["alpha"]
	lists := &podLists{host: hostOf(t, alpha)}
	opts := testOptions()
	opts.SyncStallTimeout = 20 * time.Second
	opts.WrapTransport = lists.wrap()
	h := startManager(t, f, opts)
	ctx := context.Background()

	f.join(t, "alpha", "busy", nil)
	h.waitState(t, 10*time.Second, "busy", true, member.ReasonConnected)

	// Probes unanswered; a pod created meanwhile keeps the watches reading.
	lists.unanswered.Store(true)
	h.waitState(t, 20*time.Second, "busy", false, member.ReasonProbeFailed)
	if h.cache.Unknown("busy") {
		t.Error("a synced member whose probes fail counts as unknown, want failed as after a teardown")
	}
	if _, err := h.cache.GetReader(ctx, "busy"); !errors.Is(err, member.ErrNotConnected) {
		t.Errorf("GetReader while probes fail: %v, want ErrNotConnected", err)
	}
	if v, _ := series(t, mConnected, "busy"); v != 0 {
		t.Errorf("%s{cluster=busy} = %v while probes fail", mConnected, v)
	}
	makePods(t, alpha, "busy", 1)
	lists.unanswered.Store(false)
	h.waitState(t, 10*time.Second, "busy", true, member.ReasonConnected)
	if n := len(lists.initialLists()); n != 1 {
		t.Errorf("%d initial pod lists, want 1: the cache was listed again", n)
	}
	if n, _ := series(t, mSyncDuration, "busy"); n != 1 {
		t.Errorf("%s{cluster=busy} has %v samples, want 1", mSyncDuration, n)
	}
	if v, _ := series(t, mDisconnect, "busy", "reason", member.ReasonProbeFailed); v != 1 {
		t.Errorf("%s{reason=ProbeFailed} = %v, want 1", mDisconnect, v)
	}
	r, err := h.cache.GetReader(ctx, "busy")
	must(t, err)
	eventually(t, 5*time.Second, "the pod created meanwhile cached", func() error {
		found := false
		if err := member.VisitCached(ctx, r, "default", func(p *cachedpod.Pod) { found = found || p.Name == "busy-0" }); err != nil {
			return err
		}
		if !found {
			return errorf("default/busy-0 not cached")
		}
		return nil
	})

	// Probes unanswered and the watches idle past the stall timeout: torn
	// down, then listed again once the probes are answered.
	lists.unanswered.Store(true)
	h.waitState(t, 20*time.Second, "busy", false, member.ReasonProbeFailed)
	eventually(t, 2*opts.SyncStallTimeout, "torn down", func() error {
		msg := h.cache.MemberStatuses(ctx, []string{"busy"})[0].Message
		if !strings.Contains(msg, "cache torn down") {
			return errorf("message %q", msg)
		}
		return nil
	})
	lists.unanswered.Store(false)
	h.waitState(t, 20*time.Second, "busy", true, member.ReasonConnected)
	if n := len(lists.initialLists()); n != 2 {
		t.Errorf("%d initial pod lists, want 2 (one after the teardown)", n)
	}
	if v, _ := series(t, mDisconnect, "busy", "reason", member.ReasonProbeFailed); v != 2 {
		t.Errorf("%s{reason=ProbeFailed} = %v, want 2 (one per episode)", mDisconnect, v)
	}
}
