package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and annotations on lab nodes.
const (
	// FailureDomainLabel selects the nodes one kwok process manages; every
	// node is its own failure domain so it can die alone.
	FailureDomainLabel = "lab.fedfailover.io/failure-domain"
	// CSIDriverName is the lab's attachable CSI driver.
	CSIDriverName = "lab.csi.fedfailover.io"
	// ProviderIDPrefix makes Node.spec.providerID and Machine.spec.providerID match.
	ProviderIDPrefix = "kwok://"
)

func (l *Lab) stagesFile(c *ClusterState) string { return filepath.Join(c.Dir, "kwok-stages.yaml") }

func (l *Lab) kwokProc(c *ClusterState, node string, idx int) *Proc {
	return &Proc{
		Component: CompKwok, Cluster: c.Name, Node: node, Binary: l.bin(CompKwok),
		Log: filepath.Join(c.Dir, "logs", "kwok-"+node+".log"),
		// kwok also loads ~/.kwok/kwok.yaml when it exists; a private HOME
		// keeps the user's kwok config out of the lab.
		Env: []string{"HOME=" + c.Dir},
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + l.stagesFile(c),
			l.kwokManages(node),
			"--node-lease-duration-seconds=" + strconv.Itoa(l.opts.NodeLeaseSeconds),
			fmt.Sprintf("--cidr=10.%d.%d.0/24", c.Index, idx),
			fmt.Sprintf("--node-ip=192.168.%d.%d", c.Index, idx),
		},
	}
}

// kwokManages is the kwok flag that picks the node a kwok process plays:
// its failure-domain label, or (KwokSingleNode) its name, with which kwok
// also watches only that node's pods and Lease instead of every scheduled
// pod of the member.
func (l *Lab) kwokManages(node string) string {
	if l.opts.KwokSingleNode {
		return "--manage-single-node=" + node
	}
	return "--manage-nodes-with-label-selector=" + FailureDomainLabel + "=" + node
}

// nodeObject is a kwok node as a kubelet would register it.
func (l *Lab) nodeObject(c *ClusterState, n NodeState) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(l.opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(l.opts.NodeMemory),
		corev1.ResourcePods:   resource.MustParse(l.opts.NodePods),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname":        n.Name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"topology.kubernetes.io/zone":   n.Zone,
				"topology.kubernetes.io/region": c.Name,
				"type":                          "kwok",
				FailureDomainLabel:              n.Name,
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
				// Volumes are attached by the attach-detach controller, not the kubelet.
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec:   corev1.NodeSpec{ProviderID: ProviderIDPrefix + n.Name},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

func (l *Lab) setupMember(ctx context.Context, st *State, c *ClusterState) error {
	p := DefaultStageParams()
	p.CPU, p.Memory, p.Pods = l.opts.NodeCPU, l.opts.NodeMemory, l.opts.NodePods
	stages, err := RenderStages(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.stagesFile(c), stages, 0o644); err != nil {
		return err
	}
	cl, err := l.Client(c.Name)
	if err != nil {
		return err
	}
	attach := true
	csi := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: CSIDriverName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: &attach},
	}
	if err := createIgnoreExists(ctx, cl, csi); err != nil {
		return fmt.Errorf("%s: CSIDriver: %w", c.Name, err)
	}
	for i, n := range c.Nodes {
		if err := l.createNode(ctx, cl, c, n); err != nil {
			return err
		}
		if err := l.launch(ctx, l.kwokProc(c, n.Name, i+1), nil); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) createNode(ctx context.Context, cl client.Client, c *ClusterState, n NodeState) error {
	return createNodeObject(ctx, cl, c.Name, l.nodeObject(c, n))
}

func createNodeObject(ctx context.Context, cl client.Client, cluster string, node *corev1.Node) error {
	status := node.Status
	if err := cl.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: create node %s: %w", cluster, node.Name, err)
	}
	// Some API server versions drop status on create; set it explicitly so
	// kwok and the scheduler see the allocatable resources.
	if node.Status.Allocatable.Cpu().IsZero() {
		node.Status = status
		if err := cl.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("%s: node %s status: %w", cluster, node.Name, err)
		}
	}
	return nil
}

// waitNodesReady waits until every lab node reports Ready.
func (l *Lab) waitNodesReady(ctx context.Context, st *State, timeout time.Duration) error {
	return parallel(st.Clusters[1:], func(c *ClusterState) error {
		cl, err := l.Client(c.Name)
		if err != nil {
			return err
		}
		for _, n := range c.Nodes {
			if err := l.WaitNodeReady(ctx, cl, n.Name, corev1.ConditionTrue, timeout); err != nil {
				kw := st.Proc(c.Name + "/" + CompKwok + "/" + n.Name)
				if kw != nil {
					return &ComponentError{Proc: kw.Key(), Log: kw.Log, Tail: logTail(kw.Log, 25), Problem: err}
				}
				return err
			}
		}
		return nil
	})
}

// WaitNodeReady waits until node's Ready condition has the wanted status
// (Unknown counts as not True).
func (l *Lab) WaitNodeReady(ctx context.Context, cl client.Client, node string, want corev1.ConditionStatus, timeout time.Duration) error {
	err := pollUntil(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		return NodeReadyStatus(n) == want, nil
	})
	if err != nil {
		return fmt.Errorf("node %s Ready=%s: %w", node, want, err)
	}
	return nil
}

// NodeReadyStatus returns the status of the node's Ready condition.
func NodeReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// answeredLate: the API server timed the request out or throttled it.
func answeredLate(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// createIgnoreExists creates obj; one that exists already is kept.
// A create the API server timed out or throttled is tried again, up to
// five times with a doubling pause: a loaded lab (twenty members filled at
// once) answers some creates late, and the object may well exist already.
func createIgnoreExists(ctx context.Context, cl client.Client, obj client.Object) error {
	pause := time.Second
	for attempt := 1; ; attempt++ {
		err := cl.Create(ctx, obj)
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return nil
		case attempt == 5 || !answeredLate(err):
			return err
		}
		obj.SetResourceVersion("")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}
