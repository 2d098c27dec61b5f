package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/test/paths"
)

const viewerUser = "viewer"

// testViewer binds the viewer ClusterRole of config/rbac/viewer_role.yaml
// (the chart ships the same rules) to a user of its own and runs every
// command of docs/cli.md as that user: the role is all the plugin needs.
// test/chart checks the role grants no more than cli.HostResources.
func testViewer(t *testing.T, h *host) {
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(readRepoFile(t, "config/rbac/viewer_role.yaml"), &role); err != nil {
		t.Fatal(err)
	}
	if role.Name != "fedfailover-viewer" || len(role.Rules) == 0 {
		t.Fatalf("config/rbac/viewer_role.yaml: %s with %d rules", role.Name, len(role.Rules))
	}
	create(t, h.c, &role)
	create(t, h.c, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: viewerUser}},
	})
	runDocCommands(t, h.viewer)
}

// TestPermissionsDocumented: docs/cli.md and the krew manifest's caveats
// (hack/release.sh) name every resource the plugin reads.
func TestPermissionsDocumented(t *testing.T) {
	doc := string(readRepoFile(t, "docs/cli.md"))
	release := string(readRepoFile(t, "hack/release.sh"))
	_, caveats, ok := strings.Cut(release, "  caveats: |")
	caveats, _, _ = strings.Cut(caveats, "  platforms:")
	if !ok {
		t.Fatal("hack/release.sh writes no caveats")
	}
	for _, res := range cli.HostResources() {
		if !strings.Contains(doc, "`"+res+"`") {
			t.Errorf("docs/cli.md does not name `%s`, which the plugin reads", res)
		}
		if !strings.Contains(caveats, res) {
			t.Errorf("the krew caveats of hack/release.sh do not name %s, which the plugin reads", res)
		}
	}
	if !strings.Contains(doc, "fedfailover-viewer") || !strings.Contains(caveats, "fedfailover-viewer") {
		t.Error("docs/cli.md and the krew caveats should name the fedfailover-viewer ClusterRole")
	}
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
