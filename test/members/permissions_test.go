package members

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

// withNodeRecovery adds the node recovery controller to a test manager.
func withNodeRecovery(mgr ctrl.Manager, c *member.Cache) error {
	return noderecovery.SetupWithManager(mgr, c, noderecovery.Options{})
}

// leastPrivilege applies `kubectl failover member-rbac`'s objects in the
// member, with the ClusterRole's rules passed through edit, and returns a
// token of its ServiceAccount (envtest runs no token controller to fill
// the token Secret: TokenRequest gives the same ServiceAccount token).
func leastPrivilege(t *testing.T, m *memberEnv, o memberrbac.Options, edit func([]rbacv1.PolicyRule) []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	for _, obj := range memberrbac.Objects(o) {
		obj := obj.(client.Object)
		if cr, ok := obj.(*rbacv1.ClusterRole); ok {
			cr.Rules = edit(cr.Rules)
		}
		if err := m.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() {
			if _, ns := obj.(*corev1.Namespace); !ns {
				_ = m.client.Delete(context.Background(), obj)
			}
		})
	}
	cs, err := kubernetes.NewForConfigAndClient(m.cfg, m.http)
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, o.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	must(t, err)
	tokens.add(tr.Status.Token)
	return tr.Status.Token
}

// setClusterRole replaces the member ClusterRole's rules.
func setClusterRole(t *testing.T, m *memberEnv, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	cr := &rbacv1.ClusterRole{}
	must(t, m.client.Get(context.Background(), client.ObjectKey{Name: name}, cr))
	cr.Rules = rules
	must(t, m.client.Update(context.Background(), cr))
}

