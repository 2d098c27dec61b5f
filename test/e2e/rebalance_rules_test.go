//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// Safety rule "turning things off" with the real kubefed: a policy deleted
// while its RSP is shifted (member2 without room) does not go before the
// RSP is the user's 1:1 again, without fedfailover's annotation; kubefed
// then places the replicas from the user's spec. Without the finalizer the
// policy went at once, and the restore waited for a later pass of the RSP
// (none if the manager was gone).
func TestRebalanceRulesPolicyDeletedMidFailover(t *testing.T) {
	const ns, name, total = "rebalance-rules-delete", "web", 6
	exhaust(t)
	startRebalance(t)
	p := rbPolicy(t, "rebalance-rules-delete", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "shifted: member1 pinned to all replicas", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, "member1", total) && pinnedTo(r, "member2", 0), rspString(r)
	})
	host := nrHost(t)
	cur := &v1alpha1.FailoverPolicy{}
	if err := host.Get(t.Context(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(cur, contract.FinalizerRebalance) {
		t.Fatalf("policy finalizers %v, want %s", cur.Finalizers, contract.FinalizerRebalance)
	}

	if err := host.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "policy gone and the RSP the user's 1:1, its record released", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		released := stateReleased(ctx, r)
		err = host.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.FailoverPolicy{})
		gone := apierrors.IsNotFound(err)
		if gone && (!released || !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1})) {
			t.Fatalf("policy gone before the RSP was restored: %s (record released %v)", rspString(r), released)
		}
		return gone, fmt.Sprintf("RSP %s, record released %v, policy: %v", rspString(r), released, err)
	})
}
