package members

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

// TestOwnersWithAnOlderMemberRole: a member whose fedfailover role predates
// the workload owners' cache (get Deployments, get and list ReplicaSets,
// no watch) still gives rebalance its owner chain, read live, and the
// member reports the permission it refused; once granted, the reads follow
// the member through the cache.
func TestOwnersWithAnOlderMemberRole(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	ctx := context.Background()
	m := f.members["alpha"]
	o := memberrbac.Options{Namespace: "ff-owners", Name: "ff-owners"}
	token := leastPrivilege(t, m, o, func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		return without(without(without(r, "list", "deployments"), "watch", "deployments"), "watch", "replicasets")
	})
	j := f.join(t, "alpha", "owners", nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: "owners-fedfailover",
		Labels: map[string]string{contract.LabelCredentialsFor: "owners"}}, Data: map[string][]byte{"token": []byte(token)}}
	must(t, f.host.Create(ctx, secret))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), secret) })
	patchKFC(t, f, j, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCredentialsSecret: secret.Name}
	})
	h.waitMember(t, "owners", true, member.ReasonConnected, "with the token of Secret owners-fedfailover")

	must(t, m.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owners-demo"}}))
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "owners-demo", Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}}}
	must(t, m.client.Create(ctx, d))
	key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	replicas := func() (int32, error) {
		owners, err := h.cache.Owners(ctx, "owners")
		if err != nil {
			return 0, err
		}
		got, err := owners.Deployment(ctx, key)
		if err != nil {
			return 0, err
		}
		if _, err := owners.ReplicaSetsOf(ctx, got); err != nil {
			return 0, err
		}
		return *got.Spec.Replicas, nil
	}
	// The first read starts the owner informers, which the member refuses.
	if n, err := replicas(); err != nil || n != 2 {
		t.Fatalf("owner chain with the older role: %d replicas, %v; want 2, read live", n, err)
	}
	h.waitMember(t, "owners", true, member.ReasonMemberPermissionDenied, "list deployments.apps")
	if n, err := replicas(); err != nil || n != 2 {
		t.Errorf("owner chain while the member refuses the cache: %d replicas, %v; want 2, read live", n, err)
	}

	setClusterRole(t, m, o.Name, memberrbac.ClusterRules())
	h.waitMember(t, "owners", true, member.ReasonConnected)
	d.Spec.Replicas = ptr.To(int32(4))
	must(t, m.client.Update(ctx, d))
	eventually(t, 60*time.Second, "the owner chain at 4 replicas", func() error {
		n, err := replicas()
		if err == nil && n != 4 {
			return errorf("%d replicas", n)
		}
		return err
	})
}
