package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/poll"
)

const (
	dbNamespace  = "demo"
	dbName       = "db"
	webNamespace = "web"
	webName      = "web"
	webReplicas  = 6
	webScaledTo  = 10
	outOfService = "node.kubernetes.io/out-of-service"
)

// demoPolicy uses short lab timings so the story takes minutes, not hours.
const demoPolicy = `apiVersion: failover.fedfailover.io/v1alpha1
kind: FailoverPolicy
metadata:
  name: demo
spec:
  nodeRecovery:
    notReadyFor: 10s
    fencing:
      machineInfrastructureDeleted: true
  rebalance:
    capacityExhaustedAfter: 5s
    clusterFailedAfter: 10s
    minInterval: 5s
    failback:
      stabilizationWindow: 20s
      maxStep: 2
      makeBeforeBreak: true
`

// until polls cond every 250ms until it holds or timeout passes.
func until(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	_, err := poll.Until(ctx, timeout, 250*time.Millisecond, what, poll.Retrying(cond))
	return err
}

func (d *demo) client(cluster string) (client.Client, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: d.lab.Kubeconfig()},
		&clientcmd.ConfigOverrides{CurrentContext: cluster}).ClientConfig()
	if err != nil {
		return nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// install applies the CRD and the policy, then starts the real manager binary.
func (d *demo) install(ctx context.Context) error {
	root, err := paths.RepoRoot()
	if err != nil {
		return err
	}
	crds, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing config/crd/bases: %w", err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s", filepath.Join(root, "config", "crd", "bases"))
	}
	d.say("installing the FailoverPolicy and NodeRecovery CRDs on the host (config/crd/bases)")
	for _, f := range crds {
		crd, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := d.lab.ApplyYAML(ctx, lab.HostName, string(crd)); err != nil {
			return err
		}
	}
	host, err := d.client(lab.HostName)
	if err != nil {
		return err
	}
	if err := until(ctx, 30*time.Second, "CRD served", func(ctx context.Context) (bool, error) {
		return host.List(ctx, &v1alpha1.FailoverPolicyList{}) == nil && host.List(ctx, &v1alpha1.NodeRecoveryList{}) == nil, nil
	}); err != nil {
		return err
	}
	d.say("applying FailoverPolicy demo: node recovery (lost after 10s NotReady, fenced by Machine infrastructure deletion) and rebalance")
	if err := d.lab.ApplyYAML(ctx, lab.HostName, demoPolicy); err != nil {
		return err
	}
	logPath := filepath.Join(d.o.Dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	d.manager = exec.Command(filepath.Join(d.o.BinDir, "manager"),
		"--kubeconfig", d.lab.Kubeconfig(), "--context", lab.HostName,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	d.manager.Stdout, d.manager.Stderr = logFile, logFile
	if err := d.manager.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	d.say("started the fedfailover manager (pid %d, log %s)", d.manager.Process.Pid, logPath)
	return until(ctx, 60*time.Second, "members connected", func(ctx context.Context) (bool, error) {
		var p v1alpha1.FailoverPolicy
		if err := host.Get(ctx, client.ObjectKey{Name: "demo"}, &p); err != nil {
			return false, err
		}
		if p.Status.ConnectedMembers == 2 {
			d.say("fedfailover connected to both members (FailoverPolicy status: %d/2 connected)", p.Status.ConnectedMembers)
			return true, nil
		}
		return false, nil
	})
}

func (d *demo) stopManager() {
	if d.manager == nil || d.manager.Process == nil {
		return
	}
	_ = d.manager.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.manager.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = d.manager.Process.Kill()
	}
}

// workloads creates the StatefulSet with an RWO volume and the federated
// Deployment with its RSP, and waits until both run.
func (d *demo) workloads(ctx context.Context) error {
	d.say("creating StatefulSet %s/%s on member1 (1 replica, ReadWriteOnce CSI volume)", dbNamespace, dbName)
	if _, err := d.lab.CreateStatefulSetWithVolumes(ctx, "member1", dbNamespace, dbName, 1); err != nil {
		return err
	}
	m1, err := d.client("member1")
	if err != nil {
		return err
	}
	var node string
	if err := until(ctx, 90*time.Second, "db-0 Running", func(ctx context.Context) (bool, error) {
		var err error
		node, err = readyOn(ctx, m1, dbNamespace, dbName+"-0")
		return node != "", err
	}); err != nil {
		return err
	}
	d.say("%s-0 Running on %s with its volume attached there", dbName, node)

	d.say("creating FederatedDeployment %s/%s with a ReplicaSchedulingPreference: %d replicas, weights member1=1 member2=1", webNamespace, webName, webReplicas)
	if err := d.lab.CreateFederatedDeployment(ctx, webNamespace, webName, webReplicas); err != nil {
		return err
	}
	return until(ctx, 120*time.Second, "web spread over both members", func(ctx context.Context) (bool, error) {
		r1, r2, err := d.webReady(ctx)
		if err == nil && r1+r2 == webReplicas && r1 > 0 && r2 > 0 {
			d.say("web: %d Ready on member1, %d on member2", r1, r2)
			return true, nil
		}
		return false, err
	})
}

