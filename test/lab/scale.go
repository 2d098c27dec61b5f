package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ScaleNodes says how AddScaleNodes builds a member's bulk nodes at
// federation scale, where the lab's own traffic would otherwise dominate
// the machine.
type ScaleNodes struct {
	// Count is the number of nodes to add.
	Count int
	// KwokProcs spreads them over this many kwok processes (failure
	// domains bulk-0, bulk-1, ...; default 1).
	KwokProcs int
	// LeaseSeconds is their kwok node lease duration (renewed every 1/4 of
	// it); kube-controller-manager's node monitor grace period must exceed
	// the renewal interval.
	LeaseSeconds int
	// HeartbeatMillis is kwok's node status refresh (a kubelet's default
	// status report is every 5 minutes once the lease carries liveness).
	HeartbeatMillis int
	// Unschedulable cordons them, so the scheduler places workloads only on
	// the lab's own nodes (which have Machines and can be powered off).
	Unschedulable bool
}

// ScaleDomain is the failure domain label of the i-th kwok process of a
// member's scale nodes.
func ScaleDomain(i int) string { return BulkDomain + "-" + strconv.Itoa(i) }

// AddScaleNodes adds o.Count kwok nodes named <cluster>-bulk-<i> to a
// member, spread round-robin over o.KwokProcs kwok processes of their own
// with a longer lease and a slower status heartbeat than the lab's nodes.
// Like AddBulkNodes' nodes they have no Machines and cannot be powered off
// one by one. It returns the names of the added nodes.
func (l *Lab) AddScaleNodes(ctx context.Context, cluster string, o ScaleNodes) ([]string, error) {
	if o.KwokProcs < 1 {
		o.KwokProcs = 1
	}
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	c := st.Cluster(cluster)
	if c == nil || c.Role != RoleMember {
		return nil, fmt.Errorf("no member %q in the lab", cluster)
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return nil, err
	}
	names := make([]string, o.Count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-bulk-%d", cluster, i)
	}
	err = forEachParallel(ctx, indexes(o.Count), 16, func(ctx context.Context, i int) error {
		node := l.nodeObject(c, NodeState{Name: names[i], Zone: c.Name + "-bulk"})
		node.Labels[FailureDomainLabel] = ScaleDomain(i % o.KwokProcs)
		node.Spec.Unschedulable = o.Unschedulable
		return createNodeObject(ctx, cl, c.Name, node)
	})
	if err != nil {
		return nil, err
	}
	stages, err := l.writeScaleStages(c, o.HeartbeatMillis)
	if err != nil {
		return nil, err
	}
	for k := 0; k < o.KwokProcs; k++ {
		if st.Proc(kwokKey(cluster, ScaleDomain(k))) != nil {
			continue
		}
		if err := l.launch(ctx, l.scaleKwokProc(c, k, stages, o.LeaseSeconds), nil); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// writeScaleStages writes the member's Stage file for scale nodes: the
// lab's Stages with a slower status heartbeat.
func (l *Lab) writeScaleStages(c *ClusterState, heartbeatMillis int) (string, error) {
	p := DefaultStageParams()
	p.CPU, p.Memory, p.Pods = l.opts.NodeCPU, l.opts.NodeMemory, l.opts.NodePods
	if heartbeatMillis > 0 {
		p.HeartbeatMillis, p.HeartbeatJitterMillis = heartbeatMillis, heartbeatMillis/5
	}
	data, err := RenderStages(p)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, "kwok-stages-scale.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

// scaleKwokProc is the k-th kwok process of a member's scale nodes.
func (l *Lab) scaleKwokProc(c *ClusterState, k int, stages string, leaseSeconds int) *Proc {
	p := l.kwokProc(c, ScaleDomain(k), 0)
	for i, a := range p.Args {
		switch {
		case strings.HasPrefix(a, "--config="):
			p.Args[i] = "--config=" + stages
		case strings.HasPrefix(a, "--cidr="):
			// Each process hands out pod IPs from its own /16.
			p.Args[i] = fmt.Sprintf("--cidr=10.%d.0.0/16", 100+c.Index*8+k)
		case strings.HasPrefix(a, "--node-ip="):
			p.Args[i] = fmt.Sprintf("--node-ip=192.168.%d.%d", c.Index, 250-k)
		case strings.HasPrefix(a, "--node-lease-duration-seconds=") && leaseSeconds > 0:
			p.Args[i] = "--node-lease-duration-seconds=" + strconv.Itoa(leaseSeconds)
		}
	}
	return p
}

// CreateScalePods binds perNode pods directly (no scheduler) to each node
// in namespace ns. Every volumeEvery-th pod (none when 0) mounts a
// ReadWriteOnce claim of the lab's attachable CSI driver, pre-bound to its
// own PV; such pods carry the attached annotation from the start, so kwok
// runs them without waiting for the lab's attacher (which attaches only
// for nodes that have a kwok process of their own), while
// kube-controller-manager still creates their VolumeAttachments.
func (l *Lab) CreateScalePods(ctx context.Context, cluster, ns string, nodes []string, perNode, volumeEvery int) error {
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	total := len(nodes) * perNode
	return forEachParallel(ctx, indexes(total), 32, func(ctx context.Context, k int) error {
		node := nodes[k/perNode]
		pod := scalePod(ns, fmt.Sprintf("%s-%d", node, k%perNode), node)
		if volumeEvery > 0 && k%volumeEvery == 0 {
			claim := pod.Name
			pv := PersistentVolume("pv-"+ns+"-"+claim, ns, claim, "1Gi")
			if err := createIgnoreExists(ctx, cl, pv); err != nil {
				return fmt.Errorf("create PV %s: %w", pv.Name, err)
			}
			if err := createIgnoreExists(ctx, cl, PersistentVolumeClaim(ns, claim, pv.Name, "1Gi")); err != nil {
				return fmt.Errorf("create PVC %s/%s: %w", ns, claim, err)
			}
			pod.Annotations = map[string]string{AttachedAnnotation: "true"}
			pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		if err := createIgnoreExists(ctx, cl, pod); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		return nil
	})
}

// ScaleLabel marks the pods of CreateScalePods: the lab's attacher leaves
// them out of its lists (they never wait for it).
const ScaleLabel = "lab.fedfailover.io/scale"

func scalePod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{"app": "bench", "bench.fedfailover.io/node": node, ScaleLabel: "true"},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: PauseImage,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

// FederatedDeploymentsYAML is one namespace (and its FederatedNamespace)
// holding count FederatedDeployments named <prefix>-<i>, each with an RSP
// spreading total replicas over members with equal weights.
func FederatedDeploymentsYAML(ns, prefix string, count, total int, members []string) string {
	docs := []string{}
	for i := 0; i < count; i++ {
		all := FederatedDeploymentYAML(ns, fmt.Sprintf("%s-%d", prefix, i), total, members)
		parts := strings.Split(all, "\n---\n")
		if i > 0 {
			parts = parts[2:] // the namespace and its FederatedNamespace once
		}
		docs = append(docs, parts...)
	}
	return strings.Join(docs, "\n---\n")
}

// CreateObjectsYAML creates the objects of a multi-document YAML on
// cluster, workers at a time; objects that exist already are kept. Unlike
// ApplyYAML it suits thousands of objects.
func (l *Lab) CreateObjectsYAML(ctx context.Context, cluster, doc string, workers int) error {
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, part := range strings.Split(doc, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			return err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	// Namespaces first: everything else lives in one.
	var first, rest []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			first = append(first, u)
		} else {
			rest = append(rest, u)
		}
	}
	for _, batch := range [][]*unstructured.Unstructured{first, rest} {
		err := forEachParallel(ctx, batch, workers, func(ctx context.Context, u *unstructured.Unstructured) error {
			if err := cl.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
