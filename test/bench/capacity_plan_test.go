package bench

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// The capacity plan's two valid runs (the goal size, run H, and a small
// one), as fedfailover-bench wrote them
// (docs/scale.md#capacity-plan), and the size the chart's defaults fit.
const (
	planRunA, planRunB = "testdata/capacity-plan/goal-h.json", "testdata/capacity-plan/plan-b.json"
	chartValues        = "../../charts/fedfailover/values.yaml"
	plannedMembers     = 3
	plannedPods        = 3 * 2000 * 10
)

// TestChartMemoryFollowsTheCapacityPlan: the chart's memory request holds
// what the plan fitted from the two runs predicts at 3 x 2,000 x 10, and
// its limit twice that (a first sync's lists); the plan's figures in the
// docs are the ones the runs give. It fails when the chart's memory, the
// runs or the fit drift apart.
func TestChartMemoryFollowsTheCapacityPlan(t *testing.T) {
	var pts [2]CostPoint
	var base float64
	for i, path := range []string{planRunA, planRunB} {
		r, err := readScaleResult(path)
		if err != nil {
			t.Fatal(err)
		}
		pts[i] = costPoint(r)
		if i == 0 {
			base = r.BaseRSSMB
		}
	}
	m, err := FitCosts(base, pts[0], pts[1])
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	predicted := m.Predict(plannedMembers, plannedPods) * 1e6 / mib // MB to MiB
	t.Logf("plan: %.1f MB base, %.1f MB per member, %.1f MB per 10k pods; %d members x %d pods -> %.0f MiB",
		m.BaseMB, m.PerMemberMB, m.PerPodMB*10000, plannedMembers, plannedPods, predicted)

	data, err := os.ReadFile(filepath.Clean(chartValues))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Resources struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	request, limit := mebibytes(t, values.Resources.Requests["memory"]), mebibytes(t, values.Resources.Limits["memory"])
	if request < predicted {
		t.Errorf("memory request %.0f MiB is below the plan's %.0f MiB at %d members x %d pods", request, predicted, plannedMembers, plannedPods)
	}
	if limit < 2*predicted {
		t.Errorf("memory limit %.0f MiB leaves less than twice the plan's %.0f MiB for a first sync", limit, predicted)
	}
	if request > 2*predicted {
		t.Errorf("memory request %.0f MiB is more than twice the plan's %.0f MiB: the plan no longer sets it", request, predicted)
	}
}

func mebibytes(t *testing.T, q string) float64 {
	t.Helper()
	v, err := resource.ParseQuantity(q)
	if err != nil {
		t.Fatalf("memory %q: %v", q, err)
	}
	return float64(v.Value()) / (1 << 20)
}
