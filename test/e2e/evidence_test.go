//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

const e2eFenceKey = "fence.e2e.fedfailover.io/fenced"

// TestStaleExternalFenceBlocks: a partitioned node whose Machine carries an
// external fence mark from an earlier incident (a time before this loss),
// and whose Node carries a "true" mark (not the policy's source, and no
// time), is Blocked and nothing is deleted; the condition says why each
// mark does not count. On the old code the Node's "true" fenced the running
// node and its pod was force-released.
func TestStaleExternalFenceBlocks(t *testing.T) {
	const cluster, ns = "member2", "ev-stale-fence"
	startNodeRecovery(t)
	pol := nrPolicy(t, "ev-stale-fence", func(s *v1alpha1.NodeRecoverySpec) {
		s.Fencing.ExternalFenceAnnotation = e2eFenceKey // source: Machine (the default)
	})
	cl := theLab.MustClient(cluster)
	node := lab.NodeName(cluster, 2)
	pod, pv := deploymentOnNode(t, cluster, ns, node)
	restoreAfter(t, cluster, node)

	// Marks left from an earlier incident, before this loss begins.
	markMachine(t, node, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	markNode(t, cl, node, "true")

	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) })
	unchanged := untouched(cl, ns, pod, pv, node)
	eventually(t, 60*time.Second, "FencingBlocked says why neither mark counts", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			t.Fatal(why)
		}
		c, err := policyCondition(ctx, pol.Name, v1alpha1.ConditionFencingBlocked)
		if err != nil || c == nil {
			return false, fmt.Sprintf("condition %v err %v", c, err)
		}
		return c.Status == metav1.ConditionTrue &&
			containsAll(c.Message, node, "before the current loss began", "the Node's own "+e2eFenceKey+" is ignored"), c.Message
	})
	// Hold past the point where a taint would have come (and heal before the
	// 30 s unreachable toleration evicts the pod).
	holds(t, 8*time.Second, "partitioned node with stale marks left alone", unchanged)
	if err := theLab.Heal(node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "healed: node Ready, same pod, volume still there", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			return false, why
		}
		n, err := getNode(ctx, cl, node)
		if err != nil || lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			return false, fmt.Sprintf("not Ready yet (%v)", err)
		}
		return true, ""
	})
}

// markMachine sets the external fence mark on node's Machine, removed when
// the test ends.
func markMachine(t *testing.T, node, value string) {
	t.Helper()
	host := theLab.MustClient(lab.HostName)
	patch := func(ctx context.Context, v *string) error {
		m, err := theLab.Machine(ctx, node)
		if err != nil {
			return err
		}
		orig := m.DeepCopy()
		if v == nil {
			delete(m.Annotations, e2eFenceKey)
		} else {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[e2eFenceKey] = *v
		}
		return host.Patch(ctx, m, client.MergeFrom(orig))
	}
	if err := patch(t.Context(), &value); err != nil {
		t.Fatalf("marking Machine %s: %v", node, err)
	}
	t.Cleanup(func() { _ = patch(context.Background(), nil) })
}

// markNode sets the external fence mark on the member Node, removed when the
// test ends.
func markNode(t *testing.T, cl client.Client, node, value string) {
	t.Helper()
	patch := func(ctx context.Context, v any) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, e2eFenceKey, v)
		return cl.Patch(ctx, n, client.RawPatch("application/merge-patch+json", body))
	}
	if err := patch(t.Context(), fmt.Sprintf("%q", value)); err != nil {
		t.Fatalf("marking Node %s: %v", node, err)
	}
	t.Cleanup(func() { _ = patch(context.Background(), "null") })
}
