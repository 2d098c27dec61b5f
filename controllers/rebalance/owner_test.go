package rebalance

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/kubefedhealth"
)

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func replicaSet(name string, uid types.UID, revision string, owner types.UID) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: uid,
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{revisionAnnotation: revision},
		OwnerReferences: controllerRef("Deployment", "web", owner)}}
}

// podOf is a pod labelled app=web controlled by ReplicaSet uid: Running
// and Ready, or Pending and Unschedulable.
func podOf(name string, uid types.UID, running bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{"app": "web"},
		OwnerReferences: controllerRef("ReplicaSet", string(uid), uid)}}
	if running {
		p.Spec.NodeName = "n1"
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	} else {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(t0)}}}
	}
	return p
}

// Rule 9: the workload's pods are those of the member Deployment's current
// ReplicaSet. Pods of its old ReplicaSet (a stuck rollout) and of another
// Deployment with the same labels count neither as Running nor as the
// exhaustion signal; main matched all six by the label selector.
func TestObserveMatchesPodsByOwnerChain(t *testing.T) {
	fm := noMembers(t)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
		Annotations: map[string]string{revisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	objs := []client.Object{readyNode("n1", 20), deploy,
		replicaSet("web-old", "rs-old", "1", "d-web"), replicaSet("web-new", "rs-new", "2", "d-web"),
		replicaSet("api-1", "rs-api", "2", "d-api"),
		podOf("new-1", "rs-new", true), podOf("new-2", "rs-new", true),
		podOf("old-1", "rs-old", true), podOf("old-2", "rs-old", false),
		podOf("api-1", "rs-api", true), podOf("api-2", "rs-api", false)}
	fm.add(t, "member1", objs...)
	r := &Reconciler{members: fm}
	w := workload{kind: "FederatedDeployment", name: "web"}
	obs, err := r.observe(context.Background(), "member1", kubefedhealth.View{State: kubefedhealth.Ready}, "demo", w)
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Healthy || obs.Running != 2 || obs.Unschedulable {
		t.Errorf("observation %+v, want healthy, 2 running (the current ReplicaSet's), no Unschedulable pod of the workload", obs)
	}
	// The room the workload holds is every revision's: a rollout's old
	// pods free it for its new ones (predictive placement).
	if obs.Placed != 3 {
		t.Errorf("placed %d, want 3: new-1, new-2 and old-1 bound to a node (old-2 has none, api-1 is another Deployment's)", obs.Placed)
	}

	// No Deployment in the member yet: no replicas there, whatever the labels.
	empty := noMembers(t)
	empty.add(t, "member1", readyNode("n1", 20), podOf("api-1", "rs-api", true))
	r.members = empty
	if obs, err := r.observe(context.Background(), "member1", kubefedhealth.View{State: kubefedhealth.Ready}, "demo", w); err != nil || obs.Running != 0 || !obs.Healthy {
		t.Errorf("without the Deployment: %+v, %v; want healthy with 0 running", obs, err)
	}
}

// A Deployment at a revision whose ReplicaSet is not among those read (the
// owners' cache behind the pods' in a rollout) makes the bound count
// unknown: its bound pods would be missed, and predictive placement could
// cap the member below what runs there.
func TestObserveRevisionUnseenMakesPlacedUnknown(t *testing.T) {
	fm := noMembers(t)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
		Annotations: map[string]string{revisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	fm.add(t, "member1", readyNode("n1", 20), deploy, replicaSet("web-old", "rs-old", "1", "d-web"),
		podOf("old-1", "rs-old", true), podOf("new-1", "rs-new", true)) // rs-new not read yet
	r := &Reconciler{members: fm}
	obs, err := r.observe(context.Background(), "member1", kubefedhealth.View{State: kubefedhealth.Ready}, "demo",
		workload{kind: "FederatedDeployment", name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Healthy || obs.Placed != -1 {
		t.Errorf("observation %+v, want healthy with the bound count unknown (-1): new-1 is bound but its ReplicaSet unread", obs)
	}
}

// A FederatedReplicaSet's replicas are the pods of the member ReplicaSet
// of its name.
func TestObserveFederatedReplicaSet(t *testing.T) {
	fm := noMembers(t)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "rs-web", Generation: 2},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(3))}, Status: appsv1.ReplicaSetStatus{ObservedGeneration: 2}}
	fm.add(t, "member1", readyNode("n1", 20), rs, podOf("web-1", "rs-web", true), podOf("web-2", "rs-web", true),
		podOf("other-1", "rs-other", true))
	r := &Reconciler{members: fm}
	w := workload{kind: "FederatedReplicaSet", name: "web"}
	obs, err := r.observe(context.Background(), "member1", kubefedhealth.View{State: kubefedhealth.Ready}, "demo", w)
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Healthy || obs.Running != 2 || obs.Assigned != 3 || !obs.AssignedObserved {
		t.Errorf("observation %+v, want 2 running of the 3 assigned to the ReplicaSet, observed", obs)
	}
}

// The current ReplicaSet is the one the Deployment controls at its
// revision; its revisions are every ReplicaSet it controls, whatever their
// labels say (a is another Deployment's, with the same labels).
func TestWorkloadOwnerCurrentReplicaSet(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d", Annotations: map[string]string{revisionAnnotation: "3"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	fm := noMembers(t)
	fm.add(t, "member1", d, replicaSet("a", "a", "3", "other"), replicaSet("b", "b", "2", "d"))
	key := types.NamespacedName{Namespace: "demo", Name: "web"}
	owners, err := fm.Owners(context.Background(), "member1")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := workloadOwner(context.Background(), owners, "FederatedDeployment", key)
	if err != nil || mw.Owner != "" || !slices.Equal(mw.Revisions, []types.UID{"b"}) {
		t.Errorf("before the new ReplicaSet exists: %+v, %v; want no owner, revisions [b]", mw, err)
	}
	fm.add(t, "member1", d, replicaSet("a", "a", "3", "other"), replicaSet("b", "b", "2", "d"), replicaSet("c", "c", "3", "d"))
	owners, _ = fm.Owners(context.Background(), "member1")
	mw, err = workloadOwner(context.Background(), owners, "FederatedDeployment", key)
	slices.Sort(mw.Revisions)
	if err != nil || mw.Owner != "c" || !slices.Equal(mw.Revisions, []types.UID{"b", "c"}) {
		t.Errorf("owner %+v, %v; want c (owned by d, at its revision), revisions [b c]", mw, err)
	}
}
