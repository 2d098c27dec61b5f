package memberrbac

import (
	"bytes"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var update = flag.Bool("update", false, "rewrite config/member and the table of docs/members.md from the list")

const repoRoot = "../.."

func TestRequestPermission(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        Permission
	}{
		{"GET", "/api/v1/nodes?limit=1", Permission{Verb: "list", Resource: "nodes"}},
		{"GET", "/api/v1/nodes?watch=true&allowWatchBookmarks=true", Permission{Verb: "watch", Resource: "nodes"}},
		{"GET", "/api/v1/nodes/n1", Permission{Verb: "get", Resource: "nodes"}},
		{"PATCH", "/api/v1/nodes/n1", Permission{Verb: "patch", Resource: "nodes"}},
		{"PUT", "/api/v1/nodes/n1/status", Permission{Verb: "update", Resource: "nodes/status"}},
		{"DELETE", "/api/v1/namespaces/shop/pods/db-0", Permission{Verb: "delete", Resource: "pods", Namespace: "shop"}},
		{"DELETE", "/api/v1/namespaces/shop/pods", Permission{Verb: "deletecollection", Resource: "pods", Namespace: "shop"}},
		{"POST", "/api/v1/namespaces/shop/pods/db-0/eviction", Permission{Verb: "create", Resource: "pods/eviction", Namespace: "shop"}},
		{"GET", "/api/v1/pods?resourceVersion=0", Permission{Verb: "list", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/shop/persistentvolumeclaims/data", Permission{Verb: "get", Resource: "persistentvolumeclaims", Namespace: "shop"}},
		{"POST", "/api/v1/namespaces/default/events", Permission{Verb: "create", Resource: "events", Namespace: "default"}},
		{"GET", "/api/v1/namespaces?labelSelector=a%3Db", Permission{Verb: "list", Resource: "namespaces"}},
		{"GET", "/api/v1/namespaces/shop", Permission{Verb: "get", Resource: "namespaces", Namespace: "shop"}},
		{"GET", "/apis/storage.k8s.io/v1/volumeattachments", Permission{Verb: "list", Group: "storage.k8s.io", Resource: "volumeattachments"}},
		{"DELETE", "/apis/storage.k8s.io/v1/volumeattachments/csi-123", Permission{Verb: "delete", Group: "storage.k8s.io", Resource: "volumeattachments"}},
		{"GET", "/apis/apps/v1/namespaces/web/deployments/shop", Permission{Verb: "get", Group: "apps", Resource: "deployments", Namespace: "web"}},
		{"GET", "/apis/apps/v1/watch/namespaces/web/replicasets", Permission{Verb: "watch", Group: "apps", Resource: "replicasets", Namespace: "web"}},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Permission{Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}},
		{"GET", "/version", Permission{Verb: "get", Path: "/version"}},
		{"GET", "/api", Permission{Verb: "get", Path: "/api"}},
		{"GET", "/api/v1", Permission{Verb: "get", Path: "/api/v1"}},
		{"GET", "/apis/apps/v1", Permission{Verb: "get", Path: "/apis/apps/v1"}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := RequestPermission(tc.method, u); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestPermissionString(t *testing.T) {
	for p, want := range map[Permission]string{
		{Verb: "patch", Resource: "nodes"}:                                          "patch nodes",
		{Verb: "list", Group: "storage.k8s.io", Resource: "volumeattachments"}:      "list volumeattachments.storage.k8s.io",
		{Verb: "create", Resource: "events", Namespace: "default"}:                  "create events in namespace default",
		{Verb: "create", Resource: "pods/eviction", Namespace: "shop"}:              "create pods/eviction in namespace shop",
		{Verb: "get", Group: "apps", Resource: "deployments/scale", Namespace: "w"}: "get deployments.apps/scale in namespace w",
		{Verb: "get", Path: "/version"}:                                             "get /version",
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v: %q, want %q", p, got, want)
		}
	}
}

func TestCovered(t *testing.T) {
	for p, want := range map[Permission]bool{
		{Verb: "patch", Resource: "nodes"}:                                                    true,
		{Verb: "update", Resource: "nodes"}:                                                   false,
		{Verb: "delete", Resource: "pods", Namespace: "shop"}:                                 true,
		{Verb: "create", Resource: "pods/eviction", Namespace: "shop"}:                        false,
		{Verb: "create", Resource: "events", Namespace: "default"}:                            true,
		{Verb: "create", Resource: "events", Namespace: "shop"}:                               false,
		{Verb: "get", Resource: "secrets", Namespace: "shop"}:                                 false,
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: "web"}:               true,
		{Verb: "list", Group: "apps", Resource: "deployments", Namespace: "web"}:              true,
		{Verb: "update", Group: "apps", Resource: "deployments", Namespace: "web"}:            false,
		{Verb: "get", Path: "/apis/apps/v1"}:                                                  true,
		{Verb: "get", Path: "/version"}:                                                       true,
		{Verb: "get", Path: "/metrics"}:                                                       false,
		{Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}: true,
	} {
		if got := Covered(p); got != want {
			t.Errorf("Covered(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestRolesAreLeast: the roles grant no wildcard, nothing on Secrets, no
// escalation, and only the verbs each part of fedfailover uses.
func TestRolesAreLeast(t *testing.T) {
	all := ClusterRules()
	for _, rs := range NamespacedRules() {
		all = append(all, rs...)
	}
	for _, r := range all {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs) {
			if s == "*" {
				t.Errorf("wildcard in %+v", r)
			}
		}
		for _, v := range r.Verbs {
			if v == "escalate" || v == "bind" || v == "impersonate" || v == "update" || v == "deletecollection" {
				t.Errorf("verb %s in %+v", v, r)
			}
		}
		if slices.Contains(r.Resources, "secrets") || slices.Contains(r.APIGroups, rbacv1.GroupName) {
			t.Errorf("rule on secrets or RBAC: %+v", r)
		}
	}
	// Events in default and the kubelet Leases of kube-node-lease: nothing
	// else is namespaced, so nothing reaches into a workload's namespace.
	if got := NamespacedRules(); len(got) != 2 || got[EventsNamespace] == nil || got["kube-node-lease"] == nil {
		t.Errorf("namespaced rules %+v: want only events in %s and leases in kube-node-lease", got, EventsNamespace)
	}
	for _, by := range []string{ByMembers, ByNodeRecovery, ByRebalance} {
		if len(NeedsOf(by)) == 0 {
			t.Errorf("no needs of %s", by)
		}
	}
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func TestManifest(t *testing.T) {
	m, err := Manifest(Options{Namespace: "ops", Name: "ff", Member: "member1"})
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, m)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	if strings.Contains(string(m), "creationTimestamp") || strings.Contains(string(m), "status:") {
		t.Errorf("empty fields rendered:\n%s", m)
	}
	want := []string{"Namespace /ops", "ServiceAccount ops/ff", "Secret ops/ff-token", "ClusterRole /ff", "ClusterRoleBinding /ff",
		"Role default/ff", "RoleBinding default/ff", "Role kube-node-lease/ff", "RoleBinding kube-node-lease/ff"}
	if !slices.Equal(kinds, want) {
		t.Errorf("objects %v, want %v", kinds, want)
	}
	secret := objs[2]
	if secret.Object["type"] != string(corev1.SecretTypeServiceAccountToken) || secret.GetAnnotations()[corev1.ServiceAccountNameKey] != "ff" {
		t.Errorf("token Secret %v", secret.Object)
	}
	for _, i := range []int{4, 6} {
		subjects, _, _ := unstructured.NestedSlice(objs[i].Object, "subjects")
		if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "ops" || subjects[0].(map[string]any)["name"] != "ff" {
			t.Errorf("%s subjects %v", objs[i].GetKind(), subjects)
		}
	}
	for _, s := range []string{
		"kubectl failover member-rbac -n ops --name ff --member member1 | kubectl --context member1 apply -f -",
		"kubectl --context member1 -n ops get secret ff-token",
		"label secret member1-fedfailover failover.fedfailover.io/credentials-for=member1",
		"annotate kubefedcluster member1 failover.fedfailover.io/credentials-secret=member1-fedfailover",
	} {
		if !strings.Contains(string(m), s) {
			t.Errorf("header lacks %q:\n%s", s, m)
		}
	}
	for _, bad := range []Options{{Namespace: "Ops"}, {Name: "a_b"}, {Member: "x/y"}, {Name: strings.Repeat("a", 250)}} {
		if _, err := Manifest(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// golden compares a file of the repository with want, or rewrites it with
// -update.
func golden(t *testing.T, rel string, want []byte) {
	t.Helper()
	path := filepath.Join(repoRoot, rel)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the list in internal/memberrbac renders (run `go test ./internal/memberrbac -update`):\n--- file\n%s\n--- rendered\n%s",
			rel, got, want)
	}
}

// TestConfigMemberIsRendered: the kustomize base config/member is the
// manifest with the default names.
func TestConfigMemberIsRendered(t *testing.T) {
	m, err := Manifest(Options{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config/member/member-rbac.yaml", m)
}

const (
	tableStart = "<!-- member-rbac table: rendered from internal/memberrbac; `go test ./internal/memberrbac -update` -->\n"
	tableEnd   = "<!-- end of member-rbac table -->\n"
)

// TestDocsTableIsRendered: the table of docs/members.md is the list.
func TestDocsTableIsRendered(t *testing.T) {
	path := filepath.Join(repoRoot, "docs", "members.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(doc), tableStart)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/members.md has no %q ... %q", tableStart, tableEnd)
	}
	golden(t, "docs/members.md", []byte(before+tableStart+MarkdownTable()+tableEnd+after))
}
