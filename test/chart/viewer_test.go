package chart

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fedfailover/fedfailover/internal/cli"
)

const (
	viewerRole     = "fedfailover-viewer"
	aggregateLabel = "rbac.authorization.k8s.io/aggregate-to-view"
)

// viewerGrants is what the viewer role must grant, derived from the list
// of what the CLI reads: get, list and watch on each of
// cli.HostResources, as "verb resource.group".
func viewerGrants() []string {
	var out []string
	for _, res := range cli.HostResources() {
		for _, verb := range []string{"get", "list", "watch"} {
			out = append(out, verb+" "+res)
		}
	}
	slices.Sort(out)
	return out
}

// grantsOf flattens rules into "verb resource.group" (resource alone for
// the core group), failing on anything a plain list cannot express.
func grantsOf(t *testing.T, role string, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for _, r := range rules {
		if problem := ruleProblem(role, r); problem != "" {
			t.Errorf("%s: %s: %+v", role, problem, r)
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: rule %+v names resourceNames or nonResourceURLs", role, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name := res
				if g != "" {
					name += "." + g
				}
				for _, v := range r.Verbs {
					out = append(out, v+" "+name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestViewerRole: the chart and config/rbac create the same viewer
// ClusterRole, aggregated into `view`, granting get/list/watch on exactly
// what the CLI reads: no other verb, no Secret, no wildcard, and no
// binding (its users are bound by the cluster's admin, or through `view`).
func TestViewerRole(t *testing.T) {
	want := viewerGrants()
	if len(want) < 3*8 || slices.ContainsFunc(want, func(g string) bool { return strings.Contains(g, "secrets") }) {
		t.Fatalf("cli.HostResources gives %v", want)
	}
	for name, objs := range map[string][]*unstructured.Unstructured{
		"helm default":      helmTemplate(t),
		"kustomize default": kustomize(t, false),
	} {
		t.Run(name, func(t *testing.T) {
			role := find(objs, "ClusterRole", "", viewerRole)
			if role == nil {
				t.Fatalf("no ClusterRole %s", viewerRole)
			}
			if role.GetLabels()[aggregateLabel] != "true" {
				t.Errorf("%s labels %v lack %s: \"true\"", viewerRole, role.GetLabels(), aggregateLabel)
			}
			if _, ok := role.Object["aggregationRule"]; ok {
				t.Errorf("%s aggregates other roles", viewerRole)
			}
			if have := grantsOf(t, viewerRole, rulesOf(t, role)); !slices.Equal(have, want) {
				t.Errorf("%s grants\n  %s\nwant (cli.HostResources)\n  %s", viewerRole,
					strings.Join(have, "\n  "), strings.Join(want, "\n  "))
			}
			for _, o := range objs {
				if k := o.GetKind(); k != "ClusterRoleBinding" && k != "RoleBinding" {
					continue
				}
				var b rbacv1.RoleBinding
				convert(t, o, &b)
				if b.RoleRef.Name == viewerRole {
					t.Errorf("%s %s binds %s", o.GetKind(), o.GetName(), viewerRole)
				}
			}
		})
	}

	t.Run("helm rbac.viewer.aggregateToView=false: not aggregated", func(t *testing.T) {
		role := find(helmTemplate(t, "rbac.viewer.aggregateToView=false"), "ClusterRole", "", viewerRole)
		if role == nil {
			t.Fatalf("no ClusterRole %s", viewerRole)
		}
		if _, ok := role.GetLabels()[aggregateLabel]; ok {
			t.Errorf("%s labels %v still aggregate it", viewerRole, role.GetLabels())
		}
	})
	t.Run("helm rbac.viewer.create=false: no viewer role", func(t *testing.T) {
		if find(helmTemplate(t, "rbac.viewer.create=false"), "ClusterRole", "", viewerRole) != nil {
			t.Errorf("ClusterRole %s rendered although rbac.viewer.create is false", viewerRole)
		}
	})
}
