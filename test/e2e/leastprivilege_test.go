//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberrbac"
	"github.com/fedfailover/fedfailover/test/lab"
)

// headerCommands are the shell commands of `kubectl failover member-rbac`'s
// header, in order, with the host's placeholder context named: step 1
// (apply in the member), then steps 2 and 3 (the Secret and the
// annotation in the host). A line ending in "|" goes on on the next.
func headerCommands(manifest string) []string {
	var cmds []string
	cont := false
	for _, line := range strings.Split(manifest, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if !strings.HasPrefix(body, "kubectl ") && !cont {
			continue
		}
		body = strings.ReplaceAll(body, "--context HOST", "--context "+lab.HostName)
		if cont {
			cmds[len(cmds)-1] += " " + body
		} else {
			cmds = append(cmds, body)
		}
		cont = strings.HasSuffix(body, "|")
	}
	return cmds
}

// joinLeastPrivilege puts a member in least-privilege mode exactly as the
// header of `kubectl failover member-rbac --member CLUSTER` says, running
// its commands with the plugin and kubectl on PATH and the lab's
// kubeconfig, and undoes it when the test ends.
func joinLeastPrivilege(t *testing.T, cli, cluster string) {
	t.Helper()
	kubectl := deployTool(t, "kubectl")
	// kubectl finds the plugin on PATH; both in one directory of their own.
	dir := t.TempDir()
	for _, bin := range []string{kubectl, cli} {
		if err := os.Symlink(bin, filepath.Join(dir, filepath.Base(bin))); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"KUBECONFIG=" + theLab.Kubeconfig(), "PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
	manifest := string(runTool(t, nil, env, cli, "member-rbac", "--member", cluster))
	cmds := headerCommands(manifest)
	if len(cmds) != 4 {
		t.Fatalf("the header of member-rbac has %d commands, want 4 (apply; create, label the Secret; annotate):\n%v", len(cmds), cmds)
	}
	sh := func(cmd string) { t.Helper(); runTool(t, nil, env, "bash", "-o", "pipefail", "-c", cmd) }
	t.Cleanup(func() {
		// Back to kubefed's token for the next tests, whatever happened.
		ctx := context.Background()
		host := theLab.MustClient(lab.HostName)
		kfc := &kubefedv1beta1.KubeFedCluster{}
		if err := host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: cluster}, kfc); err == nil {
			patch := client.MergeFrom(kfc.DeepCopy())
			delete(kfc.Annotations, contract.AnnotationCredentialsSecret)
			if err := host.Patch(ctx, kfc, patch); err != nil {
				t.Errorf("removing the annotation of %s: %v", cluster, err)
			}
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: lab.KubefedNS, Name: cluster + "-fedfailover"}}
		if err := host.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", secret.Name, err)
		}
		m := theLab.MustClient(cluster)
		for _, obj := range memberrbac.Objects(memberrbac.Options{}) {
			if err := m.Delete(ctx, obj.(client.Object)); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %T from %s: %v", obj, cluster, err)
			}
		}
	})

	sh(cmds[0])
	// The member's kube-controller-manager fills the token Secret.
	member := theLab.MustClient(cluster)
	eventually(t, 60*time.Second, cluster+": the token Secret filled", func(ctx context.Context) (bool, string) {
		s := &corev1.Secret{}
		key := client.ObjectKey{Namespace: memberrbac.DefaultNamespace, Name: memberrbac.TokenSecretName(memberrbac.DefaultName)}
		if err := member.Get(ctx, key, s); err != nil {
			return false, err.Error()
		}
		return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, "no token yet"
	})
	for _, c := range cmds[1:] {
		sh(c)
	}
}

