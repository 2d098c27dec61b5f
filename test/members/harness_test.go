package members

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/logbuf"
	"github.com/fedfailover/fedfailover/test/testenv"
)

type harness struct {
	cache *member.Cache
	logs  *logbuf.Buffer
	opts  member.Options
}

// testOptions are short periods so the tests run in seconds.
func testOptions() member.Options {
	return member.Options{
		Namespace:        kubefedNS,
		ProbePeriod:      time.Second,
		ProbeTimeout:     2 * time.Second,
		FailureThreshold: 3,
		ConnectTimeout:   3 * time.Second,
		SyncStallTimeout: 15 * time.Second,
		RetryPeriod:      500 * time.Millisecond,
		StatusRefresh:    2 * time.Second,
	}
}

// startManager runs a manager with the member controllers (and, with
// setups, others) on the host until the test ends. Every log line (ours
// and client-go's) is captured and, when the test ends, checked for member
// tokens.
func startManager(t *testing.T, f *federation, opts member.Options, setups ...func(ctrl.Manager, *member.Cache) error) *harness {
	t.Helper()
	logs := &logbuf.Buffer{}
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(false), zap.Level(zapcore.Level(-10)))
	klog.SetLogger(logger)
	s, err := scheme.New()
	must(t, err)
	mgr, err := ctrl.NewManager(f.hostCfg, ctrl.Options{
		Scheme:                 s,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test has its own manager with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := member.SetupWithManager(ctx, mgr, opts)
	must(t, err)
	for _, setup := range setups {
		must(t, setup(mgr, c))
	}
	// Registered first, so it runs once the manager stopped.
	t.Cleanup(func() {
		out := logs.String()
		for _, tok := range tokens.list() {
			if strings.Contains(out, tok) {
				t.Errorf("a member token appears in the logs")
			}
		}
		if t.Failed() {
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("manager logs (tail):\n%s", out)
		}
	})
	testenv.RunManager(t, ctx, cancel, mgr)
	return &harness{cache: c, logs: logs, opts: opts}
}

// waitState waits until the member's connected state is as given, with
// the given reason unless it is empty.
func (h *harness) waitState(t *testing.T, timeout time.Duration, cluster string, connected bool, reason string) {
	t.Helper()
	eventually(t, timeout, cluster+" state", func() error {
		st := h.cache.MemberStatuses(context.Background(), []string{cluster})[0]
		if st.Connected != connected || (reason != "" && st.Reason != reason) {
			return errorf("connected=%v reason=%s message=%q", st.Connected, st.Reason, st.Message)
		}
		return nil
	})
}

// series returns the value of a fedfailover metric for a cluster, and
// whether such a series exists.
func series(t *testing.T, name, cluster string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			want := map[string]string{"cluster": cluster}
			for i := 0; i+1 < len(labels); i += 2 {
				want[labels[i]] = labels[i+1]
			}
			got := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok {
					if v != l.GetValue() {
						continue next
					}
					got++
				}
			}
			if got != len(want) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// events lists the events regarding a KubeFedCluster.
func (f *federation) events(t *testing.T, cluster string) []eventsv1.Event {
	t.Helper()
	var l eventsv1.EventList
	must(t, f.host.List(context.Background(), &l, client.InNamespace(kubefedNS)))
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Kind == "KubeFedCluster" && e.Regarding.Name == cluster {
			out = append(out, e)
		}
	}
	return out
}
