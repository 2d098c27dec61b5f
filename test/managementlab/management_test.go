//go:build e2e

package managementlab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/logbuf"
	"github.com/fedfailover/fedfailover/test/poll"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestNodeRecoveryWithMachinesInAManagementCluster: the lab's Clusters and
// Machines are only in the management cluster (the host has none), and
// every KubeFedCluster names it. fedfailover, running against the host:
//  1. taints a powered-off node whose Machine there is deleted with its
//     infrastructure gone, and records that Machine (UID);
//  2. explain reads that Machine with a context of the lab's kubeconfig;
//  3. with the management cluster's API server killed right after a second
//     node's evidence was written, says so on the policy (condition and
//     event) and does not taint that node once it is lost, however long;
//  4. once the API server is back, recovers the node on the evidence it
//     can read again.
func TestNodeRecoveryWithMachinesInAManagementCluster(t *testing.T) {
	ctx := t.Context()
	l := theLab
	if got := l.MachineCluster(); got != lab.ManagementName {
		t.Fatalf("Machines are in %q, want the management cluster %q", got, lab.ManagementName)
	}
	host := hostClient(t)
	mgmt := l.MustClient(lab.ManagementName)
	var inHost clusterv1.MachineList
	if err := host.List(ctx, &inHost); err != nil || len(inHost.Items) != 0 {
		t.Fatalf("the host holds %d Machines (%v), want none", len(inHost.Items), err)
	}
	startOperator(t)
	pol := policy(t, "mgmt-recovery")
	member1 := lab.MemberName(1)
	node1, node2 := lab.NodeName(member1, 1), lab.NodeName(member1, 2)
	memberCl := l.MustClient(member1)

	// 1. Evidence in the management cluster recovers the node.
	mach1 := &clusterv1.Machine{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: l.Options().MachineNamespace, Name: node1}, mach1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Restore(context.Background(), node1) })
	if err := l.PowerOff(ctx, node1, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	poll.T(t, 90*time.Second, time.Second, node1+" tainted", poll.NoError(func() error {
		if !tainted(ctx, memberCl, node1) {
			return fmt.Errorf("not tainted; recoveries %s", recoveries(ctx, host, pol))
		}
		return nil
	}))
	rec := record(ctx, t, host, member1, node1)
	if rec == nil || rec.Spec.Machine == nil || rec.Spec.Machine.UID != string(mach1.UID) {
		t.Fatalf("record %+v: want the management cluster's Machine %s (uid %s)", rec, mach1.Name, mach1.UID)
	}

	// 2. explain, with the lab's context of the management cluster.
	var kfc kubefedv1beta1.KubeFedCluster
	if err := host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: member1}, &kfc); err != nil {
		t.Fatal(err)
	}
	snap := &cli.Snapshot{Clusters: []kubefedv1beta1.KubeFedCluster{kfc}}
	m, where, note, err := cli.FindMachine(ctx, cli.MachineSource{Host: host, Management: mgmt, ManagementContext: lab.ManagementName}, snap, member1, node1)
	if err != nil || m == nil || m.UID != mach1.UID || !strings.Contains(where, "management cluster") {
		t.Fatalf("explain: Machine %v from %q, note %q, error %v; want %s", m, where, note, err, mach1.Name)
	}

	// 3. The management cluster dies right after node2's evidence was
	// written there, well inside the Lease's silence window: whether or not
	// the manager's cache saw that evidence, no taint (the live re-read of
	// the Machine fails, or no evidence is known), a condition and an event.
	t.Cleanup(func() { _ = l.Restore(context.Background(), node2) })
	poweredOff := time.Now()
	if err := l.PowerOff(ctx, node2, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	if err := l.KillAPIServer(lab.ManagementName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.RestartAPIServer(context.Background(), lab.ManagementName) })
	poll.T(t, 30*time.Second, time.Second, "MachineEvidenceUnavailable", poll.NoError(func() error {
		c := condition(ctx, host, pol, v1alpha1.ConditionMachineEvidenceUnavailable)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonManagementClusterUnavailable ||
			!strings.Contains(c.Message, "fencing evidence unavailable: management cluster of member "+member1) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	}))
	if lostBy := poweredOff.Add(l.Options().NodeMonitorGracePeriod + notReadyFor); time.Now().After(lostBy) {
		t.Fatalf("the condition came after %s could already be lost (%s): the machine is too slow for this test", node2, lostBy.Format(time.RFC3339))
	}
	poll.T(t, 90*time.Second, time.Second, node2+" blocked for lack of evidence", poll.NoError(func() error {
		if strings.Contains(recoveries(ctx, host, pol), node2+" Blocked: not fenced: fencing evidence unavailable: management cluster") {
			return nil
		}
		return fmt.Errorf("recoveries %s", recoveries(ctx, host, pol))
	}))
	for range 20 { // 20 s of passes (ResyncPeriod 2 s): still nothing
		if tainted(ctx, memberCl, node2) {
			t.Fatalf("%s tainted while its management cluster is down", node2)
		}
		time.Sleep(time.Second)
	}
	if !policyEvent(ctx, t, host, pol, noderecovery.ReasonEvidenceUnavailable) {
		t.Errorf("no %s event on the policy", noderecovery.ReasonEvidenceUnavailable)
	}

	// 4. Back: the evidence is read again, the node is recovered.
	if err := l.RestartAPIServer(ctx, lab.ManagementName); err != nil {
		t.Fatal(err)
	}
	poll.T(t, 90*time.Second, time.Second, node2+" tainted once the management cluster is back", poll.NoError(func() error {
		if !tainted(ctx, memberCl, node2) {
			return fmt.Errorf("not tainted; recoveries %s", recoveries(ctx, host, pol))
		}
		return nil
	}))
}