// noPermissionDenied: no policy says a member refused fedfailover, and no
// KubeFedCluster had a MemberPermissionDenied event since start.
func noPermissionDenied(ctx context.Context, since time.Time, policies ...string) (bool, string) {
	for _, name := range policies {
		p, err := getPolicy(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMemberPermissionDenied); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Sprintf("policy %s: %s", name, c.Message)
		}
	}
	var evs eventsv1.EventList
	if err := theLab.MustClient(lab.HostName).List(ctx, &evs, client.InNamespace(lab.KubefedNS)); err != nil {
		return false, err.Error()
	}
	for _, e := range evs.Items {
		if e.Reason == v1alpha1.ReasonMemberPermissionDenied && e.Regarding.Kind == "KubeFedCluster" && !e.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
			return false, fmt.Sprintf("event on %s: %s", e.Regarding.Name, e.Note)
		}
	}
	return true, ""
}

// TestLeastPrivilegeMembers joins both members in least-privilege mode, by
// the commands `kubectl failover member-rbac` prints, and runs a node
// recovery (taint, force delete, replacement with its volume, taint
// removal) and a capacity shift and its failback with fedfailover holding
// nothing but that role in the members: nothing is refused, and both work
// as with kubefed's cluster-admin token.
func TestLeastPrivilegeMembers(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	cli := buildCLI(t)
	for _, m := range theLab.Members() {
		joinLeastPrivilege(t, cli, m)
	}
	startOperator(t, withNodeRecovery, func(o *controllers.Options) { o.WithoutRebalance = false })
	nr := nrPolicy(t, "least-privilege-recovery", nil)
	eventually(t, 90*time.Second, "every member connected with its own token", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, nr.Name)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range theLab.Members() {
			i := slices.IndexFunc(p.Status.Members, func(s v1alpha1.MemberStatus) bool { return s.Name == m })
			if i < 0 || !p.Status.Members[i].Connected ||
				!strings.Contains(p.Status.Members[i].Message, "with the token of Secret "+m+"-fedfailover") {
				return false, fmt.Sprintf("members %+v", p.Status.Members)
			}
		}
		return true, ""
	})

	// A node recovery in member1.
	const cluster, ns = "member1", "least-privilege-sts"
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, node+" tainted out-of-service", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return hasOOSTaint(n), "Ready=" + string(lab.NodeReadyStatus(n))
	})
	repl := runningPod(t, cl, ns, "db", 90*time.Second, node)
	eventually(t, 60*time.Second, "volume attached only to the replacement's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
	eventually(t, 30*time.Second, "the policy reports the node Recovered", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, nr.Name)
		if err != nil {
			return false, err.Error()
		}
		r := recoveryOf(p, cluster, node)
		return r != nil && r.Phase == v1alpha1.RecoveryPhaseRecovered, fmt.Sprintf("recovery %+v", r)
	})
	eventually(t, 10*time.Second, "events on the node", func(ctx context.Context) (bool, string) {
		evs, err := nodeEvents(ctx, cl, node, start)
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0, "no event written with the least-privilege token"
	})
	if err := theLab.Restore(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, node+" Ready and the taint removed", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return lab.NodeReadyStatus(n) == corev1.ConditionTrue && !hasOOSTaint(n), fmt.Sprintf("Ready=%s taints=%v", lab.NodeReadyStatus(n), n.Spec.Taints)
	})
	if ok, why := noPermissionDenied(ctx, start, nr.Name); !ok {
		t.Fatalf("after the recovery: %s", why)
	}

	// A shift away from member2 without room, and back.
	const rns, name, total = "least-privilege-rebalance", "web", 6
	restore := exhaust(t)
	rb := rbPolicy(t, "least-privilege-rebalance", rns, nil)
	federatedWorkload(t, rns, name, total)
	waitUnschedulable(t, rns)
	eventually(t, 90*time.Second, "all replicas Ready in member1, none wanted in member2", func(ctx context.Context) (bool, string) {
		return split(ctx, rns, name, total, 0)
	})
	restore()
	eventually(t, 3*time.Minute, "baseline back, replicas split 3/3", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, rns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) {
			return false, rspString(r)
		}
		return split(ctx, rns, name, total/2, total/2)
	})
	if ok, why := noPermissionDenied(ctx, start, nr.Name, rb.Name); !ok {
		t.Fatalf("after the shift: %s", why)
	}
}