// without drops one verb of one resource from rules.
func without(rules []rbacv1.PolicyRule, verb, resource string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if slices.Contains(r.Resources, resource) {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// waitMember waits until the member's status has reason and a message
// containing each of msgs.
func (h *harness) waitMember(t *testing.T, cluster string, connected bool, reason string, msgs ...string) v1alpha1.MemberStatus {
	t.Helper()
	var st v1alpha1.MemberStatus
	eventually(t, 30*time.Second, cluster+" "+reason, func() error {
		st = h.cache.MemberStatuses(context.Background(), []string{cluster})[0]
		if st.Connected != connected || st.Reason != reason {
			return errorf("connected=%v reason=%s message=%q", st.Connected, st.Reason, st.Message)
		}
		for _, m := range msgs {
			if !strings.Contains(st.Message, m) {
				return errorf("message %q lacks %q", st.Message, m)
			}
		}
		return nil
	})
	return st
}

// TestLeastPrivilegeCredentials joins a member in least-privilege mode
// against a member API server that enforces RBAC: fedfailover uses the
// token of the Secret the KubeFedCluster's annotation names (only once it
// is labelled for the member), and a role lacking one permission that a
// code path needs makes the member, its policy and Ready name that
// permission, until it is granted.
func TestLeastPrivilegeCredentials(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions(), withNodeRecovery)
	ctx := context.Background()
	m := f.members["alpha"]
	j := f.join(t, "alpha", "alpha", map[string]string{"least": "privilege"})
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)

	// The generated role minus `list namespaces`, which node recovery needs
	// for a policy with pods.namespaceSelector.
	o := memberrbac.Options{Namespace: "ff-least", Name: "ff-least"}
	token := leastPrivilege(t, m, o, func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule { return without(r, "list", "namespaces") })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: "alpha-fedfailover"},
		Data: map[string][]byte{"token": []byte(token)}}
	must(t, f.host.Create(ctx, secret))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), secret) })

	// Not labelled for the member: refused, and kubefed's token is not used
	// in its place.
	patchKFC(t, f, j, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCredentialsSecret: secret.Name}
	})
	h.waitMember(t, "alpha", false, member.ReasonSecretInvalid, contract.LabelCredentialsFor)
	secret.Labels = map[string]string{contract.LabelCredentialsFor: "alpha"}
	must(t, f.host.Update(ctx, secret))
	h.waitMember(t, "alpha", true, member.ReasonConnected, "with the token of Secret alpha-fedfailover")

	// Node recovery's pass lists the member's namespaces for the selector:
	// the member refuses it, and everything that reports on the member says
	// which permission is missing.
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "least-privilege"},
		Spec: v1alpha1.FailoverPolicySpec{
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"least": "privilege"}},
			NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "60s",
				Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true},
				Pods:    v1alpha1.PodScope{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
		}}
	must(t, f.host.Create(ctx, pol))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), pol) })
	refused := `the member refused: list namespaces (namespaces is forbidden: User "system:serviceaccount:ff-least:ff-least" cannot list resource "namespaces"`
	h.waitMember(t, "alpha", true, member.ReasonMemberPermissionDenied, refused)
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMemberPermissionDenied)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "member alpha: "+refused) {
			return errorf("MemberPermissionDenied %+v", c)
		}
		r := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionFalse || r.Reason != v1alpha1.ReasonMemberPermissionDenied {
			return errorf("Ready %+v, want False/MemberPermissionDenied", r)
		}
		return nil
	})
	eventually(t, 10*time.Second, "MemberPermissionDenied event", func() error {
		for _, e := range f.events(t, "alpha") {
			if e.Reason == member.ReasonMemberPermissionDenied && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "list namespaces") {
				return nil
			}
		}
		return errors.New("no MemberPermissionDenied warning naming list namespaces")
	})

	// Granted: the access review clears it without waiting for the pass.
	setClusterRole(t, m, o.Name, memberrbac.ClusterRules())
	h.waitMember(t, "alpha", true, member.ReasonConnected)
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		if err := wantConditionStatus(p, v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionFalse); err != nil {
			return err
		}
		return wantConditionStatus(p, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})

	// A write the role forbids: the same, through the member client every
	// controller writes with.
	setClusterRole(t, m, o.Name, without(memberrbac.ClusterRules(), "patch", "nodes"))
	n := readyNode(t, m, "least-node")
	c, err := h.cache.GetClient(ctx, "alpha")
	must(t, err)
	eventually(t, 10*time.Second, "node in the member cache", func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(n), &corev1.Node{})
	})
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`))
	if err := c.Patch(ctx, n.DeepCopy(), patch); !apierrors.IsForbidden(err) {
		t.Fatalf("patching a node without the permission: %v, want Forbidden", err)
	}
	h.waitMember(t, "alpha", true, member.ReasonMemberPermissionDenied, `the member refused: patch nodes (nodes "least-node" is forbidden`)
	setClusterRole(t, m, o.Name, memberrbac.ClusterRules())
	// The member's authorizer follows the role within moments; the patch
	// that succeeds then clears the refusal as well.
	eventually(t, 10*time.Second, "patch granted", func() error { return c.Patch(ctx, n.DeepCopy(), patch) })
	h.waitMember(t, "alpha", true, member.ReasonConnected)
}

// TestLeastPrivilegeCacheSync: a role without `watch` and `list` of a
// cached kind keeps the member's cache from syncing: the member stays
// unknown, says which permission it lacks at once, and is torn down with
// that reason when the sync stalls.
func TestLeastPrivilegeCacheSync(t *testing.T) {
	f := env(t)
	opts := testOptions()
	opts.SyncStallTimeout = 3 * time.Second
	h := startManager(t, f, opts)
	ctx := context.Background()
	m := f.members["beta"]
	o := memberrbac.Options{Namespace: "ff-sync", Name: "ff-sync"}
	token := leastPrivilege(t, m, o, func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		return without(without(r, "list", "csidrivers"), "watch", "csidrivers")
	})
	j := f.join(t, "beta", "beta", nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: "beta-fedfailover",
		Labels: map[string]string{contract.LabelCredentialsFor: "beta"}}, Data: map[string][]byte{"token": []byte(token)}}
	must(t, f.host.Create(ctx, secret))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), secret) })
	patchKFC(t, f, j, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCredentialsSecret: secret.Name}
	})
	st := h.waitMember(t, "beta", false, member.ReasonMemberPermissionDenied, "csidrivers.storage.k8s.io")
	if !strings.Contains(st.Message, "syncing") && !strings.Contains(st.Message, "torn down") {
		t.Errorf("message %q: want the sync's state", st.Message)
	}
	if !h.cache.Unknown("beta") && h.cache.EverConnected("beta") {
		t.Error("a member whose cache never synced is known")
	}
	h.waitMember(t, "beta", false, member.ReasonMemberPermissionDenied, "cache sync made no progress")
	setClusterRole(t, m, o.Name, memberrbac.ClusterRules())
	h.waitMember(t, "beta", true, member.ReasonConnected, "with the token of Secret beta-fedfailover")
}
