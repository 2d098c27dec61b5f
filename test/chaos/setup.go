package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The campaign's workloads and policies.
const (
	dbNamespace = "chaos-db" // a StatefulSet with RWO volumes on every member
	dbName      = "db"
	// dbReplicas per member: one more than fits on a single node is not
	// needed; two spread the claims over nodes.
	dbReplicas = 2
	webTotal   = 4

	livePolicy = "chaos"     // node recovery and rebalance of chaos-web
	dryPolicy  = "chaos-dry" // dry-run rebalance of chaos-dry
	managerNS  = "fedfailover-system"
)

// webWorkloads are the federated Deployments, as namespace/name.
var webWorkloads = []string{"chaos-web/web", "chaos-dry/web"}

// livePolicyYAML: lab timings so a run takes minutes; the fencing evidence
// is what the lab's Machines report, and a node lost without it is fenced
// by the lab's fence agent (fence.go: fenceNamespace, fenceTemplate,
// remediationTimeout).
const livePolicyYAML = `apiVersion: failover.fedfailover.io/v1alpha1
kind: FailoverPolicy
metadata:
  name: chaos
spec:
  nodeRecovery:
    notReadyFor: 10s
    fencing:
      machineInfrastructureDeleted: true
      poweredOffConditions:
      - {type: PowerOn, status: "False", reasons: [PoweredOff]}
    remediation:
      template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediationTemplate, namespace: chaos-fence, name: chaos}
      timeout: 30s
  rebalance:
    replicaSchedulingPreferences: {namespaces: [chaos-web]}
    capacityExhaustedAfter: 10s
    clusterFailedAfter: 20s
    minInterval: 5s
    failback:
      stabilizationWindow: 20s
      maxStep: 2
      makeBeforeBreak: true
`

const dryPolicyYAML = `apiVersion: failover.fedfailover.io/v1alpha1
kind: FailoverPolicy
metadata:
  name: chaos-dry
spec:
  dryRun: true
  rebalance:
    replicaSchedulingPreferences: {namespaces: [chaos-dry]}
    capacityExhaustedAfter: 10s
    clusterFailedAfter: 20s
    minInterval: 5s
`

// clientFor returns a client of a lab cluster with fedfailover's scheme.
func clientFor(kubeconfig, cluster string) (client.Client, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cluster}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// install applies fedfailover's CRDs, the policies and the workloads.
func (c *Campaign) install(ctx context.Context) error {
	crds, err := filepath.Glob(filepath.Join(c.root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing config/crd/bases: %w", err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRDs in config/crd/bases")
	}
	for _, f := range crds {
		doc, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := c.lab.ApplyYAML(ctx, lab.HostName, string(doc)); err != nil {
			return err
		}
	}
	if err := until(ctx, 30*time.Second, "fedfailover's CRDs served", func(ctx context.Context) (bool, string) {
		err := c.host.List(ctx, &v1alpha1.FailoverPolicyList{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	if err := c.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	if err := c.startFence(ctx); err != nil {
		return err
	}
	for _, doc := range []string{livePolicyYAML, dryPolicyYAML} {
		if err := c.lab.ApplyYAML(ctx, lab.HostName, doc); err != nil {
			return err
		}
	}
	for _, m := range c.members {
		if _, err := c.lab.CreateStatefulSetWithVolumes(ctx, m, dbNamespace, dbName, dbReplicas); err != nil {
			return err
		}
	}
	for _, w := range webWorkloads {
		ns, name := splitKey(w)
		if err := c.lab.CreateFederatedDeployment(ctx, ns, name, webTotal); err != nil {
			return err
		}
	}
	return nil
}

// captureBaseline waits for the converged federation and records what the
// runs return to: the policies' and RSPs' specs, and each workload's replicas per member as
// kubefed placed them with no fault.
func (c *Campaign) captureBaseline(ctx context.Context) error {
	// First the policies as stored: convergence compares them to it.
	c.policyBaseline = map[string]v1alpha1.FailoverPolicySpec{}
	for _, name := range []string{livePolicy, dryPolicy} {
		var p v1alpha1.FailoverPolicy
		if err := c.host.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return err
		}
		c.policyBaseline[name] = *p.Spec.DeepCopy()
	}
	if live := c.policyBaseline[livePolicy]; !live.NodeRecovery.On() || !live.Rebalance.On() {
		return fmt.Errorf("policy %s must enable both jobs, or the campaign tries nothing (nodeRecovery %+v, rebalance %+v)",
			livePolicy, live.NodeRecovery, live.Rebalance)
	}
	if err := until(ctx, 5*time.Minute, "the federation converged before the first run", func(ctx context.Context) (bool, string) {
		return c.converged(ctx)
	}); err != nil {
		return err
	}
	c.rspBaseline = map[string]fedschedv1a1.ReplicaSchedulingPreferenceSpec{}
	c.baseline = map[string]map[string]int{}
	for _, w := range webWorkloads {
		ns, name := splitKey(w)
		var rsp fedschedv1a1.ReplicaSchedulingPreference
		if err := c.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rsp); err != nil {
			return err
		}
		c.rspBaseline[w] = *rsp.Spec.DeepCopy()
		c.baseline[w] = map[string]int{}
		for _, m := range c.members {
			n, err := c.runningPods(ctx, m, ns, name)
			if err != nil {
				return err
			}
			c.baseline[w][m] = n
		}
	}
	c.logf("baseline: %v", c.baseline)
	return nil
}
