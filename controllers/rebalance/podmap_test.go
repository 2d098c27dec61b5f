package rebalance

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

func TestWorkloadNames(t *testing.T) {
	pod := func(owner, hash string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		if owner != "" {
			p.OwnerReferences = controllerRef("ReplicaSet", owner, "u")
		}
		if hash != "" {
			p.Labels = map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}
		}
		return p
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"a Deployment's ReplicaSet", pod("web-7d4f", "7d4f"), []string{"web-7d4f", "web"}},
		{"a ReplicaSet of its own (FederatedReplicaSet)", pod("db", ""), []string{"db"}},
		{"hash not in the ReplicaSet's name", pod("db", "7d4f"), []string{"db"}},
		{"no controller", pod("", ""), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := workloadNames(c.pod); !slices.Equal(got, c.want) {
				t.Errorf("workloadNames = %v, want %v", got, c.want)
			}
		})
	}
}

// A pod event passes its own workload's RSP, not every RSP of the
// namespace (before: every one, each pass with live member reads, ahead of
// the passes that were due); a pod that goes frees room for all of them.
func TestPodEventsPassTheirOwnRSP(t *testing.T) {
	r, c, _, ns := onHost(t)
	for _, name := range []string{"web", "api", "db"} {
		rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 2}}
		if err := c.Create(t.Context(), rsp); err != nil {
			t.Fatal(err)
		}
	}
	// The events carry what the member caches hold.
	pod := func(owner, hash string, phase corev1.PodPhase) *cachedpod.Pod {
		return member.CompactPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner + "-x", OwnerReferences: controllerRef("ReplicaSet", owner, "u"),
			Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}}, Status: corev1.PodStatus{Phase: phase}})
	}
	webPending, webRunning := pod("web-5c", "5c", corev1.PodPending), pod("web-5c", "5c", corev1.PodRunning)
	all := []string{"api", "db", "web"}
	h := r.podHandler()
	for _, tc := range []struct {
		name string
		emit func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])
		want []string
	}{
		{"created", func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: webPending}, q)
		}, []string{"web"}},
		{"scheduled and running", func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: webPending, ObjectNew: webRunning}, q)
		}, []string{"web"}},
		{"of a workload without an RSP", func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: pod("cache-9f", "9f", corev1.PodPending), ObjectNew: pod("cache-9f", "9f", corev1.PodRunning)}, q)
		}, nil},
		{"finished", func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: webRunning, ObjectNew: pod("web-5c", "5c", corev1.PodSucceeded)}, q)
		}, all},
		{"deleted", func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: webRunning}, q)
		}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.emit(t.Context(), q)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Name)
				q.Done(req)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}
