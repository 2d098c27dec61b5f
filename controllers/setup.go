// Package controllers wires every fedfailover controller into a manager. The
// manager binary, the demo, the benchmarks and the end-to-end tests all use
// it, so they run exactly the same set of controllers.
package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/controllers/rebalance"
)

// Options configure the controllers. KubefedNamespace, when set, is the
// member package's namespace: every controller reads KubeFedClusters
// through the member cache.
type Options struct {
	KubefedNamespace string
	Members          member.Options
	NodeRecovery     noderecovery.Options
	Rebalance        rebalance.Options
	// WithoutNodeRecovery and WithoutRebalance leave a controller out, for
	// tests and benchmarks that exercise one feature alone.
	WithoutNodeRecovery bool
	WithoutRebalance    bool
}

// Setup adds the member connections, node recovery and rebalance controllers
// to mgr and returns the member cache.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*member.Cache, error) {
	if o.KubefedNamespace != "" {
		o.Members.Namespace = o.KubefedNamespace
	}
	members, err := member.SetupWithManager(ctx, mgr, o.Members)
	if err != nil {
		return nil, fmt.Errorf("setting up member clusters: %w", err)
	}
	if !o.WithoutNodeRecovery {
		if err := noderecovery.SetupWithManager(mgr, members, o.NodeRecovery); err != nil {
			return nil, fmt.Errorf("setting up node recovery: %w", err)
		}
	}
	if !o.WithoutRebalance {
		o.Rebalance.Sharded = o.Members.Shard.Enabled()
		if err := rebalance.SetupWithManager(mgr, members, o.Rebalance); err != nil {
			return nil, fmt.Errorf("setting up rebalance: %w", err)
		}
	}
	return members, nil
}
