package lab

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Static bulk written straight into a member's etcd (Options.BulkViaEtcd).
//
// Through the API server a static pod costs two writes (create, then its
// status), and the scale benchmark's sizes hold 60,000 to 500,000 of them:
// the 60,000 took 10 minutes on this machine, 500,000 would take over an
// hour at that rate. Written into the member's
// etcd as its API server stores them (protobuf, under its --etcd-prefix),
// they take minutes, and the API server's watch of etcd sends each to
// every client as a created object; reading an object, the API server
// applies its defaults as to any stored object. What the API server and
// the member's controllers would add to the objects the rig builds is set
// here, so nothing writes to them afterwards: uid and creation time, the
// pod's QoS class, the not-ready taint admission puts on a new node
// (TaintNodesByCondition), the protection finalizers on claims and
// volumes, a volume and its claim already bound, a managedFields entry on
// nodes (node recovery reads a node's newest write time), and each claim's
// VolumeAttachment already attached, under the name kube-controller-
// manager's attach-detach controller gives it (which then finds it there,
// attached, and creates none).

// staticManager is the field manager the rig's direct writes are recorded
// under.
const staticManager = "lab-static-bulk"

// etcdBulk writes one member's objects into its etcd.
type etcdBulk struct {
	cli    *clientv3.Client
	prefix string
	enc    runtime.Encoder
	now    metav1.Time
}

func (l *Lab) etcdBulk(cluster string) (*etcdBulk, error) {
	c, err := l.clusterState(cluster)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)},
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: etcd client: %w", cluster, err)
	}
	return &etcdBulk{cli: cli, prefix: etcdPrefix(l.opts.SharedEtcd, cluster), enc: protobuf.NewSerializer(Scheme, Scheme), now: metav1.Now()}, nil
}

func (b *etcdBulk) close() { _ = b.cli.Close() }

// create stores obj under the API server's key for resource, unless an
// object is stored there already; it reports whether it wrote.
func (b *etcdBulk) create(ctx context.Context, resource string, obj runtime.Object, namespace, name string, gvk metav1.TypeMeta) (bool, error) {
	obj.GetObjectKind().SetGroupVersionKind(gvk.GroupVersionKind())
	data, err := runtime.Encode(b.enc, obj)
	if err != nil {
		return false, fmt.Errorf("encoding %s %s/%s: %w", resource, namespace, name, err)
	}
	key := path.Join(b.prefix, resource, namespace, name)
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("etcd put %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

var (
	typeNode = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	typePod  = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	typePV   = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"}
	typePVC  = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	typeVA   = metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "VolumeAttachment"}
)

// AttachmentName is the name the CSI attacher of kube-controller-manager's
// attach-detach controller gives the VolumeAttachment of a volume handle,
// driver and node: csi- and the SHA-256 of the three.
func AttachmentName(volumeHandle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volumeHandle+driver+node)))
}

// created sets what the API server sets on create.
func (b *etcdBulk) created(m *metav1.ObjectMeta) {
	m.UID = uuid.NewUUID()
	m.CreationTimestamp = b.now
}

// node stores a static node with its status (staticNodeStatus), as
// AddStaticNodes' create and status patch leave it.
func (b *etcdBulk) node(ctx context.Context, node *corev1.Node, status corev1.NodeStatus) error {
	b.created(&node.ObjectMeta)
	node.Status = status
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	node.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: staticManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &b.now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1("{}"),
	}}
	_, err := b.create(ctx, "minions", node, "", node.Name, typeNode)
	return err
}

// pod stores a static pod, Running and Ready on its node, and, for a pod
// with a claim, its volume and claim bound to each other first.
func (b *etcdBulk) pod(ctx context.Context, pod *corev1.Pod, ip string, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	if pv != nil {
		b.created(&pv.ObjectMeta)
		b.created(&pvc.ObjectMeta)
		pv.Finalizers = []string{"kubernetes.io/pv-protection"}
		pv.Spec.ClaimRef.UID = pvc.UID
		pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}
		pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
		pvc.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		// The Unused condition is kube-controller-manager's PVC protection
		// controller's (PersistentVolumeClaimUnusedSinceTime): without it,
		// that controller writes every static claim's status once more.
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: pv.Spec.Capacity[corev1.ResourceStorage]},
			Conditions: []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimUnused, Status: corev1.ConditionFalse,
				Reason: "PodUsingPVC", Message: "A pod is currently referencing this PVC", LastTransitionTime: b.now}}}
		if _, err := b.create(ctx, "persistentvolumes", pv, "", pv.Name, typePV); err != nil {
			return err
		}
		if _, err := b.create(ctx, "persistentvolumeclaims", pvc, pvc.Namespace, pvc.Name, typePVC); err != nil {
			return err
		}
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, pod.Spec.NodeName), Finalizers: []string{attacherFinalizer}},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: pv.Spec.CSI.Driver, NodeName: pod.Spec.NodeName,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv.Name}},
			Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/lab/static"}},
		}
		b.created(&va.ObjectMeta)
		if _, err := b.create(ctx, "volumeattachments", va, "", va.Name, typeVA); err != nil {
			return err
		}
	}
	b.created(&pod.ObjectMeta)
	pod.Status = staticPodStatus(pod, ip, b.now)
	pod.Status.QOSClass = qosClass(pod)
	_, err := b.create(ctx, "pods", pod, pod.Namespace, pod.Name, typePod)
	return err
}

// qosClass is the QoS class the API server gives a pod on create, for the
// rig's pods: Guaranteed when every container's limits equal its requests
// for CPU and memory, BestEffort without any, Burstable otherwise.
func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	some, guaranteed := false, true
	for _, c := range pod.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			some = some || hasReq || hasLim
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !some:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
