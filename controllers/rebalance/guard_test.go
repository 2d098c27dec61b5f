package rebalance

import (
	"fmt"
	"k8s.io/utils/ptr"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// webOn is the workload "web" in namespace ns of a member: its Deployment,
// current ReplicaSet, running Running and Ready pods, and a node with room.
func webOn(ns, member string, running int) []client.Object {
	d, rs := types.UID("d-"+member), types.UID("rs-"+member)
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: d, Annotations: map[string]string{revisionAnnotation: "1"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(running))}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: rs,
			Annotations: map[string]string{revisionAnnotation: "1"}, OwnerReferences: controllerRef("Deployment", "web", d)}},
		readyNode("n1", 20),
	}
	for i := range running {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-1-%d", i),
			OwnerReferences: controllerRef("ReplicaSet", "web-1", rs)},
			Spec:   corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	return objs
}

// Rule 1, the federation guard, with members lost a few seconds apart:
// member1 dies (kubefed reports it offline too), member2 is cut from
// fedfailover alone 5 s later. For a while member1 has reached
// clusterFailedAfter and member2 not yet; then member2 is failed to
// fedfailover alone, which is never Failed. Counting Failed members alone,
// one of two was not more than half and the guard let go. The member
// failing (or failed to fedfailover alone) counts: the user's weights stay
// as they are, and the policy names both members.
func TestMembersFailingApartKeepTheUsersWeights(t *testing.T) {
	pol := rebalancing("apart", nil) // clusterFailedAfter 10s
	r, c, _, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns)
	key := client.ObjectKeyFromObject(rsp)
	user := specPlacement(rsp)
	fm := noMembers(t)
	fm.add(t, "member1", webOn(ns, "member1", 3)...)
	fm.add(t, "member2", webOn(ns, "member2", 3)...)
	r.members, r.opts = fm, Options{}.withDefaults()
	untouched := func(when string) {
		t.Helper()
		if got := specPlacement(specOf(t, c, key)); !got.Equal(user) {
			t.Fatalf("%s: spec %+v, want the user's %+v untouched", when, got, user)
		}
	}

	passAt(t, r, key, t0) // 3/3, Running and Ready
	untouched("both members healthy")
	fm.kill("member1")
	passAt(t, r, key, t0.Add(time.Second)) // member1 failing since t0+1s
	fm.down["member2"] = true
	passAt(t, r, key, t0.Add(6*time.Second)) // member2 failing since t0+6s
	untouched("both members failing, neither failed")

	// member1 Failed (10s), member2 failing for 5s.
	passAt(t, r, key, t0.Add(11*time.Second))
	untouched("member1 failed, member2 failing")
	cond := suspendedOf(t, r, pol)
	if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonTooManyMembersFailed ||
		!strings.Contains(cond.Message, "failed (member1)") || !strings.Contains(cond.Message, "failing, not failed yet (member2)") {
		t.Errorf("condition %+v, want True TooManyMembersFailed naming member1 failed and member2 failing", cond)
	}

	passAt(t, r, key, t0.Add(16*time.Second)) // both Failed
	untouched("both members failed")
	if m := recordedState(t, c, key); m.LastChange != nil || !m.Applied.Equal(user) {
		t.Errorf("recorded state %+v: want no change recorded", m)
	}
	if _, ok := specOf(t, c, key).Annotations[contract.AnnotationRebalance]; ok {
		t.Error("rebalance state written to the RSP")
	}
}
