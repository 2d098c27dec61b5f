package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Static bulk: Nodes and Pods that cost nothing at rest. A static node is
// created, its status written once through the status subresource (Ready,
// no pressure, allocatable), and nothing renews a Lease for it: no kwok, no
// kubelet. A static pod is created bound (spec.nodeName) and its status
// written once (Running, Ready, its container running). Only the scale
// benchmark's churn driver writes to them afterwards. That needs a lab
// without the node-lifecycle controller (Options.NoNodeLifecycle), which
// would mark nodes without a Lease unreachable after the grace period.

// StaticDomain is the failure-domain label of static bulk nodes: no kwok
// process selects it.
const StaticDomain = "static"

// notStaticNodes selects the nodes that are not static bulk.
var notStaticNodes = client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(nil).Add(
	mustRequirement(FailureDomainLabel, selection.NotEquals, []string{StaticDomain}))}

func mustRequirement(key string, op selection.Operator, vals []string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		panic(err)
	}
	return *r
}

// errNeedsNoNodeLifecycle refuses static bulk on a lab whose
// node-lifecycle controller would mark it NotReady.
var errNeedsNoNodeLifecycle = fmt.Errorf("static bulk needs a lab without the node-lifecycle controller (Options.NoNodeLifecycle): nothing renews the leases of static nodes")

// AddStaticNodes adds count static nodes named <cluster>-bulk-<i> to a
// member (cordoned when unschedulable) and returns their names.
func (l *Lab) AddStaticNodes(ctx context.Context, cluster string, count int, unschedulable bool) ([]string, error) {
	if !l.opts.NoNodeLifecycle {
		return nil, errNeedsNoNodeLifecycle
	}
	c, err := l.memberState(cluster)
	if err != nil {
		return nil, err
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return nil, err
	}
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-bulk-%d", cluster, i)
	}
	var direct *etcdBulk
	if l.opts.BulkViaEtcd {
		if direct, err = l.etcdBulk(cluster); err != nil {
			return nil, err
		}
		defer direct.close()
	}
	err = forEachParallel(ctx, indexes(count), 16, func(ctx context.Context, i int) error {
		node := l.nodeObject(c, NodeState{Name: names[i], Zone: c.Name + "-bulk"})
		node.Labels[FailureDomainLabel] = StaticDomain
		delete(node.Annotations, "kwok.x-k8s.io/node")
		node.Spec.Unschedulable = unschedulable
		status := staticNodeStatus(node.Status, fmt.Sprintf("192.168.%d.%d", 100+c.Index, i%250), metav1.Now())
		if direct != nil {
			return direct.node(ctx, node, status)
		}
		node.Status = corev1.NodeStatus{}
		if err := createIgnoreExists(ctx, cl, node); err != nil {
			return fmt.Errorf("%s: create node %s: %w", cluster, node.Name, err)
		}
		if node.UID == "" { // it existed: read it for its status and resourceVersion
			if err := cl.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
				return err
			}
			if NodeReadyStatus(node) == corev1.ConditionTrue {
				return nil
			}
		}
		// A patch of the status alone: the member's TTL controller annotates
		// new nodes meanwhile, which an update would conflict with.
		base := node.DeepCopy()
		node.Status = status
		if err := cl.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("%s: node %s status: %w", cluster, node.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// staticNodeStatus is a Ready node's status as a kubelet reports it: the
// four kubelet conditions, addresses and node info, with res's capacity.
func staticNodeStatus(res corev1.NodeStatus, ip string, now metav1.Time) corev1.NodeStatus {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity: res.Capacity, Allocatable: res.Allocatable,
		Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "v1.37.2-static",
			ContainerRuntimeVersion: "static://1", KernelVersion: "static", OSImage: "static",
		},
	}
}

// HeartbeatPatch is the status patch of a kubelet's periodic node status
// report (nodeStatusReportFrequency) when nothing changed: every
// condition's lastHeartbeatTime (conditions merge by type).
func HeartbeatPatch(now time.Time) ([]byte, error) {
	t := metav1.NewTime(now)
	var conds []map[string]any
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		conds = append(conds, map[string]any{"type": c, "lastHeartbeatTime": t})
	}
	return json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
}

// Heartbeat sends one node status report for a static node.
func Heartbeat(ctx context.Context, cl client.Client, node string, now time.Time) error {
	patch, err := HeartbeatPatch(now)
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	return cl.Status().Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, patch))
}

// ScalePodName is the name of the j-th scale pod of a node.
func ScalePodName(node string, j int) string { return fmt.Sprintf("%s-%d", node, j) }

// IsVolumePod says whether the k-th scale pod of a member (node index ×
// pods per node + j) mounts a claim: every volumeEvery-th, none when 0.
func IsVolumePod(k, volumeEvery int) bool { return volumeEvery > 0 && k%volumeEvery == 0 }

// NewScalePod is a scale pod bound to node, without volumes.
func NewScalePod(ns, name, node string) *corev1.Pod { return scalePod(ns, name, node) }

