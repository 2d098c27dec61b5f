//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// nrHost is a client of the lab host that knows the fedfailover types.
var (
	nrHostOnce sync.Once
	nrHostCl   client.Client
	nrHostErr  error
)

// nrHost installs the FailoverPolicy CRD in the lab host (once) and returns
// a client with fedfailover's scheme.
func nrHost(t *testing.T) client.Client {
	t.Helper()
	nrHostOnce.Do(func() {
		cfg, err := nrHostConfig()
		if err != nil {
			nrHostErr = err
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			nrHostErr = err
			return
		}
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
		}); err != nil {
			nrHostErr = fmt.Errorf("installing fedfailover CRDs in the lab host: %w", err)
			return
		}
		s, err := scheme.New()
		if err != nil {
			nrHostErr = err
			return
		}
		nrHostCl, nrHostErr = client.New(cfg, client.Options{Scheme: s})
	})
	if nrHostErr != nil {
		t.Fatal(nrHostErr)
	}
	return nrHostCl
}

func nrHostConfig() (*restConfig, error) {
	st, err := theLab.State()
	if err != nil {
		return nil, err
	}
	return clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
}

// nrPolicy creates a FailoverPolicy with node recovery for every member
// (short times for tests) and deletes it when the test ends.
func nrPolicy(t *testing.T, name string, mutate func(*v1alpha1.NodeRecoverySpec)) *v1alpha1.FailoverPolicy {
	t.Helper()
	host := nrHost(t)
	pct := intstrPct("40%")
	p := &v1alpha1.FailoverPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: &v1alpha1.NodeRecoverySpec{
			NotReadyFor: "5s", Method: v1alpha1.RecoveryMethodAuto, MaxUnhealthy: &pct,
			StormCooldown: "5s",
			Fencing:       v1alpha1.FencingSpec{MachineInfrastructureDeleted: true},
		}},
	}
	if mutate != nil {
		mutate(p.Spec.NodeRecovery)
	}
	if err := host.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		deletePolicy(t, host, p)
		// The storm state must not leak into the next test.
		if err := host.DeleteAllOf(ctx, &v1alpha1.RecoveryGuard{}); err != nil {
			t.Errorf("deleting RecoveryGuards: %v", err)
		}
	})
	return p
}

// deletePolicy deletes a test's policy and waits until it is gone. Its
// finalizers run while a manager does; a test that stopped its managers first
// (cleanups run last-in first-out) leaves them to us after 20 s.
// TestSafetyPolicyDeletedWhileTainted and the rebalance finalizer test check
// the finalizers themselves.
func deletePolicy(t *testing.T, host client.Client, p *v1alpha1.FailoverPolicy) {
	ctx := context.Background()
	if err := host.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting policy: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur := &v1alpha1.FailoverPolicy{}
		err := host.Get(ctx, client.ObjectKeyFromObject(p), cur)
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil && time.Now().After(deadline) {
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Finalizers = nil
			if err := host.Patch(ctx, cur, patch); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the finalizers of policy %s: %v", p.Name, err)
				return
			}
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}
}

// getPolicy reads the policy's current state.
func getPolicy(ctx context.Context, name string) (*v1alpha1.FailoverPolicy, error) {
	p := &v1alpha1.FailoverPolicy{}
	return p, nrHostCl.Get(ctx, client.ObjectKey{Name: name}, p)
}

func policyCondition(ctx context.Context, name, condType string) (*metav1.Condition, error) {
	p, err := getPolicy(ctx, name)
	if err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(p.Status.Conditions, condType), nil
}

func recoveryOf(p *v1alpha1.FailoverPolicy, cluster, node string) *v1alpha1.NodeRecoveryStatus {
	i := slices.IndexFunc(p.Status.Recoveries, func(r v1alpha1.NodeRecoveryStatus) bool { return r.Cluster == cluster && r.Node == node })
	if i < 0 {
		return nil
	}
	return &p.Status.Recoveries[i]
}

func getNode(ctx context.Context, cl client.Client, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	return n, cl.Get(ctx, client.ObjectKey{Name: name}, n)
}

func hasOOSTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// hasLostTaint: the node carries the NoSchedule taint fedfailover puts on a
// node before force-deleting its pods while it still reports Ready.
func hasLostTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == contract.TaintLost && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// nodeEvents returns the reasons of fedfailover's events about a node since
// a time (nodes are reused by the tests).
func nodeEvents(ctx context.Context, cl client.Client, node string, since time.Time) ([]string, error) {
	evs := &corev1.EventList{}
	if err := cl.List(ctx, evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.ReportingController == noderecovery.ReportingController &&
			!e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
			out = append(out, e.Reason)
		}
	}
	return out, nil
}

