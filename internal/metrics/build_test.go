package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fedfailover/fedfailover/internal/version"
)

// TestBuildInfoIsServed: the registry the manager serves has
// fedfailover_build_info at 1 with this build's version, revision and Go
// version, and removing a member's series leaves it alone.
func TestBuildInfoIsServed(t *testing.T) {
	i := version.Get()
	want := fmt.Sprintf(`# HELP fedfailover_build_info Always 1; the labels say which build of fedfailover serves these metrics (version, revision, go).
# TYPE fedfailover_build_info gauge
fedfailover_build_info{go=%q,revision=%q,version=%q} 1
`, i.GoVersion, i.Revision, i.Version)
	if err := testutil.GatherAndCompare(crmetrics.Registry, strings.NewReader(want), "fedfailover_build_info"); err != nil {
		t.Error(err)
	}
	DeleteCluster("any")
	if n := testutil.CollectAndCount(BuildInfo); n != 1 {
		t.Errorf("%d build_info series after DeleteCluster, want 1", n)
	}
}