// CreateStaticPods creates perNode static pods bound to each node in ns,
// every volumeEvery-th with a pre-bound ReadWriteOnce claim of the lab's
// attachable CSI driver (AttachStaticVolumes attaches them).
func (l *Lab) CreateStaticPods(ctx context.Context, cluster, ns string, nodes []string, perNode, volumeEvery int) error {
	if !l.opts.NoNodeLifecycle {
		return errNeedsNoNodeLifecycle
	}
	c, err := l.memberState(cluster)
	if err != nil {
		return err
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	var direct *etcdBulk
	if l.opts.BulkViaEtcd {
		if direct, err = l.etcdBulk(cluster); err != nil {
			return err
		}
		defer direct.close()
	}
	return forEachParallel(ctx, indexes(len(nodes)*perNode), 32, func(ctx context.Context, k int) error {
		node := nodes[k/perNode]
		pod := scalePod(ns, ScalePodName(node, k%perNode), node)
		var pv *corev1.PersistentVolume
		var pvc *corev1.PersistentVolumeClaim
		if IsVolumePod(k, volumeEvery) {
			claim := pod.Name
			pv, pvc = PersistentVolume("pv-"+ns+"-"+claim, ns, claim, "1Gi"), PersistentVolumeClaim(ns, claim, "pv-"+ns+"-"+claim, "1Gi")
			pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		if direct != nil {
			return direct.pod(ctx, pod, StaticPodIP(c.Index, k), pv, pvc)
		}
		if pv != nil {
			if err := createIgnoreExists(ctx, cl, pv); err != nil {
				return fmt.Errorf("create PV %s: %w", pv.Name, err)
			}
			if err := createIgnoreExists(ctx, cl, pvc); err != nil {
				return fmt.Errorf("create PVC %s/%s: %w", ns, pvc.Name, err)
			}
		}
		if err := CreateStaticPod(ctx, cl, pod, StaticPodIP(c.Index, k)); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		return nil
	})
}

// StaticPodIP is the k-th pod address of member index i (a /16 of its own).
func StaticPodIP(member, k int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+member, (k/250)%256, 1+k%250)
}

// CreateStaticPod creates pod and writes its status once: Running and
// Ready. A pod that exists already and runs is kept.
func CreateStaticPod(ctx context.Context, cl client.Client, pod *corev1.Pod, ip string) error {
	if err := createIgnoreExists(ctx, cl, pod); err != nil {
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	if pod.Status.Phase == corev1.PodRunning {
		return nil
	}
	if pod.UID == "" { // it existed: read it for its resourceVersion
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase == corev1.PodRunning {
			return nil
		}
	}
	base := pod.DeepCopy()
	pod.Status = staticPodStatus(pod, ip, metav1.Now())
	if err := cl.Status().Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("pod %s status: %w", pod.Name, err)
	}
	return nil
}

// staticPodStatus is a running pod's status as a kubelet writes it: phase
// Running, the PodScheduled, Initialized, ContainersReady and Ready
// conditions True, every container running and ready.
func staticPodStatus(pod *corev1.Pod, ip string, now metav1.Time) corev1.PodStatus {
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled), cond(corev1.PodInitialized), cond(corev1.ContainersReady), cond(corev1.PodReady),
		},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &now, QOSClass: pod.Status.QOSClass, // set by the API server on create, immutable
	}
	if st.QOSClass == "" {
		st.QOSClass = corev1.PodQOSBurstable // requests without limits
	}
	for _, c := range pod.Spec.Containers {
		started := true
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "static://" + string(pod.UID) + "/" + c.Name,
			Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return st
}

// AttachStaticVolumes plays the CSI attacher once for the member's
// VolumeAttachments of static nodes (which the lab's attacher leaves alone:
// it attaches only to nodes that have a kwok process): each is marked
// attached, with the attacher's finalizer. It waits, within timeout, until
// want VolumeAttachments exist (kube-controller-manager creates them for
// the static pods' claims) and returns how many it attached in all.
func (l *Lab) AttachStaticVolumes(ctx context.Context, cluster string, want int, timeout time.Duration) (int, error) {
	cl, err := l.Client(cluster)
	if err != nil {
		return 0, err
	}
	static := map[string]bool{}
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes, client.MatchingLabels{FailureDomainLabel: StaticDomain}); err != nil {
		return 0, err
	}
	for _, n := range nodes.Items {
		static[n.Name] = true
	}
	done := 0
	err = pollUntil(ctx, timeout, 2*time.Second, func(ctx context.Context) (bool, error) {
		var vas storagev1.VolumeAttachmentList
		if err := cl.List(ctx, &vas); err != nil {
			return false, err
		}
		var todo []*storagev1.VolumeAttachment
		seen := 0
		for i := range vas.Items {
			va := &vas.Items[i]
			if !static[va.Spec.NodeName] || va.Spec.Attacher != CSIDriverName || va.DeletionTimestamp != nil {
				continue
			}
			seen++
			if !va.Status.Attached {
				todo = append(todo, va)
			}
		}
		err := forEachParallel(ctx, todo, 16, func(ctx context.Context, va *storagev1.VolumeAttachment) error {
			if !hasString(va.Finalizers, attacherFinalizer) {
				va.Finalizers = append(va.Finalizers, attacherFinalizer)
				if err := cl.Update(ctx, va); err != nil {
					return ignoreConflictOrGone(err)
				}
			}
			va.Status.Attached = true
			va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/lab/static"}
			return ignoreConflictOrGone(cl.Status().Update(ctx, va))
		})
		if err != nil {
			return false, err
		}
		done = seen
		return seen >= want && len(todo) == 0, nil
	})
	return done, err
}

// ignoreConflictOrGone: a changed or deleted object is seen again on the
// next pass.
func ignoreConflictOrGone(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
