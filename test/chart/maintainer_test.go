package chart

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const maintainerRole = "fedfailover-maintainer"

// TestMaintainerRole: the chart and config/rbac create the same
// maintainer ClusterRole, granting get, list, watch, create and delete on
// MemberMaintenances and nothing else (not their status, which the
// manager alone writes; no update: spec.member is immutable, and a
// maintenance ends by deletion), aggregated into no role and bound by
// neither.
func TestMaintainerRole(t *testing.T) {
	want := []string{"create membermaintenances.failover.fedfailover.io", "delete membermaintenances.failover.fedfailover.io",
		"get membermaintenances.failover.fedfailover.io", "list membermaintenances.failover.fedfailover.io",
		"watch membermaintenances.failover.fedfailover.io"}
	for name, objs := range map[string][]*unstructured.Unstructured{
		"helm default":      helmTemplate(t),
		"kustomize default": kustomize(t, false),
	} {
		t.Run(name, func(t *testing.T) {
			role := find(objs, "ClusterRole", "", maintainerRole)
			if role == nil {
				t.Fatalf("no ClusterRole %s", maintainerRole)
			}
			for l := range role.GetLabels() {
				if strings.HasPrefix(l, "rbac.authorization.k8s.io/aggregate-to-") {
					t.Errorf("%s is aggregated (%s)", maintainerRole, l)
				}
			}
			if have := grantsOf(t, maintainerRole, rulesOf(t, role)); !slices.Equal(have, want) {
				t.Errorf("%s grants %v, want %v", maintainerRole, have, want)
			}
			for _, o := range objs {
				if k := o.GetKind(); k != "ClusterRoleBinding" && k != "RoleBinding" {
					continue
				}
				var b rbacv1.RoleBinding
				convert(t, o, &b)
				if b.RoleRef.Name == maintainerRole {
					t.Errorf("%s %s binds %s", o.GetKind(), o.GetName(), maintainerRole)
				}
			}
		})
	}
	t.Run("helm rbac.maintainer.create=false: no maintainer role", func(t *testing.T) {
		if find(helmTemplate(t, "rbac.maintainer.create=false"), "ClusterRole", "", maintainerRole) != nil {
			t.Errorf("ClusterRole %s rendered although rbac.maintainer.create is false", maintainerRole)
		}
	})
}