const notReadyFor = 20 * time.Second

// policy is node recovery for every member on Machine infrastructure
// deletion, deleted when the test ends.
func policy(t *testing.T, name string) *v1alpha1.FailoverPolicy {
	t.Helper()
	// Not a storm test: node1 stays lost (recovered, not back) while node2
	// goes, 2 of the member's 3 nodes, which 40 % would hold as a storm.
	pct := intstr.FromString("100%")
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: &v1alpha1.NodeRecoverySpec{
			NotReadyFor: v1alpha1.Duration(notReadyFor.String()), Method: v1alpha1.RecoveryMethodAuto, MaxUnhealthy: &pct,
			StormCooldown: "5s", Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}}}
	host := hostClient(t)
	if err := host.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Delete(context.Background(), p) })
	return p
}

func tainted(ctx context.Context, c client.Client, node string) bool {
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

func recoveries(ctx context.Context, host client.Client, pol *v1alpha1.FailoverPolicy) string {
	var p v1alpha1.FailoverPolicy
	if err := host.Get(ctx, client.ObjectKeyFromObject(pol), &p); err != nil {
		return err.Error()
	}
	var parts []string
	for _, r := range p.Status.Recoveries {
		parts = append(parts, r.Node+" "+string(r.Phase)+": "+r.Message)
	}
	return strings.Join(parts, "; ")
}

func condition(ctx context.Context, host client.Client, pol *v1alpha1.FailoverPolicy, typ string) *metav1.Condition {
	var p v1alpha1.FailoverPolicy
	if err := host.Get(ctx, client.ObjectKeyFromObject(pol), &p); err != nil {
		return nil
	}
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

func record(ctx context.Context, t *testing.T, host client.Client, cluster, node string) *v1alpha1.NodeRecovery {
	t.Helper()
	var list v1alpha1.NodeRecoveryList
	if err := host.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.Cluster == cluster && r.Spec.Node == node && r.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return r
		}
	}
	return nil
}

func policyEvent(ctx context.Context, t *testing.T, host client.Client, pol *v1alpha1.FailoverPolicy, reason string) bool {
	t.Helper()
	var evs eventsv1.EventList
	if err := host.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Kind == "FailoverPolicy" && e.Regarding.Name == pol.Name && e.Reason == reason {
			return true
		}
	}
	return false
}

var (
	hostOnce sync.Once
	hostCl   client.Client
	hostErr  error
)

// hostClient installs fedfailover's CRDs in the lab host (once) and returns
// a client with fedfailover's scheme.
func hostClient(t *testing.T) client.Client {
	t.Helper()
	hostOnce.Do(func() {
		st, err := theLab.State()
		if err != nil {
			hostErr = err
			return
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
		if err != nil {
			hostErr = err
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			hostErr = err
			return
		}
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
			hostErr = fmt.Errorf("installing fedfailover CRDs in the lab host: %w", err)
			return
		}
		s, err := scheme.New()
		if err != nil {
			hostErr = err
			return
		}
		hostCl, hostErr = client.New(cfg, client.Options{Scheme: s})
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostCl
}

// startOperator runs the manager's controllers (controllers.Setup, node
// recovery only) in the test process against the lab host until the test
// ends; its logs are shown when the test fails.
func startOperator(t *testing.T) {
	t.Helper()
	hostClient(t)
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Logger: zap.New(zap.WriteTo(logs), zap.UseDevMode(true)),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := controllers.Setup(ctx, mgr, controllers.Options{
		Members:          member.Options{ProbePeriod: 2 * time.Second, StatusRefresh: 5 * time.Second},
		NodeRecovery:     noderecovery.Options{ResyncPeriod: 2 * time.Second, StatusResync: 5 * time.Second},
		WithoutRebalance: true,
	}); err != nil {
		cancel()
		t.Fatal(err)
	}
	// Registered first, so it runs once the manager stopped.
	t.Cleanup(func() {
		if t.Failed() {
			out := logs.String()
			if len(out) > 30000 {
				out = out[len(out)-30000:]
			}
			t.Logf("manager logs (tail):\n%s", out)
		}
	})
	testenv.RunManager(t, ctx, cancel, mgr)
}
