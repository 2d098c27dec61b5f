package member

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTransformPodKeepsWhatDecisionsUse(t *testing.T) {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "db"},
			Annotations:     map[string]string{lastApplied: "{big}", "keep": "me"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "x"}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db"}}},
		Spec: corev1.PodSpec{
			NodeName:     "n1",
			NodeSelector: map[string]string{"zone": "a"},
			Tolerations:  []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "img", Command: []string{"run"},
				Env:       []corev1.EnvVar{{Name: "A", Value: "B"}},
				Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-p"}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
					VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}},
	}
	out, err := transformPod(in)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.Name != "p" || p.Labels["app"] != "db" || len(p.OwnerReferences) != 1 {
		t.Errorf("metadata lost: %+v", p.ObjectMeta)
	}
	if p.ManagedFields != nil || p.Annotations != nil {
		t.Error("managedFields or annotations kept")
	}
	if p.Spec.NodeName != "n1" || p.Spec.NodeSelector["zone"] != "a" || len(p.Spec.Tolerations) != 1 {
		t.Errorf("scheduling fields lost: %+v", p.Spec)
	}
	c := p.Spec.Containers[0]
	if !c.Resources.Requests.Cpu().Equal(resource.MustParse("250m")) || c.Resources.Limits != nil || c.Image != "" || c.Env != nil || c.Command != nil {
		t.Errorf("container = %+v, want requests only", c)
	}
	if len(p.Spec.Volumes) != 2 || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-p" ||
		p.Spec.Volumes[1].Ephemeral == nil || p.Spec.Volumes[1].Ephemeral.VolumeClaimTemplate != nil {
		t.Errorf("volumes = %+v, want the PVC and the ephemeral volume only", p.Spec.Volumes)
	}
	if p.Status.Phase != corev1.PodPending || len(p.Status.Conditions) != 1 || p.Status.ContainerStatuses != nil ||
		p.Status.Conditions[0].Reason != "Unschedulable" || p.Status.Conditions[0].Message != "" {
		t.Errorf("status = %+v", p.Status)
	}
	// Tombstones pass through untouched.
	if out, _ := transformPod("tombstone"); out != "tombstone" {
		t.Error("non-pod not passed through")
	}
}

func TestTransformNodeDropsImages(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "t"}}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"a"}}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	out, _ := transformNode(n)
	got := out.(*corev1.Node)
	if got.Status.Images != nil || len(got.Status.Conditions) != 1 || len(got.Spec.Taints) != 1 {
		t.Errorf("node = %+v", got)
	}
}

func TestReasonAndRedact(t *testing.T) {
	if got := redact("bad token abc123 here", "abc123"); got != "bad token [REDACTED] here" {
		t.Errorf("redact = %q", got)
	}
	if !disconnectNow(ReasonUnauthorized) || !disconnectNow(ReasonForbidden) || disconnectNow(ReasonUnreachable) {
		t.Error("disconnectNow wrong")
	}
}
