package main

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/logbuf"
)

// requestCounter counts the CLI's GET requests: watches (?watch=true) and
// the others (lists and gets).
type requestCounter struct {
	next            http.RoundTripper
	watches, others *atomic.Int64
}

func (c requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		if req.URL.Query().Get("watch") == "true" {
			c.watches.Add(1)
		} else {
			c.others.Add(1)
		}
	}
	return c.next.RoundTrip(req)
}

// testWatch starts `status --watch`, changes a policy's status and expects
// a redraw, then stays idle and expects no request at all (a watch, not a
// poll loop); cancelling the context (Ctrl-C) ends the command cleanly.
func testWatch(t *testing.T, h *host) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var watches, others atomic.Int64
	flags := genericclioptions.NewConfigFlags(true)
	flags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestCounter{rt, &watches, &others} })
		return c
	}
	var out logbuf.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, flags)
	cmd.SetArgs([]string{"status", "--watch", "--kubeconfig=" + h.admin})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitFor(t, &out, "member1/m1-node-2")
	waitUntil(t, "the five informers to watch", func() bool { return watches.Load() >= 5 })

	pol := &v1alpha1.FailoverPolicy{}
	if err := h.c.Get(ctx, client.ObjectKey{Name: "default"}, pol); err != nil {
		t.Fatal(err)
	}
	pol.Status.Members[0].NodesReady = 3
	if err := h.c.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "\n--- ")
	waitFor(t, &out, "member1   Yes         True            3/3")

	// Nothing changes for a while: a poll loop would list again, a watch
	// waits. (This window measures an absence; it synchronises nothing.)
	before := others.Load()
	time.Sleep(2500 * time.Millisecond) // longer than the old poll interval (2s)
	if n := others.Load() - before; n != 0 {
		t.Errorf("%d list/get requests while nothing changed: --watch polls", n)
	}
	if frames := strings.Count(out.String(), "\n--- "); frames != 1 {
		t.Errorf("%d redraws for one change, want 1:\n%s", frames, out.String())
	}

	// A NodeRecovery record is watched too: the recoveries table follows it.
	rec := &v1alpha1.NodeRecovery{}
	if err := h.c.Get(ctx, client.ObjectKey{Name: "member1.m1-node-2.active"}, rec); err != nil {
		t.Fatal(err)
	}
	rec.Status.Message = "watched record change"
	if err := h.c.Status().Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "watched record change")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end after Ctrl-C")
	}
}

// waitUntil polls cond with a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
