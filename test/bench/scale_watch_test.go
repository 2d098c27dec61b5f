package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// scWatch against a real API server: the field selector keeps the other
// nodes out, and every change of the watched node is delivered with the
// time it arrived, so the taint clock sees the node not Ready, then tainted.
func TestWatchTimesANodeFromItsDeliveries(t *testing.T) {
	cfg := testenv.Start(t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, name := range []string{"watched", "other"} {
		if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	names := map[string]bool{}
	clock := newTaintClock(time.Second, time.Hour)
	start := time.Now()
	if err := scWatch(ctx, cfg, &corev1.Node{}, "", fields.OneTermEqualSelector("metadata.name", "watched"), func(o client.Object, at time.Time) {
		mu.Lock()
		names[o.GetName()] = true
		mu.Unlock()
		clock.observe(o, at)
	}); err != nil {
		t.Fatal(err)
	}
	set := func(name string, change func(*corev1.Node)) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		change(n)
		if err := c.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	notReady := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.Now()}}
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "watched"}, n); err != nil {
		t.Fatal(err)
	}
	notReady(n)
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	set("other", func(n *corev1.Node) { n.Labels = map[string]string{"x": "y"} })
	set("watched", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	})
	select {
	case <-clock.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the taint was not delivered within 30s")
	}
	if _, err := clock.latency(start); err != nil {
		t.Errorf("not timed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if names["other"] || !names["watched"] {
		t.Errorf("delivered %v, want only the watched node", names)
	}
}
