package metrics

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/client_golang/prometheus"
	// The manager's controllers register controller-runtime's reconcile and
	// work queue metrics through this package; leader election registers
	// with crmetrics itself.
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fedfailover/fedfailover/test/paths"
)

// The alert rules and the dashboard may only query what the manager
// serves: these helpers read the names from the registry the manager
// serves (controller-runtime's, where this package registers), and the
// names an expression selects from a real PromQL parser.

var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// registeredNames are the metric families of the manager's registry.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		crmetrics.Registry.(prometheus.Collector).Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	for _, want := range []string{"fedfailover_member_connected", "controller_runtime_reconcile_errors_total",
		"workqueue_depth", "leader_election_master_status"} {
		if !names[want] {
			t.Fatalf("the registry lacks %s: %d names", want, len(names))
		}
	}
	return names
}

// scrapeSeries are the series Prometheus itself writes for every target it
// scrapes: the alerts that watch for the manager's absence read them.
var scrapeSeries = map[string]bool{
	"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
}

// served says whether a selected series name belongs to a registered
// family, or is one of Prometheus' scrapeSeries: histograms are selected by
// their _bucket, _sum and _count series.
func served(registered map[string]bool, name string) bool {
	if registered[name] || scrapeSeries[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
			return true
		}
	}
	return false
}

// metricNames lists the metric names an expression selects; a selector
// without a literal name is an error (it cannot be checked).
func metricNames(expr string) ([]string, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var names []string
	var errs []string
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, filters := range me.LabelFilterss {
			i := slices.IndexFunc(filters, func(f metricsql.LabelFilter) bool { return f.Label == "__name__" })
			if i < 0 || filters[i].IsRegexp || filters[i].IsNegative {
				errs = append(errs, "a selector without a literal metric name")
				continue
			}
			names = append(names, filters[i].Value)
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%q: %s", expr, strings.Join(errs, "; "))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", expr)
	}
	return names, nil
}

// unserved returns the names expr selects that the manager does not serve.
func unserved(registered map[string]bool, expr string) ([]string, error) {
	names, err := metricNames(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if !served(registered, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func TestUnservedFindsForeignMetrics(t *testing.T) {
	reg := map[string]bool{"fedfailover_a": true, "fedfailover_h_seconds": true}
	cases := []struct {
		expr string
		want []string
		err  bool
	}{
		{`fedfailover_a == 0`, nil, false},
		{`histogram_quantile(0.9, sum by (le) (rate(fedfailover_h_seconds_bucket{x="y"}[5m])))`, nil, false},
		{`sum by (cluster) (fedfailover_a) / on (cluster) group_left kube_node_info`, []string{"kube_node_info"}, false},
		{`absent(up{job="fedfailover"} == 1)`, nil, false},
		{`rate(kube_pod_info[5m]) and fedfailover_a`, []string{"kube_pod_info"}, false},
		{`fedfailover_a_total`, []string{"fedfailover_a_total"}, false},
		{`{__name__=~"fedfailover_.*"}`, nil, true},
		{`vector(1)`, nil, true},
		{`sum(`, nil, true},
	}
	for _, c := range cases {
		got, err := unserved(reg, c.expr)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("unserved(%q) = %v, %v; want %v, error %v", c.expr, got, err, c.want, c.err)
		}
	}
}

// promtool runs bin/promtool (hack/tools/promtool) in the repository root.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := paths.Tool("promtool")
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
