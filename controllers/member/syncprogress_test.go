package member

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryDelayDoublesUpToTheCap(t *testing.T) {
	o := Options{RetryPeriod: time.Second, MaxRetryPeriod: 10 * time.Second}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := o.retryDelay(i + 1); got != w {
			t.Errorf("after %d failures: %s, want %s", i+1, got, w)
		}
	}
	// A cap below the first delay never shortens it.
	if got := (Options{RetryPeriod: 5 * time.Second, MaxRetryPeriod: time.Second}).retryDelay(3); got != 5*time.Second {
		t.Errorf("cap below RetryPeriod: %s, want RetryPeriod", got)
	}
	if got := (Options{}).withDefaults().retryDelay(1); got != (Options{}).withDefaults().ProbePeriod {
		t.Errorf("first retry by default after %s, want one probe period", got)
	}
}

func TestStallIsNoByteReadForTheStallTimeout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const stall = 10 * time.Second
	for _, tc := range []struct {
		name        string
		prev        syncProgress
		bytes       int64
		now         time.Time
		wantAt      time.Time
		wantStalled bool
	}{
		{"bytes read: progress now", syncProgress{at: t0, bytes: 100}, 200, t0.Add(time.Hour), t0.Add(time.Hour), false},
		{"nothing read, within the timeout", syncProgress{at: t0, bytes: 100}, 100, t0.Add(stall - time.Millisecond), t0, false},
		{"nothing read for the timeout", syncProgress{at: t0, bytes: 100}, 100, t0.Add(stall), t0, true},
		// A kind that finished syncing leaves the sum: that is progress too.
		{"a kind synced", syncProgress{at: t0, bytes: 100}, 40, t0.Add(stall), t0.Add(stall), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, stalled := tc.prev.advance(syncStatus{bytes: tc.bytes}, tc.now, stall)
			if stalled != tc.wantStalled || !next.at.Equal(tc.wantAt) || next.bytes != tc.bytes {
				t.Errorf("got %+v stalled %v, want at %s bytes %d stalled %v", next, stalled, tc.wantAt, tc.bytes, tc.wantStalled)
			}
		})
	}
}

func TestSyncingMessageSaysWhatCameIn(t *testing.T) {
	st := syncStatus{bytes: 3 << 20, kinds: []kindSync{{name: "Node", synced: true, objects: 2000}, {name: "Pod", objects: 4500}}}
	got := syncingMessage(st, 41*time.Second+300*time.Millisecond, "")
	if want := "syncing for 41s: 2000 Nodes synced, 4500 Pods received; 3.0 MiB read"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got := syncingMessage(syncStatus{bytes: 10}, 0, "pods is forbidden"); !strings.HasSuffix(got, "; 10 B read; last watch error: pods is forbidden") {
		t.Errorf("message %q: want the bytes and the last watch error", got)
	}
}

