//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// Short policy times so each scenario fits in about a minute. Placement
// is Reactive: these tests are of the Unschedulable signal, which a
// predictive cap of the same full member could come before; predictive
// placement has its own tests (rebalance_predictive_test.go).
func rbSpec() *v1alpha1.RebalanceSpec {
	return &v1alpha1.RebalanceSpec{
		CapacityExhaustedAfter: "5s", ClusterFailedAfter: "10s", MinInterval: "5s",
		Failback:  v1alpha1.FailbackSpec{StabilizationWindow: "20s", MaxStep: 2, MakeBeforeBreak: true},
		Placement: v1alpha1.PlacementReactive,
	}
}

// rbPolicy creates a policy rebalancing the RSPs of one namespace.
func rbPolicy(t *testing.T, name, ns string, mutate func(*v1alpha1.RebalanceSpec)) *v1alpha1.FailoverPolicy {
	t.Helper()
	spec := rbSpec()
	if mutate != nil {
		mutate(spec)
	}
	spec.ReplicaSchedulingPreferences = v1alpha1.PodScope{Namespaces: []string{ns}}
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: spec}}
	if err := nrHost(t).Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePolicy(t, nrHostCl, p) })
	return p
}

// federatedWorkload creates a FederatedDeployment on both members and its
// RSP (weights 1/1), as in the kubefed-alone baseline, and deletes them
// when the test ends.
func federatedWorkload(t *testing.T, ns, name string, total int) {
	t.Helper()
	if err := theLab.ApplyYAML(t.Context(), lab.HostName, lab.FederatedDeploymentYAML(ns, name, total, theLab.Members())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host := theLab.MustClient(lab.HostName)
		for _, k := range []struct{ gv, kind string }{
			{"scheduling.kubefed.io/v1alpha1", "ReplicaSchedulingPreference"},
			{"types.kubefed.io/v1beta1", "FederatedDeployment"},
		} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(k.gv)
			u.SetKind(k.kind)
			u.SetNamespace(ns)
			u.SetName(name)
			_ = host.Delete(context.Background(), u)
		}
	})
}

// memberReplicas is a member Deployment's wanted and ready replicas.
func memberReplicas(ctx context.Context, cluster, ns, name string) (spec, ready int32, err error) {
	return theLab.DeploymentReplicas(ctx, cluster, ns, name)
}

// split reports both members' wanted/ready replicas; ok when they match want.
func split(ctx context.Context, ns, name string, want1, want2 int32) (bool, string) {
	s1, r1, err1 := memberReplicas(ctx, "member1", ns, name)
	s2, r2, err2 := memberReplicas(ctx, "member2", ns, name)
	if err1 != nil || err2 != nil {
		return false, fmt.Sprintf("member1: %v, member2: %v", err1, err2)
	}
	return s1 == want1 && r1 == want1 && s2 == want2 && r2 == want2,
		fmt.Sprintf("member1 %d (ready %d), member2 %d (ready %d)", s1, r1, s2, r2)
}

func getRSP(ctx context.Context, ns, name string) (*fedschedv1a1.ReplicaSchedulingPreference, error) {
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	return r, nrHostCl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r)
}

// pinnedTo reports whether the RSP pins member to exactly n replicas.
func pinnedTo(r *fedschedv1a1.ReplicaSchedulingPreference, member string, n int64) bool {
	p, ok := r.Spec.Clusters[member]
	return ok && p.MaxReplicas != nil && *p.MaxReplicas == n && p.MinReplicas == n && p.Weight == n
}

// hasWeightsOnly reports whether the RSP holds exactly these weights and
// total, without pins (the user's kind of spec).
func hasWeightsOnly(r *fedschedv1a1.ReplicaSchedulingPreference, total int32, weights map[string]int64) bool {
	if r.Spec.TotalReplicas != total || len(r.Spec.Clusters) != len(weights) {
		return false
	}
	for n, w := range weights {
		p, ok := r.Spec.Clusters[n]
		if !ok || p.Weight != w || p.MinReplicas != 0 || p.MaxReplicas != nil {
			return false
		}
	}
	return true
}

func rspString(r *fedschedv1a1.ReplicaSchedulingPreference) string {
	s := fmt.Sprintf("total %d:", r.Spec.TotalReplicas)
	for _, n := range []string{"member1", "member2"} {
		p := r.Spec.Clusters[n]
		max := "-"
		if p.MaxReplicas != nil {
			max = fmt.Sprint(*p.MaxReplicas)
		}
		s += fmt.Sprintf(" %s{w%d min%d max%s}", n, p.Weight, p.MinReplicas, max)
	}
	return s
}

// readyPods counts the workload's pods that serve, Ready and not being
// deleted, over both members; ok is false when a member could not be read.
// It is the availability make-before-break protects. Deployment
// readyReplicas lags it, most of all in a member whose controller-manager is
// still resyncing after its API server came back.
func readyPods(ctx context.Context, ns, name string) (n int32, ok bool) {
	for _, m := range []string{"member1", "member2"} {
		cl, err := theLab.Client(m)
		if err != nil {
			return 0, false
		}
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return 0, false
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; lab.PodReady(p) {
				n++
			}
		}
	}
	return n, true
}

func rebalanceResult(t *testing.T, name string, d time.Duration) {
	t.Helper()
	t.Logf("%s took %.1fs", name, d.Seconds())
	fmt.Printf("REBALANCE %s seconds=%.1f\n", name, d.Seconds())
}
