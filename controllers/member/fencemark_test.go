package member

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestNodeFenceMarkFromTheFutureThroughTheMemberCache: with
// externalFenceSource Node, the fence mark is read from the Node as the
// member cache keeps it (its transform). A mark dated later than the
// member's newest record of the Node (the API server's time of the write
// that set it) is ignored, so a mark dated a year ahead does not fence this
// loss nor any later one; a mark dated when it was written counts. Before,
// the future mark fenced every loss that began before its date.
func TestNodeFenceMarkFromTheFutureThroughTheMemberCache(t *testing.T) {
	const fenceKey = "fence.example.com/fenced"
	cfg := testenv.Start(t)
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://n1"}}
	if err := c.Create(ctx, node, client.FieldOwner("kubelet")); err != nil {
		t.Fatal(err)
	}
	// The node lifecycle controller marks the node Unknown (member clock).
	lostAt := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		LastHeartbeatTime: metav1.NewTime(lostAt.Add(-40 * time.Second)), LastTransitionTime: lostAt}}
	if err := c.Status().Update(ctx, node, client.FieldOwner("kube-controller-manager")); err != nil {
		t.Fatal(err)
	}
	mark := func(at time.Time) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fenceKey, at.UTC().Format(time.RFC3339))
		if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
			client.RawPatch("application/merge-patch+json", []byte(patch)), client.FieldOwner("fence-agent")); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(365 * 24 * time.Hour)
	mark(future)

	conn := syncedConnection(t, cfg)
	policy := v1alpha1.FencingSpec{ExternalFenceAnnotation: fenceKey, ExternalFenceSource: v1alpha1.ExternalFenceSourceNode}
	// verdict reads the Node from the member cache once it holds the mark
	// dated want, and decides with the host's clock an hour ahead.
	verdict := func(want time.Time) fencing.Result {
		t.Helper()
		var got corev1.Node
		poll(t, 10*time.Second, "the mark in the member cache", func() error {
			if err := conn.cache.Get(ctx, client.ObjectKey{Name: "n1"}, &got); err != nil {
				return err
			}
			if v := got.Annotations[fenceKey]; v != want.UTC().Format(time.RFC3339) {
				return fmt.Errorf("cached mark %q", v)
			}
			return nil
		})
		return fencing.Verdict(fencing.Input{Node: &got, Policy: policy, LostSince: time.Now(), Now: time.Now().Add(time.Hour)})
	}

	if r := verdict(future); r.Fenced || !strings.Contains(r.Message(), "a mark dated in the future is ignored") {
		t.Errorf("a mark dated a year ahead: fenced=%v %q, want not fenced, saying it is from the future", r.Fenced, r.Message())
	}
	// Past the Node's creation (a member time too) by more than the slack:
	// only the time of the mark's own write bounds it now.
	time.Sleep(time.Until(node.CreationTimestamp.Add(3 * time.Second)))
	now := time.Now()
	mark(now)
	if r := verdict(now); !r.Fenced || r.Reason != string(fencing.EvidenceExternalFence) {
		t.Errorf("a mark dated when it was written: %s, want fenced by %s (the cache must keep the time of the write)",
			r.Message(), fencing.EvidenceExternalFence)
	}
}