// Only successful responses to requests an informer tagged count.
func TestCountingTransportCountsTaggedSuccessfulBodies(t *testing.T) {
	status := http.StatusOK
	tr := countingTransport{rt: roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("0123456789"))}, nil
	})}
	p := &kindProgress{name: "Pod"}
	get := func(ctx context.Context) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://member/api/v1/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	tagged := context.WithValue(context.Background(), progressKey{}, p)
	get(tagged)
	get(context.Background()) // a probe or a live read
	status = http.StatusForbidden
	get(tagged) // a reflector retrying a refused list
	if n := p.bytes.Load(); n != 10 {
		t.Errorf("%d bytes counted, want the 10 of the one tagged successful response", n)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The one rule both jobs use: a member is unknown until this process has a
// synced connection to it, and again whenever a new connection syncs; once
// synced and then lost it is known to be unreachable.
func TestUnknownUntilSyncedAndWhileResyncing(t *testing.T) {
	c := newCache(Options{}.withDefaults(), nil)
	if !c.Unknown("m") {
		t.Fatal("never seen: want unknown")
	}
	conn := idleConnection()
	if _, _, ok := c.setConnected("m", conn, "fp", "", "syncing"); !ok {
		t.Fatal("connect refused")
	}
	if !c.Unknown("m") || c.Connected("m") || len(c.ConnectedClusters()) != 0 {
		t.Fatalf("syncing: unknown %v connected %v listed %v", c.Unknown("m"), c.Connected("m"), c.ConnectedClusters())
	}
	if _, err := c.GetClient(context.Background(), "m"); err == nil || !strings.Contains(err.Error(), ReasonSyncing) {
		t.Fatalf("GetClient while syncing: %v, want not connected (Syncing)", err)
	}
	prev, next, _, ok := c.setSynced("m", conn)
	if !ok || prev.connected || !next.connected || !next.changed(prev) {
		t.Fatalf("setSynced: ok %v %+v -> %+v", ok, prev, next)
	}
	if c.Unknown("m") || !c.Connected("m") {
		t.Fatal("synced: want connected and known")
	}
	if _, _, _, ok := c.setSynced("m", conn); ok {
		t.Fatal("a connection synced twice")
	}
	c.setDisconnected("m", ReasonProbeFailed, "gone")
	if c.Unknown("m") || c.Connected("m") {
		t.Fatal("lost after a sync: want known (unreachable), not unknown")
	}
	conn2 := idleConnection()
	c.setConnected("m", conn2, "fp", "", "syncing")
	if !c.Unknown("m") {
		t.Fatal("reachable again, cache syncing: want unknown")
	}
	c.setDisconnected("m", ReasonCacheSyncFailed, "stalled")
	if _, _, _, ok := c.setSynced("m", conn2); ok {
		t.Fatal("a torn-down connection became the member's")
	}
}

// Failed attempts with the same inputs back off; new inputs go at once.
func TestBackoffPerInputs(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCache(Options{RetryPeriod: time.Second, MaxRetryPeriod: time.Minute}.withDefaults(), nil)
	c.now = func() time.Time { return now }
	if w := c.retryWait("m", "a"); w != 0 {
		t.Fatalf("first attempt waits %s", w)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if d := c.backOff("m", "a"); d != want {
			t.Fatalf("failure %d: delay %s, want %s", i+1, d, want)
		}
	}
	if w := c.retryWait("m", "a"); w != 4*time.Second {
		t.Errorf("same inputs wait %s, want 4s", w)
	}
	if w := c.retryWait("m", "b"); w != 0 {
		t.Errorf("new inputs wait %s, want none", w)
	}
	if d := c.backOff("m", "b"); d != time.Second {
		t.Errorf("first failure with new inputs: %s, want 1s", d)
	}
	conn := idleConnection()
	c.setConnected("m", conn, "b", "", "syncing")
	c.setSynced("m", conn)
	if d := c.backOff("m", "b"); d != time.Second {
		t.Errorf("first failure after a synced cache: %s, want 1s", d)
	}
}

func TestStaleAfterOutageOnlyWhenStreamsBrokeWhileProbesFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      memberState
		broken int64
		want   bool
	}{
		{"answered throughout, a watch broke: the reflector retries at once", memberState{synced: true, brokenSeen: 3}, 4, false},
		{"probes failed, every watch kept reading (a busy API server)", memberState{synced: true, unanswered: true, failures: 3, brokenSeen: 3}, 3, false},
		{"unanswered and watches broke (the API server went away)", memberState{synced: true, unanswered: true, failures: 3, brokenSeen: 3}, 9, true},
		{"one failed probe and a watch cut off", memberState{synced: true, failures: 1}, 1, true},
		{"still syncing: the sync's own progress decides", memberState{failures: 2}, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, got := staleAfterOutage(tc.m, tc.broken)
			if got != tc.want {
				t.Fatalf("stale = %v (%q), want %v", got, msg, tc.want)
			}
			if got && !strings.Contains(msg, "rebuilt") {
				t.Errorf("message %q does not say the cache is rebuilt", msg)
			}
		})
	}
}

func TestBrokenCountsFailedAndCutOffRequestsNotCleanEnds(t *testing.T) {
	p := &kindProgress{}
	ctx := context.WithValue(context.Background(), progressKey{}, p)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://member/api/v1/pods?watch=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := countingTransport{rt: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("dial tcp: connection refused")
	})}
	resp, err := refused.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("want the transport's error")
	}
	if got := p.broken.Load(); got != 1 {
		t.Fatalf("after a refused request broken = %d, want 1", got)
	}
	for _, tc := range []struct {
		name string
		end  error
		want int64
	}{
		{"a watch the server ends (its timeout)", io.EOF, 1},
		{"a watch cut off", io.ErrUnexpectedEOF, 2},
	} {
		tr := countingTransport{rt: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(&endingReader{data: "{}", end: tc.end})}, nil
		})}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		_, _ = io.ReadAll(resp.Body) // read again after the end: counted once
		_ = resp.Body.Close()
		if got := p.broken.Load(); got != tc.want {
			t.Errorf("%s: broken = %d, want %d", tc.name, got, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// endingReader returns data, then end.
type endingReader struct {
	data string
	end  error
}

func (r *endingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.end
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}
