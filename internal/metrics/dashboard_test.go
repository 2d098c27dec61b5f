package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	dashboardFile      = "docs/grafana-dashboard.json"
	chartDashboardFile = "charts/fedfailover/files/grafana/fedfailover.json"
)

// TestDashboard: the dashboard is valid JSON, its panel ids are unique,
// every query is PromQL that Prometheus parses, and every metric it names
// is served by the manager.
func TestDashboard(t *testing.T) {
	var d map[string]any
	if err := json.Unmarshal(readRepoFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	checkPanelIDs(t, d)
	queries := dashboardQueries(t, d)
	if len(queries) < 20 {
		t.Fatalf("found %d queries in %s, want at least 20", len(queries), dashboardFile)
	}
	registered := registeredNames(t)
	for _, q := range queries {
		missing, err := unserved(registered, q)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(missing) > 0 {
			t.Errorf("dashboard query %q names %v, which the manager does not serve", q, missing)
		}
	}
	checkWithPromtool(t, queries)
}

// TestChartDashboardInSync: the chart ships the dashboard of docs/ as it is
// (hack/sync-chart.sh copies it).
func TestChartDashboardInSync(t *testing.T) {
	if !bytes.Equal(readRepoFile(t, dashboardFile), readRepoFile(t, chartDashboardFile)) {
		t.Errorf("%s differs from %s: run hack/sync-chart.sh", chartDashboardFile, dashboardFile)
	}
}

func checkPanelIDs(t *testing.T, d map[string]any) {
	seen := map[float64]bool{}
	var walk func(panels any)
	walk = func(panels any) {
		list, _ := panels.([]any)
		for _, p := range list {
			panel, _ := p.(map[string]any)
			id, _ := panel["id"].(float64)
			if seen[id] {
				t.Errorf("panel id %v is used twice (%v)", id, panel["title"])
			}
			seen[id] = true
			walk(panel["panels"])
		}
	}
	walk(d["panels"])
}

// dashboardQueries returns every target expression and every query
// variable's expression, with Grafana's variables replaced by PromQL values.
func dashboardQueries(t *testing.T, d map[string]any) []string {
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" {
				out = append(out, grafanaToPromQL(v))
			}
		}
	}
	walk(d["panels"], "")
	templating, _ := d["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		tv, _ := v.(map[string]any)
		if tv["type"] != "query" {
			continue
		}
		q, _ := tv["query"].(map[string]any)
		s, _ := q["query"].(string)
		expr, err := variableExpr(s)
		if err != nil {
			t.Errorf("variable %v: %v", tv["name"], err)
			continue
		}
		out = append(out, grafanaToPromQL(expr))
	}
	return out
}

var (
	grafanaInterval = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?`)
	grafanaVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?`)
)

// grafanaToPromQL replaces interval variables by a duration and the other
// variables (used in label matchers) by a regexp matching anything.
func grafanaToPromQL(q string) string {
	q = grafanaInterval.ReplaceAllString(q, "5m")
	return grafanaVariable.ReplaceAllString(q, ".*")
}

// variableExpr is the PromQL inside a query variable: label_values(EXPR,
// LABEL) or query_result(EXPR).
func variableExpr(q string) (string, error) {
	q = strings.TrimSpace(q)
	if inner, ok := strings.CutPrefix(q, "query_result("); ok {
		return strings.TrimSuffix(inner, ")"), nil
	}
	inner, ok := strings.CutPrefix(q, "label_values(")
	i := strings.LastIndex(inner, ",")
	if !ok || i < 0 {
		return "", fmt.Errorf("query %q: want label_values(EXPR, LABEL) or query_result(EXPR)", q)
	}
	return strings.TrimSpace(inner[:i]), nil
}

// checkWithPromtool has Prometheus parse every query, as recording rules.
func checkWithPromtool(t *testing.T, queries []string) {
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range queries {
		quoted, _ := json.Marshal(q) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, quoted)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", "--lint=none", f)
}
