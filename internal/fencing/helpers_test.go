package fencing

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func node(name string, ready corev1.ConditionStatus, since time.Time, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.NodeSpec{ProviderID: "kwok://" + name}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)},
		}
	}
	return n
}

type machineOpt func(*clusterv1.Machine)

func machine(opts ...machineOpt) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "m1", Generation: 1}}
	m.Status.NodeRef.Name = "n1"
	m.Spec.ProviderID = "kwok://n1"
	for _, o := range opts {
		o(m)
	}
	return m
}

func deleting(m *clusterv1.Machine) {
	ts := metav1.NewTime(t0)
	m.DeletionTimestamp = &ts
	m.Generation++
}

func cond(condType string, status metav1.ConditionStatus, reason string, observedGeneration int64) machineOpt {
	return func(m *clusterv1.Machine) {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{
			Type: condType, Status: status, Reason: reason, ObservedGeneration: observedGeneration,
		})
	}
}

func annotated(key, value string) machineOpt {
	return func(m *clusterv1.Machine) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

func nodeRef(name string) machineOpt {
	return func(m *clusterv1.Machine) { m.Status.NodeRef.Name = name }
}

// writtenAt records, as the member's API server does, that a field manager
// (the fencing agent) last changed the Node at when (member clock).
func writtenAt(n *corev1.Node, when time.Time) *corev1.Node {
	t := metav1.NewTime(when)
	n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{Manager: "fence-agent", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t})
	return n
}
