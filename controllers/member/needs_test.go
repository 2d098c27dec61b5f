package member

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestConnectionRequestsAreTheMembersNeeds: every request a connection
// makes on its own (version, discovery, the probe, the cache's lists and
// watches, an access review) is granted by fedfailover's member role, and
// the role grants controllers/member nothing these requests do not use.
type wrapped struct {
	rt http.RoundTripper
	f  func(*http.Request) (*http.Response, error)
}

func (w wrapped) RoundTrip(r *http.Request) (*http.Response, error) { return w.f(r) }
func (w wrapped) WrappedRoundTripper() http.RoundTripper            { return w.rt }

func TestConnectionRequestsAreTheMembersNeeds(t *testing.T) {
	cfg := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var mu sync.Mutex
	var seen []memberrbac.Permission
	o := Options{}.withDefaults()
	o.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return wrapped{rt: rt, f: func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, memberrbac.RequestPermission(r.Method, r.URL))
			mu.Unlock()
			return rt.RoundTrip(r)
		}}
	}
	synced := make(chan struct{})
	den := newDenials(time.Now, nil)
	conn, err := dial(ctx, cfg, clientgoscheme.Scheme, o, newWriteFence("m", func() bool { return true }, 0), den, func() { close(synced) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.stop)
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("member cache not synced")
	}
	if err := probe(ctx, conn.uncached); err != nil {
		t.Fatal(err)
	}
	// Rebalance's first pass starts the workload owners' informers.
	poll(t, 30*time.Second, "the workload owners cached", func() error {
		if _, ok := conn.owners(ctx).(cachedOwners); !ok {
			return errors.New("still read live")
		}
		return nil
	})
	den.review(ctx, conn.reviewer, []memberrbac.Permission{{Verb: "patch", Resource: "nodes"}})

	mu.Lock()
	defer mu.Unlock()
	for _, p := range seen {
		if !memberrbac.Covered(p) {
			t.Errorf("a member connection needs %q, which fedfailover's member role does not grant", p)
		}
	}
	for _, n := range memberrbac.NeedsOf(memberrbac.ByMembers) {
		for _, want := range n.Permissions() {
			if want.Resource == "" && want.Path != "/version" {
				continue // discovery: which paths depend on the server (aggregated discovery or not)
			}
			used := func(verb string) bool {
				return slices.ContainsFunc(seen, func(p memberrbac.Permission) bool { return p.Verb == verb && n.Covers(p) })
			}
			// Informers list with a streaming watch where the server
			// streams lists (client-go's WatchListClient), with a list
			// where it does not.
			if !used(want.Verb) && (want.Verb != "list" || !used("watch")) {
				t.Errorf("internal/memberrbac grants %q to controllers/member (%s), but a connection did not use it", want, n.Why)
			}
		}
	}
}
