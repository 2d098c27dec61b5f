package member

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The member cache's memory is mostly its Pods. These tests measure the live
// heap each cached object costs, decoding every copy from protobuf the way an
// informer does (fresh objects, nothing shared with a template), with and
// without the transform.

// Budgets: the measured live bytes per object in the store (Go 1.26,
// k8s.io/api v0.37: pod 1550, benchmark pod 1549, node 2459) plus about
// 20%. Before this transform shared values and folded containers into
// pod-level requests they were 5560, 3639 and 5545; before pod conditions
// lost their times (and were shared) the pods were 1790. Raise one only
// with a reason: it is paid per object, 20,000 pods per member.
// TestMemberCacheMemoryEndToEnd measures the whole connection.
const (
	podBytesBudget     = 1850
	bulkPodBytesBudget = 1850
	nodeBytesBudget    = 2750
)

const (
	memPods  = 10000
	memNodes = 2000
)

var memEpoch = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// deploymentPod is the i-th pod of a member running 100-pod Deployments
// spread over memNodes nodes, as the kubelet reports it.
func deploymentPod(i int) *corev1.Pod {
	const perDeployment = 100
	d := i / perDeployment
	ns := fmt.Sprintf("team-%d", d%20)
	app := fmt.Sprintf("svc-%d", d)
	hash := fmt.Sprintf("%09x", 0x5d4f8b7c9+d)[:9]
	rs := app + "-" + hash
	name := fmt.Sprintf("%s-%05x", rs, i)
	node := fmt.Sprintf("worker-%04d", i%memNodes)
	created := memEpoch.Add(time.Duration(i) * time.Second)
	started := created.Add(3 * time.Second)
	ready := started.Add(12 * time.Second)
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	lim := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	sideReq := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	mounts := []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/app"},
		{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	fields := func(s string) *metav1.FieldsV1 {
		return metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/component":{},"f:app.kubernetes.io/instance":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + s + `\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:terminationMessagePath":{},"f:volumeMounts":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{}}}`)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: rs + "-", Namespace: ns,
			UID:               types.UID(fmt.Sprintf("3f1c2a9e-%04x-4b8d-9c1e-%012x", d, i)),
			ResourceVersion:   fmt.Sprint(1000000 + i),
			CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{
				"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/component": "backend", "app.kubernetes.io/part-of": "shop", "pod-template-hash": hash,
			},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2025-02-27T10:11:12Z", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID(fmt.Sprintf("9a7b6c5d-%04x-4e3f-8a1b-0c2d3e4f5a6b", d)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					Time: ptr.To(metav1.NewTime(created)), FieldsType: "FieldsV1", FieldsV1: fields("ctrl")},
				{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
					Time: ptr.To(metav1.NewTime(created)), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"PodScheduled\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
					Time: ptr.To(metav1.NewTime(ready)), FieldsType: "FieldsV1", FieldsV1: fields("kubelet")},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: app + "-cache"}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To[int32](420),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					}}}},
			},
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example.com/shop/" + app + ":v1.42.7",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "DB_HOST", Value: "postgres.shop.svc.cluster.local"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
						{Name: "GOMAXPROCS", Value: "1"}},
					Resources:              corev1.ResourceRequirements{Requests: req, Limits: lim},
					VolumeMounts:           mounts,
					LivenessProbe:          probe("/healthz"),
					ReadinessProbe:         probe("/readyz"),
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
				{
					Name: "log-shipper", Image: "registry.example.com/infra/fluent-bit:3.1.4",
					Args:                   []string{"--config=/etc/fluent-bit/fluent-bit.conf"},
					Resources:              corev1.ResourceRequirements{Requests: sideReq, Limits: sideReq},
					VolumeMounts:           mounts[1:],
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			NodeName:                      node,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(started)},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready),
					Message: "containers with unready status: [app]", Reason: "ContainersNotReady"},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created),
					Message: "0/2000 nodes are available: 1 Insufficient cpu.", Reason: ""},
			},
			HostIP:    fmt.Sprintf("10.0.%d.%d", (i%memNodes)/250, (i%memNodes)%250+1),
			HostIPs:   []corev1.HostIP{{IP: fmt.Sprintf("10.0.%d.%d", (i%memNodes)/250, (i%memNodes)%250+1)}},
			PodIP:     fmt.Sprintf("10.244.%d.%d", i/250, i%250+1),
			PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+1)}},
			StartTime: ptr.To(metav1.NewTime(created)),
			QOSClass:  corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, Started: ptr.To(true), Image: "registry.example.com/shop/" + app + ":v1.42.7",
					ImageID:     "registry.example.com/shop/" + app + "@sha256:4c1e2f3a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e",
					ContainerID: fmt.Sprintf("containerd://%064x", i),
					State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
				{Name: "log-shipper", Ready: true, Started: ptr.To(true), Image: "registry.example.com/infra/fluent-bit:3.1.4",
					ImageID:     "registry.example.com/infra/fluent-bit@sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
					ContainerID: fmt.Sprintf("containerd://%064x", i+1<<40),
					State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
			},
		},
	}
}

// bulkPod is the i-th pod of the members benchmark (test/lab
// CreateBulkPods: 10 per node, no owner), as the API server defaults it and
// kwok reports it Running.
func bulkPod(i int) *corev1.Pod {
	node := fmt.Sprintf("member1-bulk-%d", i/10)
	now := metav1.NewTime(memEpoch.Add(time.Duration(i) * time.Millisecond))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", node, i%10), Namespace: "bench",
			UID:             types.UID(fmt.Sprintf("0b9e8d7c-%04x-4a3b-9c8d-%012x", i%0xffff, i)),
			ResourceVersion: fmt.Sprint(3000000 + i), CreationTimestamp: now,
			Labels: map[string]string{"app": "bench", "bench.fedfailover.io/node": node},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "fedfailover-lab", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:bench.fedfailover.io/node":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}},"f:nodeName":{},"f:tolerations":{}}}`)},
				{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, Subresource: "status", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"ContainersReady\"}":{},"k:{\"type\":\"Initialized\"}":{},"k:{\"type\":\"PodScheduled\"}":{},"k:{\"type\":\"Ready\"}":{}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Volumes: []corev1.Volume{{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/bench:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default", SecurityContext: &corev1.PodSecurityContext{},
			SchedulerName: corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.example/bench:1", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
			HostIP: "192.168.1.250", HostIPs: []corev1.HostIP{{IP: "192.168.1.250"}},
			PodIP: fmt.Sprintf("10.101.%d.%d", i/250, i%250+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.101.%d.%d", i/250, i%250+1)}},
			StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// memberNode is the i-th node of the member, as the kubelet reports it.
func memberNode(i int) *corev1.Node {
	name := fmt.Sprintf("worker-%04d", i)
	ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
	heartbeat := memEpoch.Add(time.Hour + time.Duration(i)*time.Millisecond)
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("96143180Ki"),
			"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0")}
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg,
			LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(memEpoch)}
	}
	var images []corev1.ContainerImage
	for j := 0; j < 30; j++ {
		images = append(images, corev1.ContainerImage{SizeBytes: int64(20e6 + j*1e6), Names: []string{
			fmt.Sprintf("registry.example.com/team/image-%d@sha256:%064x", j, j),
			fmt.Sprintf("registry.example.com/team/image-%d:v1.%d.0", j, j)}})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("7e6d5c4b-%04x-4a39-8b27-16f5e4d3c2b1", i)),
			ResourceVersion: fmt.Sprint(2000000 + i), CreationTimestamp: metav1.NewTime(memEpoch),
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.2xlarge",
				"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3),
				"node-role.kubernetes.io/worker": "",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid": fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017x"}`, i),
			},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", Time: ptr.To(metav1.NewTime(memEpoch)),
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}}}`)},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", Time: ptr.To(metav1.NewTime(memEpoch)),
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:node.alpha.kubernetes.io/ttl":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.1.0/24\"":{}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status", FieldsType: "FieldsV1",
					Time:     ptr.To(metav1.NewTime(heartbeat)),
					FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{}}}}`)},
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i%256), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i%256)},
			ProviderID: fmt.Sprintf("aws:///eu-west-1a/i-%017x", i)},
		Status: corev1.NodeStatus{
			Capacity: res("8", "32386520Ki"), Allocatable: res("7910m", "31235544Ki"),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalDNS, Address: name + ".eu-west-1.compute.internal"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("ec2%029x", i), SystemUUID: fmt.Sprintf("ec2%029x", i),
				BootID: fmt.Sprintf("%08x-1111-2222-3333-444455556666", i), KernelVersion: "6.1.128-136.201.amzn2023.x86_64",
				OSImage: "Amazon Linux 2023.6.20250218", ContainerRuntimeVersion: "containerd://1.7.25", KubeletVersion: "v1.37.2",
				OperatingSystem: "linux", Architecture: "amd64"},
			Images: images,
		},
	}
}

// liveBytesPer returns the live heap each of n objects costs in an
// informer's store (keyed by namespace/name, indexed by namespace, as
// controller-runtime's cache does), each decoded from protobuf as a fresh
// object and passed to transform (nil: stored as decoded). Deltas over
// thousands of objects make the figure stable.
func liveBytesPer[T interface {
	*corev1.Pod | *corev1.Node
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}](t testing.TB, n int, gen func(int) T, fresh func() T, transform func(any) (any, error)) float64 {
	t.Helper()
	resetShared()
	before := heapAfterGC()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for i := range n {
		raw, err := gen(i).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var obj any = fresh()
		if err := obj.(T).Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		if transform != nil {
			if obj, err = transform(obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	after := heapAfterGC()
	if got := len(store.ListKeys()); got != n {
		t.Fatalf("store holds %d objects, want %d", got, n)
	}
	runtime.KeepAlive(store)
	return float64(after-before) / float64(n)
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestTransformMemoryPerObject(t *testing.T) {
	newPod := func() *corev1.Pod { return &corev1.Pod{} }
	newNode := func() *corev1.Node { return &corev1.Node{} }
	podRaw := liveBytesPer(t, memPods, deploymentPod, newPod, nil)
	podOut := liveBytesPer(t, memPods, deploymentPod, newPod, transformPod)
	bulkRaw := liveBytesPer(t, memPods, bulkPod, newPod, nil)
	bulkOut := liveBytesPer(t, memPods, bulkPod, newPod, transformPod)
	nodeRaw := liveBytesPer(t, memNodes, memberNode, newNode, nil)
	nodeOut := liveBytesPer(t, memNodes, memberNode, newNode, transformNode)
	t.Logf("pod:  %6.0f B decoded, %6.0f B transformed (budget %d)", podRaw, podOut, podBytesBudget)
	t.Logf("benchmark pod: %6.0f B decoded, %6.0f B transformed (budget %d)", bulkRaw, bulkOut, bulkPodBytesBudget)
	t.Logf("node: %6.0f B decoded, %6.0f B transformed (budget %d)", nodeRaw, nodeOut, nodeBytesBudget)
	t.Logf("per 10,000 pods with one node per 10 pods: %.1f MB transformed, %.1f MB decoded",
		(podOut*10000+nodeOut*1000)/1e6, (podRaw*10000+nodeRaw*1000)/1e6)
	if podOut > podBytesBudget {
		t.Errorf("a transformed pod costs %.0f B, budget %d B", podOut, podBytesBudget)
	}
	if bulkOut > bulkPodBytesBudget {
		t.Errorf("a transformed benchmark pod costs %.0f B, budget %d B", bulkOut, bulkPodBytesBudget)
	}
	if nodeOut > nodeBytesBudget {
		t.Errorf("a transformed node costs %.0f B, budget %d B", nodeOut, nodeBytesBudget)
	}
}

func resetShared() { shared.reset() }

// BenchmarkTransformPod is the CPU an informer spends per pod event:
// decoding, then transforming (sharing costs hashing and a lock).
func BenchmarkTransformPod(b *testing.B) {
	raws := make([][]byte, 1000)
	for i := range raws {
		var err error
		if raws[i], err = deploymentPod(i).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{{"decode", nil}, {"decode+transform", transformPod}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var p corev1.Pod
				if err := p.Unmarshal(raws[i%len(raws)]); err != nil {
					b.Fatal(err)
				}
				if tc.transform != nil {
					if _, err := tc.transform(&p); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
		})
	}
}