// runningPod waits for a Ready pod of the StatefulSet/Deployment (by app
// label) and returns it.
func runningPod(t *testing.T, cl client.Client, ns, app string, timeout time.Duration, notOn string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	eventually(t, timeout, app+" pod Ready"+map[bool]string{true: " off " + notOn, false: ""}[notOn != ""], func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, fmt.Sprintf("%s %s on %q deleting=%v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil))
			if lab.PodReady(p) && p.Spec.NodeName != notOn {
				got = p
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
	return got
}

// pinDeployment makes a lab Deployment's pod run on a given node and
// tolerate its loss for 5 minutes.
func pinDeployment(t *testing.T, cl client.Client, ns, name, node string) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	// Keep the taint manager from evicting the pod during the test's window
	// (the lab's default toleration is 30 s): only fedfailover may act on it.
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
	}
	if err := cl.Patch(t.Context(), d, patch); err != nil {
		t.Fatal(err)
	}
}

// volumeOnlyOn checks that pv is attached to node and has no attachment
// anywhere else.
func volumeOnlyOn(ctx context.Context, cl client.Client, pv, node string) (bool, string) {
	att, all, err := attachments(ctx, cl, pv)
	if err != nil {
		return false, err.Error()
	}
	if !slices.Equal(att, []string{node}) || !slices.Equal(all, []string{node}) {
		return false, fmt.Sprintf("volume %s attached to %v, attachments for %v; want only %s", pv, att, all, node)
	}
	return true, ""
}

// restoreAfter powers a node back on when the test ends (if the test did
// not already) and waits for it to be Ready without an out-of-service taint.
// Whether it is still off is the lab's to say: a node found lost by evidence
// is done with while it still reports Ready=True.
func restoreAfter(t *testing.T, cluster, node string) {
	t.Cleanup(func() {
		ctx := context.Background()
		cl := theLab.MustClient(cluster)
		n, err := getNode(ctx, cl, node)
		off, ferr := theLab.Faulted(node)
		if err != nil || ferr != nil || off || lab.NodeReadyStatus(n) != corev1.ConditionTrue || hasOOSTaint(n) || hasLostTaint(n) {
			if err := theLab.Restore(ctx, node); err != nil {
				t.Errorf("restore %s: %v", node, err)
			}
			if err := theLab.WaitNodeReady(ctx, cl, node, corev1.ConditionTrue, 60*time.Second); err != nil {
				t.Errorf("restore %s: %v", node, err)
			}
		}
		// The test's operator (stopped after this cleanup) removes its marks
		// and taint from the Ready node; a failed test may leave them behind,
		// and the next test needs a clean node.
		if err := waitNoMarks(ctx, cl, node, 20*time.Second); err != nil {
			t.Logf("%s: %v; removing them", node, err)
			stripMarks(t, cl, node)
		}
	})
}

// waitNoMarks polls until the node carries no fedfailover mark, no
// out-of-service taint and no failover.fedfailover.io/lost taint.
func waitNoMarks(ctx context.Context, cl client.Client, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := getNode(ctx, cl, node)
		if err == nil && !hasOOSTaint(n) && !hasLostTaint(n) && !hasRecoveryMarks(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("recovery marks or taint still present after %s", timeout)
		}
		time.Sleep(250 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func hasRecoveryMarks(n *corev1.Node) bool {
	for k := range n.Annotations {
		if strings.HasPrefix(k, contract.Prefix) {
			return true
		}
	}
	return false
}

// stripMarks removes every fedfailover annotation, the out-of-service
// taint and fedfailover's own taints from a node.
func stripMarks(t *testing.T, cl client.Client, node string) {
	t.Helper()
	ctx := context.Background()
	n, err := getNode(ctx, cl, node)
	if err != nil {
		t.Errorf("strip marks of %s: %v", node, err)
		return
	}
	upd := n.DeepCopy()
	for k := range upd.Annotations {
		if strings.HasPrefix(k, contract.Prefix) {
			delete(upd.Annotations, k)
		}
	}
	upd.Spec.Taints = slices.DeleteFunc(upd.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == corev1.TaintNodeOutOfService || strings.HasPrefix(tn.Key, contract.Prefix)
	})
	if err := cl.Patch(ctx, upd, client.MergeFrom(n)); err != nil {
		t.Errorf("strip marks of %s: %v", node, err)
	}
}

type restConfig = rest.Config

func intstrPct(s string) intstr.IntOrString { return intstr.FromString(s) }
