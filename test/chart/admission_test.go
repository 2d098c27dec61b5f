package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/poll"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// managerUser is the manager's ServiceAccount as both renderings install it.
const managerUser = "system:serviceaccount:" + namespace + ":" + managerName

// TestOnlyTheManagerWritesRecords applies the records admission policy of
// each rendering to a real API server and writes NodeRecovery,
// RecoveryGuard and RebalanceRecord objects as the manager, as another admin and as the garbage
// collector.
func TestOnlyTheManagerWritesRecords(t *testing.T) {
	renderings := map[string][]*unstructured.Unstructured{
		"kustomize": kustomize(t, false),
		"helm":      helmTemplate(t),
	}
	for name, objs := range renderings {
		t.Run(name, func(t *testing.T) {
			cfg := testenv.Start(t)
			admin := newClient(t, cfg, "")
			var policies int
			for _, o := range objs {
				if k := o.GetKind(); k == "ValidatingAdmissionPolicy" || k == "ValidatingAdmissionPolicyBinding" {
					policies++
					if err := admin.Create(t.Context(), o.DeepCopy()); err != nil {
						t.Fatalf("creating %s %s: %v", k, o.GetName(), err)
					}
				}
			}
			if policies != 2 {
				t.Fatalf("the %s rendering has %d admission policy objects, want a policy and its binding", name, policies)
			}
			manager := newClient(t, cfg, managerUser)
			other := newClient(t, cfg, "alice")
			gc := newClient(t, cfg, "system:serviceaccount:kube-system:generic-garbage-collector")

			// The policy takes effect once the API server has loaded it.
			poll.T(t, 30*time.Second, 200*time.Millisecond, "the policy refusing another writer", func(ctx context.Context) (bool, string, error) {
				err := other.Create(ctx, guard("probe"))
				if err == nil {
					_ = admin.Delete(ctx, guard("probe"))
					return false, "a RecoveryGuard created by alice was admitted", nil
				}
				return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), err.Error(), nil
			})

			rec := record("member1-node-1")
			if err := manager.Create(t.Context(), rec); err != nil {
				t.Fatalf("the manager creating a NodeRecovery: %v", err)
			}
			rec.Status.Phase = v1alpha1.RecoveryPhaseLost
			rec.Status.Message = "written by the manager"
			if err := manager.Status().Update(t.Context(), rec); err != nil {
				t.Fatalf("the manager updating a NodeRecovery's status: %v", err)
			}

			forged := rec.DeepCopy()
			forged.Status.Message = "forged"
			err := other.Status().Update(t.Context(), forged)
			assertRefused(t, err, "another user updating a NodeRecovery's status")
			forged = rec.DeepCopy()
			forged.Labels = map[string]string{"x": "y"}
			assertRefused(t, other.Update(t.Context(), forged), "another user updating a NodeRecovery")
			assertRefused(t, other.Create(t.Context(), record("member1-node-2")), "another user creating a NodeRecovery")
			assertRefused(t, other.Create(t.Context(), guard("member1")), "another user creating a RecoveryGuard")
			assertRefused(t, other.Create(t.Context(), rebalanceRecord("default", "web")), "another user creating a RebalanceRecord")
			if err := manager.Create(t.Context(), rebalanceRecord("default", "web")); err != nil {
				t.Errorf("the manager creating a RebalanceRecord: %v", err)
			}

			owned := rec.DeepCopy()
			owned.OwnerReferences = nil
			if err := gc.Update(t.Context(), owned); err != nil {
				t.Errorf("the garbage collector updating ownerReferences: %v", err)
			}
			if err := other.Delete(t.Context(), rec); err != nil {
				t.Errorf("another user deleting a NodeRecovery (uninstall): %v", err)
			}
		})
	}
}

func assertRefused(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s was admitted", what)
		return
	}
	if !strings.Contains(err.Error(), "only the fedfailover manager writes") {
		t.Errorf("%s: %v, want the records policy's refusal", what, err)
	}
}

// newClient acts as user (the envtest admin when empty). Impersonated users
// are in system:masters, so RBAC lets them through and only the admission
// policy decides.
func newClient(t *testing.T, cfg *rest.Config, user string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	if user != "" {
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func record(name string) *v1alpha1.NodeRecovery {
	return &v1alpha1.NodeRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: name, NodeUID: "uid-" + name},
	}
}

func guard(name string) *v1alpha1.RecoveryGuard {
	return &v1alpha1.RecoveryGuard{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func rebalanceRecord(ns, name string) *v1alpha1.RebalanceRecord {
	return &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RebalanceRecordSpec{RSPUID: "uid-" + name}}
}
