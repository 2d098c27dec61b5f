package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/logbuf"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// host is one envtest API server with fedfailover's, kubefed's and Cluster
// API's CRDs, and kubeconfigs for an admin, for a user without RBAC and
// for one the viewer ClusterRole is bound to (by testViewer).
type host struct {
	admin, nobody, viewer string // kubeconfig paths
	c                     client.Client
}

func startHost(t *testing.T) *host {
	t.Helper()
	files, err := paths.HostCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Environment(files...)
	if err != nil {
		t.Fatal(err)
	}
	// Shared machines can be slow to start an API server.
	env.ControlPlaneStartTimeout = 3 * time.Minute
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &host{}
	if h.c, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	h.admin = writeKubeconfig(t, env, "admin", "system:masters")
	h.nobody = writeKubeconfig(t, env, "nobody")
	h.viewer = writeKubeconfig(t, env, viewerUser)
	return h
}

func writeKubeconfig(t *testing.T, env *envtest.Environment, name string, groups ...string) string {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run executes `kubectl failover args...` and returns stdout and the error.
func run(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t.Context(), args...)
	if err != nil {
		t.Fatalf("kubectl failover %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestCommandsOnAPIServer runs every command of docs/cli.md against a real
// API server holding a small federation's host objects.
func TestCommandsOnAPIServer(t *testing.T) {
	h := startHost(t)
	seedHost(t, h.c)
	kc := "--kubeconfig=" + h.admin

	t.Run("status", func(t *testing.T) {
		out := mustRun(t, "status", kc)
		wantLines(t, out, "MEMBER ", "member1   Yes         True            2/3     1      1        No",
			"member2   No          False           0/0     0      0        Yes", "default   Recovery(Auto)+Rebalance   No        1/2",
			"demo/web   default   member1   w=1        w=4,min=4,max=4   4          Yes",
			"PODS   LOST   ACTED   RECOVERED   MESSAGE",
			"member1/m1-node-2   Recovered   MachineInfrastructureDeleted   OutOfServiceTaint   1      20m    19m     18m         1 claims run on other nodes",
			"2 finished recoveries are kept on the host", "TaintedOutOfService")
	})
	t.Run("status wide", func(t *testing.T) {
		wantLines(t, mustRun(t, "status", "-o", "wide", kc, "--context", "envtest"), "VERSION", "MemberFailed", "ProbeFailed",
			"DRY-RUN   MIGRATED   RECORD", "member1.m1-node-2.active")
	})
	t.Run("status json and yaml", func(t *testing.T) {
		var v cli.StatusView
		if err := json.Unmarshal([]byte(mustRun(t, "status", "-o", "json", kc)), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Members) != 2 || len(v.RSPs) != 1 || len(v.Recoveries) != 1 || v.FinishedRecoveries != 2 {
			t.Errorf("json: %d members, %d RSPs, %d recoveries, %d finished; want 2, 1, 1, 2", len(v.Members), len(v.RSPs), len(v.Recoveries), v.FinishedRecoveries)
		}
		if r := v.Recoveries[0]; r.Record != "member1.m1-node-2.active" || r.ActedAt == nil || r.RecoveredAt == nil {
			t.Errorf("json: recovery %+v, want the active NodeRecovery record", r)
		}
		wantLines(t, mustRun(t, "status", "-o", "yaml", kc), "replicaSchedulingPreferences:", "kubefedReady: \"True\"")
	})
	t.Run("status -n filters RSPs", func(t *testing.T) {
		wantLines(t, mustRun(t, "status", "-n", "other", kc), "No ReplicaSchedulingPreference in the host cluster.")
	})
	t.Run("explain node", func(t *testing.T) {
		out := mustRun(t, "explain", "node", "member1/m1-node-2", kc)
		wantLines(t, out, "Verdict:          Recovered", "Name:           fleet/m1-node-2",
			"Fenced:         Yes (MachineInfrastructureDeleted)", "TaintedOutOfService (MachineInfrastructureDeleted)")
		wantLines(t, out, "- member1.m1-node-2.active (active)", "Claims:       demo/data-db-0", "Node UID:     uid-m1-node-2",
			"- member1.m1-node-2.returned (finished)", "Reason:       NodeReturned", "migrated from an older fedfailover",
			"RecoveryGuard:  none (no storm recorded in this member)", "recovery annotations an older fedfailover left on the member's Node are ignored")
		if strings.Index(out, ".active (active)") > strings.Index(out, ".returned (finished)") {
			t.Errorf("finished record listed before the active one:\n%s", out)
		}
		out = mustRun(t, "explain", "node", "member1/m1-node-1", kc, "-o", "json")
		wantLines(t, out, `"verdict": "Not lost"`, `"Machine fleet/m1-node-1 is not being deleted"`)
	})
	t.Run("explain node from finished records", func(t *testing.T) {
		out := mustRun(t, "explain", "node", "member1/m1-node-3", kc)
		wantLines(t, out, "Verdict:          No recovery in progress", "(KubeletBack)", "- member1.m1-node-3.dry-run (finished)",
			"dry run: decided and reported, nothing written to the member")
	})
	t.Run("explain node storm guard", func(t *testing.T) {
		out := mustRun(t, "explain", "node", "member2/m2-node-1", kc)
		wantLines(t, out, "State:          ACTIVE: recovery suspended in this member", "RecoveryGuard:  member2",
			"Message:        member2: 3 of 3 nodes lost", "Records:          no NodeRecovery record for this node")
	})
	t.Run("plan", func(t *testing.T) {
		out := mustRun(t, "plan", "--fail", "member1", kc)
		// member2 is down too (failing, not failed yet: no onset recorded):
		// with member1 failed that is both members, and the federation
		// guard keeps what kubefed has.
		wantLines(t, out, "What if member1 fails", "demo/web   member1   Failed    4          4         =        No      TooManyMembersFailed")
		out = mustRun(t, "plan", "--full", "member1", "-o", "wide", kc)
		wantLines(t, out, "What if member1 is full", "PLANNED-PREFS")
		assertRSPUnchanged(t, h.c)
	})
	t.Run("errors", func(t *testing.T) { testErrors(t, h) })
	t.Run("watch", func(t *testing.T) { testWatch(t, h) })
	t.Run("output formats", func(t *testing.T) { testOutputFormats(t, h) })
	t.Run("watch -o json", func(t *testing.T) { testWatchDocuments(t, h, "json") })
	t.Run("watch -o yaml", func(t *testing.T) { testWatchDocuments(t, h, "yaml") })
	t.Run("completion", func(t *testing.T) { testCompletion(t, h) })
	t.Run("kubectl get records", func(t *testing.T) { testKubectlGet(t, h) })
	t.Run("krew release and completion through kubectl", func(t *testing.T) { testKrewRelease(t, h) })
	t.Run("docs", func(t *testing.T) { testDocs(t, h) })
	t.Run("viewer role", func(t *testing.T) { testViewer(t, h) })
	t.Run("CRDs missing", func(t *testing.T) { testCRDsMissing(t, h) })
}

func testErrors(t *testing.T, h *host) {
	cases := map[string]struct {
		args []string
		want []string
	}{
		"unknown context": {[]string{"status", "--kubeconfig=" + h.admin, "--context", "nope"}, []string{`unknown context "nope"`, "kubectl config get-contexts"}},
		"forbidden":       {[]string{"status", "--kubeconfig=" + h.nobody}, []string{"forbidden", "failoverpolicies.failover.fedfailover.io cluster-wide"}},
		"unknown member":  {[]string{"plan", "--fail", "nope", "--kubeconfig=" + h.admin}, []string{`unknown member cluster "nope"`, "member1, member2"}},
		"plan needs flag": {[]string{"plan", "--kubeconfig=" + h.admin}, []string{"fail", "full"}},
		"bad node arg":    {[]string{"explain", "node", "m1-node-1", "--kubeconfig=" + h.admin}, []string{"want CLUSTER/NODE"}},
		"bad output": {[]string{"status", "-o", "table", "--kubeconfig=" + h.admin},
			[]string{`unable to match a printer suitable for the output format "table"`, "allowed formats are:", "go-template", "json", "jsonpath", "name", "wide", "yaml"}},
		"bad plan output":           {[]string{"plan", "--fail", "member1", "-o", "custom-columns=N:.name", "--kubeconfig=" + h.admin}, []string{"allowed formats are:"}},
		"bad explain output":        {[]string{"explain", "node", "member1/m1-node-1", "-o", "jsn", "--kubeconfig=" + h.admin}, []string{"allowed formats are:"}},
		"jsonpath without template": {[]string{"status", "-o", "jsonpath", "--kubeconfig=" + h.admin}, []string{"template format specified but no template given"}},
		"unknown explain":           {[]string{"explain", "node", "nope/x", "--kubeconfig=" + h.admin}, []string{`unknown member cluster "nope"`}},
		"mutually exclude":          {[]string{"plan", "--fail", "member1", "--full", "member2", "--kubeconfig=" + h.admin}, []string{"none of the others can be"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := run(t.Context(), c.args...)
			if err == nil {
				t.Fatal("no error")
			}
			wantLines(t, err.Error(), c.want...)
		})
	}
}

func waitFor(t *testing.T, out *logbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("watch output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testCRDsMissing deletes fedfailover's CRD (last, on the shared server):
// the CLI then says how to install it, and a running `status --watch` ends
// with the same message.
func testCRDsMissing(t *testing.T, h *host) {
	var out logbuf.Buffer
	watch := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	watch.SetArgs([]string{"status", "--watch", "--kubeconfig=" + h.admin})
	watched := make(chan error, 1)
	go func() { watched <- watch.ExecuteContext(t.Context()) }()
	waitFor(t, &out, "member1/m1-node-2")

	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("failoverpolicies.failover.fedfailover.io")
	if err := h.c.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watched:
		if err == nil {
			t.Fatal("status --watch ended without an error after the CRD was deleted")
		}
		wantLines(t, err.Error(), "failoverpolicies.failover.fedfailover.io is not served", "kubectl apply -f config/crd/bases")
	case <-time.After(2 * time.Minute):
		t.Fatalf("status --watch still running two minutes after the CRD was deleted:\n%s", out.String())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := run(t.Context(), "status", "--kubeconfig="+h.admin)
		if err != nil && strings.Contains(err.Error(), "is not served") {
			wantLines(t, err.Error(), "failoverpolicies.failover.fedfailover.io is not served", "kubectl apply -f config/crd/bases", "charts/fedfailover")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting the CRD: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func assertRSPUnchanged(t *testing.T, c client.Client) {
	t.Helper()
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "demo", Name: "web"}, r); err != nil {
		t.Fatal(err)
	}
	if r.Generation != 1 {
		t.Errorf("plan wrote the RSP: generation %d", r.Generation)
	}
}

// webState is demo/web's state, as its RebalanceRecord holds it (in the
// legacy annotation's JSON).
const webState = `{"policy":"default","baseline":{"totalReplicas":4,"clusters":{"member1":{"minReplicas":0,"weight":1},` +
	`"member2":{"minReplicas":0,"weight":1}}},"applied":{"totalReplicas":4,"clusters":{` +
	`"member1":{"minReplicas":4,"maxReplicas":4,"weight":4},"member2":{"minReplicas":0,"maxReplicas":0,"weight":0}}}}`

// seedHost writes what fedfailover and kubefed would have written: two
// members (member2 down), a policy with a recovered node and a shifted RSP,
// and the Cluster API Cluster and Machines of member1.
func seedHost(t *testing.T, c client.Client) {
	t.Helper()
	ctx := t.Context()
	for _, ns := range []string{cli.DefaultKubefedNamespace, "demo", "fleet"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	seedClusters(t, c)
	four, zero := int64(4), int64(0)
	state, err := contract.DecodeRebalanceState(map[string]string{contract.AnnotationRebalance: webState})
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: state.RecordSpec()})
	create(t, c, &fedschedv1a1.ReplicaSchedulingPreference{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 4,
			Clusters: map[string]fedschedv1a1.ClusterPreferences{"member1": {MinReplicas: 4, MaxReplicas: &four, Weight: 4},
				"member2": {MaxReplicas: &zero}}},
	})
	pol := seedPolicy()
	status := pol.Status
	create(t, c, pol)
	pol.Status = status
	if err := c.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	// member1's Cluster API Cluster, found by name and endpoint: its
	// Machines are the ones the controllers (and so explain) use.
	create(t, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member1"},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "member1.invalid", Port: 6443}}})
	seedMachine(t, c, "m1-node-1", false)
	seedMachine(t, c, "m1-node-2", true)
	seedRecords(t, c, pol)
}

// seedRecords writes the NodeRecovery records and the RecoveryGuard the
// manager would have: m1-node-2 recovered now (its active record) and once
// before (a record migrated from node annotations, closed), m1-node-3 lost
// under dry run and back, and a storm in member2.
func seedRecords(t *testing.T, c client.Client, pol *v1alpha1.FailoverPolicy) {
	t.Helper()
	at := func(d time.Duration) *metav1.Time {
		mt := metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
		return &mt
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FailoverPolicy", Name: pol.Name, UID: pol.UID}
	rec := func(name, node string, lost time.Duration, st v1alpha1.NodeRecoveryRecordStatus) {
		r := &v1alpha1.NodeRecovery{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: node, NodeUID: "uid-" + node, ProviderID: "kwok://" + node,
				Policy: pol.Name, LostSince: at(lost)}}
		create(t, c, r)
		st.ObservedAt = at(lost)
		r.Status = st
		if err := c.Status().Update(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	rec("member1.m1-node-2.active", "m1-node-2", 20*time.Minute, v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseRecovered,
		Evidence: "MachineInfrastructureDeleted", Method: v1alpha1.RecoveryMethodOutOfServiceTaint, Claims: []string{"demo/data-db-0"},
		IntentAt: at(19 * time.Minute), ActedAt: at(19 * time.Minute), RecoveredAt: at(18 * time.Minute), Message: "1 claims run on other nodes, 3.1s after fencing"})
	rec("member1.m1-node-2.returned", "m1-node-2", 3*time.Hour, v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseFinished,
		FinishReason: v1alpha1.FinishNodeReturned, Evidence: "MachineInfrastructureDeleted", Method: v1alpha1.RecoveryMethodForceDelete, Migrated: true,
		ActedAt: at(3 * time.Hour), FinishedAt: at(2 * time.Hour), Message: "Node m1-node-2 is Ready again"})
	rec("member1.m1-node-3.dry-run", "m1-node-3", time.Hour, v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseFinished,
		FinishReason: v1alpha1.FinishKubeletBack, DryRun: true, Evidence: "MachineInfrastructureDeleted", Method: v1alpha1.RecoveryMethodOutOfServiceTaint,
		FinishedAt: at(50 * time.Minute), Message: "the node's kubelet reported again"})
	g := &v1alpha1.RecoveryGuard{ObjectMeta: metav1.ObjectMeta{Name: "member2"}}
	create(t, c, g)
	g.Status = v1alpha1.RecoveryGuardStatus{StormActive: true, Message: "member2: 3 of 3 nodes lost, more than maxUnhealthy allows (1); recovery suspended"}
	if err := c.Status().Update(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "member1-kernel"}, Spec: v1alpha1.MemberMaintenanceSpec{Member: "member1"}}
	create(t, c, mm)
	mm.Status = v1alpha1.MemberMaintenanceStatus{ObservedGeneration: mm.Generation, Moved: 2, Share: 3, Pending: 1,
		Progress: "2 of 3 replicas moved off member1, 1 not Ready yet on member2",
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMaintenanceAccepted,
				Message: "the other members have room", ObservedGeneration: mm.Generation, LastTransitionTime: metav1.Now()},
			{Type: v1alpha1.ConditionDrained, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDraining,
				Message: "2 of 3 replicas moved off member1", ObservedGeneration: mm.Generation, LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(t.Context(), mm); err != nil {
		t.Fatal(err)
	}
}

func seedClusters(t *testing.T, c client.Client) {
	t.Helper()
	for name, ready := range map[string]corev1.ConditionStatus{"member1": corev1.ConditionTrue, "member2": corev1.ConditionFalse} {
		k := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: cli.DefaultKubefedNamespace, Name: name},
			Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: "https://" + name + ".invalid:6443", SecretRef: kubefedv1beta1.LocalSecretReference{Name: name}}}
		create(t, c, k)
		now := metav1.Now()
		k.Status.Conditions = []kubefedv1beta1.ClusterCondition{{Type: "Ready", Status: ready, LastProbeTime: now, LastTransitionTime: &now}}
		if err := c.Status().Update(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
}

func seedPolicy() *v1alpha1.FailoverPolicy {
	now := metav1.Now()
	ago := metav1.NewTime(now.Add(-2 * time.Minute))
	return &v1alpha1.FailoverPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.FailoverPolicySpec{
			NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "60s", Method: v1alpha1.RecoveryMethodAuto, StormCooldown: "5m",
				Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}},
			Rebalance: &v1alpha1.RebalanceSpec{CapacityExhaustedAfter: "10s", ClusterFailedAfter: "20s", MinInterval: "30s",
				Failback: v1alpha1.FailbackSpec{StabilizationWindow: "2m", MaxStep: 2, MakeBeforeBreak: true}},
		},
		Status: v1alpha1.FailoverPolicyStatus{
			ConnectedMembers: 1,
			Members: []v1alpha1.MemberStatus{
				{Name: "member1", Connected: true, Reason: "Connected", LastProbeTime: &now, ServerVersion: "v1.37.2", NodesReady: 2, NodesTotal: 3},
				{Name: "member2", Connected: false, Reason: "ProbeFailed", Message: "connection refused", LastProbeTime: &now},
			},
			Recoveries: []v1alpha1.NodeRecoveryStatus{{Cluster: "member1", Node: "m1-node-2", Machine: "fleet/m1-node-2", Phase: v1alpha1.RecoveryPhaseRecovered,
				LostSince: &ago, FencedAt: &ago, Evidence: "MachineInfrastructureDeleted", Method: v1alpha1.RecoveryMethodOutOfServiceTaint, AffectedPods: 1}},
			Rebalances: []v1alpha1.RebalanceStatus{{Namespace: "demo", Name: "web", Shifted: true, Reason: "MemberFailed", LastChangeTime: &ago}},
			RecentDecisions: []v1alpha1.Decision{{Time: ago, Cluster: "member1", Object: "Node/m1-node-2", Action: "TaintedOutOfService",
				Reason: "MachineInfrastructureDeleted", Message: "fenced: Machine fleet/m1-node-2 is being deleted"}},
		},
	}
}

