package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

func TestLeaderElectionTimings(t *testing.T) {
	o, err := parseFlags([]string{"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (leaderElectionTimings{30 * time.Second, 20 * time.Second, 4 * time.Second}); o.leaderElection != want {
		t.Errorf("timings %+v, want %+v", o.leaderElection, want)
	}
	if o, _ := parseFlags(nil); o.leaderElection != (leaderElectionTimings{15 * time.Second, 10 * time.Second, 2 * time.Second}) {
		t.Errorf("default timings %+v, want controller-runtime's 15s, 10s, 2s", o.leaderElection)
	}
	for _, tc := range []struct {
		args []string
		want []string // flags the error names
	}{
		{[]string{"--leader-elect-renew-deadline=15s"}, []string{"--leader-elect-renew-deadline", "--leader-elect-lease-duration"}},
		{[]string{"--leader-elect-lease-duration=8s"}, []string{"--leader-elect-renew-deadline", "--leader-elect-lease-duration"}},
		{[]string{"--leader-elect-retry-period=10s"}, []string{"--leader-elect-retry-period", "--leader-elect-renew-deadline"}},
		// client-go's jitter: renew deadline > 1.2 x retry period.
		{[]string{"--leader-elect-retry-period=9s"}, []string{"--leader-elect-retry-period", "--leader-elect-renew-deadline"}},
		{[]string{"--leader-elect-retry-period=0s"}, []string{"--leader-elect-retry-period"}},
		{[]string{"--leader-elect-renew-deadline=0s"}, []string{"--leader-elect-renew-deadline"}},
		// The Lease records whole seconds.
		{[]string{"--leader-elect-lease-duration=15500ms"}, []string{"--leader-elect-lease-duration", "whole"}},
	} {
		_, err := parseFlags(tc.args)
		if err == nil {
			t.Errorf("%v accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %s", tc.args, err, w)
			}
		}
	}
}

func TestExitEarly(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		code               int
		exit               bool
		wantOut, wantErr   string
		unwantOut, unwantE string
	}{
		{args: nil, code: 0, exit: false},
		{args: []string{"--no-such-flag"}, code: 2, exit: true, wantErr: "-no-such-flag", unwantE: "-kube-api-qps"},
		{args: []string{"--kube-api-qps=0"}, code: 2, exit: true, wantErr: "--kube-api-qps"},
		{args: []string{"--kube-api-qps=fast"}, code: 2, exit: true, wantErr: "-kube-api-qps"},
		{args: []string{"--help"}, code: 0, exit: true, wantOut: "-leader-elect-lease-duration"},
		{args: []string{"--version"}, code: 0, exit: true, wantOut: "fedfailover-manager dev (revision "},
	} {
		o, err := parseFlags(tc.args)
		var stdout, stderr bytes.Buffer
		code, exit := exitEarly(o, err, &stdout, &stderr)
		if code != tc.code || exit != tc.exit {
			t.Errorf("%v: code %d exit %v, want %d %v", tc.args, code, exit, tc.code, tc.exit)
		}
		if !strings.Contains(stdout.String(), tc.wantOut) || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("%v: stdout %q stderr %q, want %q and %q", tc.args, stdout.String(), stderr.String(), tc.wantOut, tc.wantErr)
		}
		if (tc.unwantOut != "" && strings.Contains(stdout.String(), tc.unwantOut)) || (tc.unwantE != "" && strings.Contains(stderr.String(), tc.unwantE)) {
			t.Errorf("%v: stdout %q stderr %q: an error is one line, not the whole usage", tc.args, stdout.String(), stderr.String())
		}
	}
}

// TestBinary builds the manager as the Makefile does, stamped with a
// version, and runs it: --version prints the stamp; flag mistakes are said
// on stderr, naming the flag, with exit code 2 (they used to exit 2 with
// nothing said).
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	const pkg = "github.com/fedfailover/fedfailover/internal/version"
	build := exec.Command("go", "build", "-ldflags", "-X "+pkg+".version=v7.7.7-test -X "+pkg+".revision=cafe0123", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exitErr *exec.ExitError
		switch {
		case errors.As(err, &exitErr):
			code = exitErr.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	if out, _, code := run("--version"); code != 0 || !strings.HasPrefix(out, "fedfailover-manager v7.7.7-test (revision cafe0123, go") {
		t.Errorf("--version: exit %d, printed %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--no-such-flag"}, []string{"flag provided but not defined: -no-such-flag"}},
		{[]string{"--kube-api-burst=0"}, []string{"--kube-api-burst"}},
		{[]string{"--leader-elect", "--leader-elect-renew-deadline=20s"}, []string{"--leader-elect-renew-deadline (20s)", "--leader-elect-lease-duration (15s)"}},
	} {
		_, errOut, code := run(tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
}

type syncedStub bool

func (s syncedStub) WaitForCacheSync(ctx context.Context) bool {
	if !s {
		<-ctx.Done()
	}
	return bool(s)
}

func TestReadinessWaitsForTheCaches(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	start := time.Now()
	if err := cacheSynced(syncedStub(false))(req); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Errorf("unsynced caches: %v, want not ready", err)
	}
	if d := time.Since(start); d > 2*cacheSyncTimeout {
		t.Errorf("unsynced check took %s, want about %s", d, cacheSyncTimeout)
	}
	if err := cacheSynced(syncedStub(true))(req); err != nil {
		t.Errorf("synced caches: %v, want ready", err)
	}
}

// TestReadinessOfARealManager: the check fails before the manager has
// started its caches of a real API server, and passes once they synced.
func TestReadinessOfARealManager(t *testing.T) {
	cfg := testenv.Start(t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	check := cacheSynced(mgr.GetCache())
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	if err := check(req); err == nil {
		t.Fatal("ready before the manager started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	testenv.RunManager(t, ctx, cancel, mgr)
	poll(t, 30*time.Second, "ready once the caches synced", func() error { return check(req) })
}

// TestFallbackRootsLinked: the image has no CA bundle; the manager carries
// its own roots for members verified against public CAs (roots.go).
func TestFallbackRootsLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(out)), "golang.org/x/crypto/x509roots/fallback") {
		t.Error("the manager does not link golang.org/x/crypto/x509roots/fallback")
	}
}
