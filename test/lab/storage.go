package lab

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PauseImage is the image of lab workloads; kwok never pulls it.
const PauseImage = "registry.k8s.io/pause:3.10"

// VolumeTemplateName is the volumeClaimTemplate name of StatefulSets built
// by StatefulSetWithVolumes.
const VolumeTemplateName = "data"

// PersistentVolume returns an RWO PV of the lab's attachable CSI driver,
// pre-bound to namespace/claim so exactly that claim gets it.
func PersistentVolume(name, namespace, claim, size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"lab.fedfailover.io/volume": "true"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: CSIDriverName, VolumeHandle: name, FSType: "ext4"},
			},
		},
	}
}

// PersistentVolumeClaim returns an RWO claim for the pre-bound PV volume.
func PersistentVolumeClaim(namespace, name, volume, size string) *corev1.PersistentVolumeClaim {
	empty := ""
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			VolumeName:       volume,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func podSpec(labels map[string]string, cpu string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: PauseImage,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
}

// StatefulSetWithVolumes returns a StatefulSet whose pods each claim an RWO
// volume, plus the PVs pre-bound to the claims the StatefulSet controller
// will create (<template>-<name>-<ordinal>).
func StatefulSetWithVolumes(namespace, name string, replicas int32, size, cpu string) (*appsv1.StatefulSet, []*corev1.PersistentVolume) {
	labels := map[string]string{"app": name}
	empty := ""
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    podSpec(labels, cpu),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: VolumeTemplateName},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &empty,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
				},
			}},
		},
	}
	sts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: VolumeTemplateName, MountPath: "/data"}}
	var pvs []*corev1.PersistentVolume
	for i := range replicas {
		claim := fmt.Sprintf("%s-%s-%d", VolumeTemplateName, name, i)
		pvs = append(pvs, PersistentVolume(fmt.Sprintf("pv-%s-%s-%d", namespace, name, i), namespace, claim, size))
	}
	return sts, pvs
}

// DeploymentWithVolume returns a one-replica Deployment (Recreate) mounting
// one RWO claim, with its PV and PVC.
func DeploymentWithVolume(namespace, name, size, cpu string) (*appsv1.Deployment, *corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	labels := map[string]string{"app": name}
	one := int32(1)
	pvName := fmt.Sprintf("pv-%s-%s", namespace, name)
	pvc := PersistentVolumeClaim(namespace, name, pvName, size)
	pv := PersistentVolume(pvName, namespace, name, size)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: podSpec(labels, cpu),
		},
	}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
	}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return d, pv, pvc
}

// CreateStatefulSetWithVolumes creates the namespace, PVs and StatefulSet
// from StatefulSetWithVolumes in a member.
func (l *Lab) CreateStatefulSetWithVolumes(ctx context.Context, cluster, namespace, name string, replicas int32) (*appsv1.StatefulSet, error) {
	cl, err := l.Client(cluster)
	if err != nil {
		return nil, err
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	sts, pvs := StatefulSetWithVolumes(namespace, name, replicas, "1Gi", "100m")
	for _, pv := range pvs {
		if err := cl.Create(ctx, pv); err != nil {
			return nil, fmt.Errorf("create PV %s: %w", pv.Name, err)
		}
	}
	if err := cl.Create(ctx, sts); err != nil {
		return nil, fmt.Errorf("create StatefulSet %s: %w", name, err)
	}
	return sts, nil
}

// CreateDeploymentWithVolume creates the namespace, PV, PVC and Deployment
// from DeploymentWithVolume in a member.
func (l *Lab) CreateDeploymentWithVolume(ctx context.Context, cluster, namespace, name string) (*appsv1.Deployment, error) {
	cl, err := l.Client(cluster)
	if err != nil {
		return nil, err
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	d, pv, pvc := DeploymentWithVolume(namespace, name, "1Gi", "100m")
	if err := cl.Create(ctx, pv); err != nil {
		return nil, fmt.Errorf("create PV %s: %w", pv.Name, err)
	}
	if err := cl.Create(ctx, pvc); err != nil {
		return nil, fmt.Errorf("create PVC %s: %w", pvc.Name, err)
	}
	if err := cl.Create(ctx, d); err != nil {
		return nil, fmt.Errorf("create Deployment %s: %w", name, err)
	}
	return d, nil
}

// PodReady reports whether a pod serves: Running, Ready and not being
// deleted. Tests and benchmarks judge replacements and availability by it.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