// seedMachine creates member1's Machine of node; a deleting one is held by
// its finalizer with its infrastructure reported deleted.
func seedMachine(t *testing.T, c client.Client, node string, deleting bool) {
	t.Helper()
	ctx := t.Context()
	secret := "bootstrap-" + node
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: node, Labels: map[string]string{clusterv1.ClusterNameLabel: "member1"},
			Finalizers: []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{ClusterName: "member1", Bootstrap: clusterv1.Bootstrap{DataSecretName: &secret}, ProviderID: "test://" + node,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.io", Kind: "TestMachine", Name: node}},
	}
	create(t, c, m)
	if deleting {
		if err := c.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
	}
	infra := metav1.Condition{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.MachineInfrastructureReadyReason, LastTransitionTime: metav1.Now()}
	if deleting {
		infra.Status, infra.Reason = metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason
	}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	m.Status.Conditions = []metav1.Condition{infra}
	if err := c.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// testDocs runs every `$ kubectl failover ...` line of docs/cli.md against
// the seeded host. A line ending in "# fails: TEXT" must fail with TEXT;
// --watch lines run for two seconds. Single quotes group words as in a
// shell (the -o templates).
func testDocs(t *testing.T, h *host) {
	runDocCommands(t, h.admin)
}

// runDocCommands runs the docs/cli.md commands with a kubeconfig.
func runDocCommands(t *testing.T, kubeconfig string) {
	doc := readRepoFile(t, "docs/cli.md")
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		cmdline, ok := strings.CutPrefix(strings.TrimSpace(line), "$ kubectl failover ")
		if !ok {
			continue
		}
		n++
		cmdline, fails, _ := strings.Cut(cmdline, "# fails: ")
		args := append(shellWords(t, cmdline), "--kubeconfig="+kubeconfig)
		t.Run(strings.TrimSpace(cmdline), func(t *testing.T) { runDocCommand(t, args, strings.TrimSpace(fails)) })
	}
	if n < 8 {
		t.Fatalf("found only %d commands in docs/cli.md", n)
	}
}

// shellWords splits a command line as a shell does with single quotes
// only: a quoted part is literal, spaces included.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, word.String())
				word.Reset()
			}
			inWord = false
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced single quote in %q", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

func runDocCommand(t *testing.T, args []string, fails string) {
	ctx := t.Context()
	if slices.Contains(args, "--watch") || slices.Contains(args, "-w") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	out, err := run(ctx, args...)
	switch {
	case fails == "" && err != nil:
		t.Fatalf("%v\n%s", err, out)
	case fails != "" && (err == nil || !strings.Contains(err.Error(), fails)):
		t.Fatalf("want an error with %q, got %v", fails, err)
	case fails == "" && strings.TrimSpace(out) == "":
		t.Fatal("no output")
	}
}
