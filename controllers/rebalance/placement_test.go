package rebalance

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Rule 4: with intersectWithClusterSelector kubefed places the target only
// on members its clusterSelector matches; no selector matches none.
func TestTargetPlacement(t *testing.T) {
	cases := []struct {
		name      string
		placement map[string]any
		labels    map[string]string
		want      bool
	}{
		{name: "matching selector", placement: map[string]any{"clusterSelector": map[string]any{"matchLabels": map[string]any{"region": "eu"}}},
			labels: map[string]string{"region": "eu"}, want: true},
		{name: "other labels", placement: map[string]any{"clusterSelector": map[string]any{"matchLabels": map[string]any{"region": "eu"}}},
			labels: map[string]string{"region": "us"}},
		{name: "empty selector: every member", placement: map[string]any{"clusterSelector": map[string]any{}}, want: true},
		{name: "clusters only: kubefed's output, selector absent: none",
			placement: map[string]any{"clusters": []any{map[string]any{"name": "member1"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"placement": c.placement}}}
			sel, err := targetPlacement(u)
			if err != nil {
				t.Fatal(err)
			}
			if got := sel.Matches(labels.Set(c.labels)); got != c.want {
				t.Errorf("matches %v = %v, want %v", c.labels, got, c.want)
			}
		})
	}
}
