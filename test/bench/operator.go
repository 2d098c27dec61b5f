package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
)

// benchOperator is fedfailover running in the benchmark process, wired by
// controllers.Setup as cmd/manager wires it.
type benchOperator struct {
	cancel context.CancelFunc
	done   chan error
}

// startOperator starts fedfailover with opts against the lab host and waits
// until it is connected to every member in members, so the benchmark
// measures the operator at work, not its start.
func startOperator(ctx context.Context, cfg *rest.Config, opts controllers.Options, members ...string) (*benchOperator, error) {
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// A fresh manager per scenario reuses the controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if opts.KubefedNamespace == "" {
		opts.KubefedNamespace = lab.KubefedNS
	}
	octx, cancel := context.WithCancel(ctx)
	cache, err := controllers.Setup(octx, mgr, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	op := &benchOperator{cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- mgr.Start(octx) }()
	err = poll(ctx, 90*time.Second, fmt.Sprintf("operator connected to %v", members), func(context.Context) (bool, string, error) {
		select {
		case err := <-op.done:
			return false, "", fmt.Errorf("manager stopped: %w", err)
		default:
		}
		c := cache.ConnectedClusters()
		for _, m := range members {
			if !slices.Contains(c, m) {
				return false, fmt.Sprintf("connected %v", c), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return op, nil
}

func (o *benchOperator) stop() error {
	o.cancel()
	select {
	case err := <-o.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("manager: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("manager did not stop within 30s")
	}
}