// readyOn returns the node a Ready pod runs on, or "".
func readyOn(ctx context.Context, cl client.Client, ns, name string) (string, error) {
	var p corev1.Pod
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return "", nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return p.Spec.NodeName, nil
		}
	}
	return "", nil
}

func (d *demo) webReady(ctx context.Context) (member1, member2 int32, err error) {
	counts := make([]int32, 2)
	for i, m := range []string{"member1", "member2"} {
		cl, err := d.client(m)
		if err != nil {
			return 0, 0, err
		}
		var dep appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: webNamespace, Name: webName}, &dep); err != nil {
			return 0, 0, client.IgnoreNotFound(err)
		}
		counts[i] = dep.Status.ReadyReplicas
	}
	return counts[0], counts[1], nil
}

// status shows the federation through the CLI, as a user would see it.
func (d *demo) status(ctx context.Context) error {
	d.say("kubectl failover status")
	cmd := exec.CommandContext(ctx, filepath.Join(d.o.BinDir, "kubectl-failover"), "status",
		"--kubeconfig", d.lab.Kubeconfig(), "--context", lab.HostName)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    " + line)
	}
	if err != nil {
		return fmt.Errorf("kubectl failover status: %w", err)
	}
	return nil
}

// nodePowerOff powers off db-0's node and follows the recovery.
func (d *demo) nodePowerOff(ctx context.Context) error {
	m1, err := d.client("member1")
	if err != nil {
		return err
	}
	node, err := readyOn(ctx, m1, dbNamespace, dbName+"-0")
	if err != nil {
		return fmt.Errorf("reading db-0: %w", err)
	}
	if node == "" {
		return fmt.Errorf("db-0 is not Running before the power-off")
	}
	t0 := time.Now()
	d.say("powering off %s (its kwok is killed; the lab, as the infrastructure provider, deletes its Machine's infrastructure)", node)
	if err := d.lab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		return err
	}
	var sawNotReady, sawTaint bool
	var newNode string
	err = until(ctx, 4*time.Minute, "db-0 recovered on another node", func(ctx context.Context) (bool, error) {
		var n corev1.Node
		if err := m1.Get(ctx, client.ObjectKey{Name: node}, &n); err == nil {
			if !sawNotReady && lab.NodeReadyStatus(&n) != corev1.ConditionTrue {
				sawNotReady = true
				d.say("%s is NotReady (%.1fs after power-off); Kubernetes alone would leave db-0 Terminating with its volume attached", node, time.Since(t0).Seconds())
			}
			if !sawTaint && hasTaint(&n, outOfService) {
				sawTaint = true
				d.say("fedfailover found the fencing evidence and applied %s to %s (%.1fs)", outOfService, node, time.Since(t0).Seconds())
			}
		}
		var err error
		newNode, err = readyOn(ctx, m1, dbNamespace, dbName+"-0")
		if err != nil || newNode == "" || newNode == node {
			return false, err
		}
		attached, err := attachedNodes(ctx, m1)
		return err == nil && len(attached) == 1 && attached[0] == newNode, err
	})
	if err != nil {
		return err
	}
	d.say("db-0 Running on %s with its volume attached there and nowhere else: recovered %.1fs after power-off", newNode, time.Since(t0).Seconds())

	d.say("replacing %s (a fresh machine of the same name joins)", node)
	if err := d.lab.Replace(ctx, node); err != nil {
		return err
	}
	return until(ctx, 2*time.Minute, "out-of-service taint removed", func(ctx context.Context) (bool, error) {
		var n corev1.Node
		if err := m1.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if lab.NodeReadyStatus(&n) == corev1.ConditionTrue && !hasTaint(&n, outOfService) {
			d.say("%s is Ready again and carries no out-of-service taint", node)
			return true, nil
		}
		return false, nil
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// attachedNodes lists the nodes db's volume is attached to.
func attachedNodes(ctx context.Context, cl client.Client) ([]string, error) {
	var vas storagev1.VolumeAttachmentList
	if err := cl.List(ctx, &vas); err != nil {
		return nil, err
	}
	var nodes []string
	for _, va := range vas.Items {
		if va.Status.Attached && va.DeletionTimestamp == nil {
			nodes = append(nodes, va.Spec.NodeName)
		}
	}
	sort.Strings(nodes)
	return nodes, nil
}

// exhaustion fills member2 and scales web up: the new replicas kubefed puts
// on member2 cannot be scheduled, and fedfailover moves them to member1 as
// soon as it reads the scale-up (predictive placement, the default).
func (d *demo) exhaustion(ctx context.Context) error {
	d.say("member2 runs out of capacity (its nodes are cordoned)")
	if err := d.lab.ExhaustCapacity(ctx, "member2", "cordon"); err != nil {
		return err
	}
	host, err := d.client(lab.HostName)
	if err != nil {
		return err
	}
	var rsp fedschedv1a1.ReplicaSchedulingPreference
	if err := host.Get(ctx, client.ObjectKey{Namespace: webNamespace, Name: webName}, &rsp); err != nil {
		return err
	}
	t0 := time.Now()
	d.say("the user scales web from %d to %d replicas (RSP totalReplicas); kubefed alone would wait ~60s of Unschedulable pods, fedfailover caps member2 at what it runs from its capacity estimate (predictive placement)", webReplicas, webScaledTo)
	patch := client.MergeFrom(rsp.DeepCopy())
	rsp.Spec.TotalReplicas = webScaledTo
	if err := host.Patch(ctx, &rsp, patch); err != nil {
		return err
	}
	last := ""
	return until(ctx, 3*time.Minute, "all web replicas Ready", func(ctx context.Context) (bool, error) {
		if s := rspClusters(ctx, host); s != last {
			last = s
			d.say("RSP web: %s", s)
		}
		r1, r2, err := d.webReady(ctx)
		if err == nil && r1+r2 >= webScaledTo {
			d.say("web: %d Ready on member1, %d on member2: all %d Ready %.1fs after the scale-up", r1, r2, webScaledTo, time.Since(t0).Seconds())
			return true, nil
		}
		return false, err
	})
}

// failback restores member2 and waits until the RSP is back to the user's weights.
func (d *demo) failback(ctx context.Context) error {
	t0 := time.Now()
	d.say("member2 has room again (uncordoned); fedfailover waits for the 20s stabilization window, then moves replicas back in steps of 2")
	if err := d.lab.RestoreCapacity(ctx, "member2"); err != nil {
		return err
	}
	host, err := d.client(lab.HostName)
	if err != nil {
		return err
	}
	last := ""
	return until(ctx, 4*time.Minute, "RSP back to baseline", func(ctx context.Context) (bool, error) {
		s := rspClusters(ctx, host)
		if s != last {
			last = s
			d.say("RSP web: %s", s)
		}
		r1, r2, err := d.webReady(ctx)
		if err != nil {
			return false, err
		}
		if s == "member1{weight:1} member2{weight:1} total:10" && r1+r2 >= webScaledTo && r2 > 0 {
			d.say("back to the user's weights: %d Ready on member1, %d on member2 (%.1fs after member2 recovered)", r1, r2, time.Since(t0).Seconds())
			return true, nil
		}
		return false, nil
	})
}

// rspClusters renders the RSP's placement compactly.
func rspClusters(ctx context.Context, host client.Client) string {
	var rsp fedschedv1a1.ReplicaSchedulingPreference
	if err := host.Get(ctx, client.ObjectKey{Namespace: webNamespace, Name: webName}, &rsp); err != nil {
		return "unreadable: " + err.Error()
	}
	names := make([]string, 0, len(rsp.Spec.Clusters))
	for n := range rsp.Spec.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		c := rsp.Spec.Clusters[n]
		f := []string{fmt.Sprintf("weight:%d", c.Weight)}
		if c.MinReplicas > 0 {
			f = append(f, fmt.Sprintf("min:%d", c.MinReplicas))
		}
		if c.MaxReplicas != nil {
			f = append(f, fmt.Sprintf("max:%d", *c.MaxReplicas))
		}
		parts = append(parts, n+"{"+strings.Join(f, ",")+"}")
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" total:%d", rsp.Spec.TotalReplicas)
}
