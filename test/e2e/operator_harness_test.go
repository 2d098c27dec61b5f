//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/controllers/rebalance"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/logbuf"
)

// testOperator is the operator running in the test process against the lab
// host, wired by controllers.Setup as cmd/manager wires it. Its logs are
// shown when the test fails.
type testOperator struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	logs   *logbuf.Buffer
}

// Which controllers a test runs besides the member connections, with the
// short periods the lab scenarios need.
const (
	withNodeRecovery = iota
	withRebalance
)

// withMachineDeletion starts the operator as an installation that enables
// Machine deletion (--enable-machine-deletion, the chart's
// nodeRecovery.machineDeletion.enabled); by default it is off, as installed.
func withMachineDeletion(o *controllers.Options) { o.NodeRecovery.EnableMachineDeletion = true }

// startOperator starts the operator with one feature controller, changed by
// opts; it stops when the test ends, or earlier with stop.
func startOperator(t *testing.T, feature int, opts ...func(*controllers.Options)) *testOperator {
	t.Helper()
	nrHost(t)
	cfg, err := nrHostConfig()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: s, Logger: zap.New(zap.WriteTo(logs), zap.UseDevMode(true)),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start several managers with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	oo := controllers.Options{
		Members:             member.Options{ProbePeriod: 2 * time.Second, StatusRefresh: 5 * time.Second},
		NodeRecovery:        noderecovery.Options{ResyncPeriod: 2 * time.Second, StatusResync: 5 * time.Second},
		Rebalance:           rebalance.Options{Resync: 5 * time.Second},
		WithoutNodeRecovery: feature != withNodeRecovery,
		WithoutRebalance:    feature != withRebalance,
	}
	for _, o := range opts {
		o(&oo)
	}
	if _, err := controllers.Setup(ctx, mgr, oo); err != nil {
		cancel()
		t.Fatal(err)
	}
	op := &testOperator{t: t, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		op.stop()
		if t.Failed() {
			out := logs.String()
			if len(out) > 30000 {
				out = out[len(out)-30000:]
			}
			t.Logf("manager logs (tail):\n%s", out)
		}
	})
	return op
}

// stop stops the operator and waits for it; it is idempotent.
func (o *testOperator) stop() {
	o.t.Helper()
	if o.cancel == nil {
		return
	}
	o.cancel()
	o.cancel = nil
	select {
	case err := <-o.done:
		if err != nil {
			o.t.Errorf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		o.t.Errorf("manager did not stop within 30s")
	}
}

func startNodeRecovery(t *testing.T, opts ...func(*controllers.Options)) *testOperator {
	t.Helper()
	return startOperator(t, withNodeRecovery, opts...)
}

func startRebalance(t *testing.T) *testOperator { t.Helper(); return startOperator(t, withRebalance) }
