package metrics

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const installDoc = "docs/install.md"

var (
	descLabels = regexp.MustCompile(`(constLabels|variableLabels): \{([^}]*)\}`)
	// metricRow is a row of install.md's metric table: | `name` | type | labels | meaning |
	metricRow     = regexp.MustCompile("(?m)^\\| `(" + Namespace + "_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	parenthesized = regexp.MustCompile(`\([^)]*\)`)
	backticked    = regexp.MustCompile("`([^`]+)`")
)

// fedfailoverLabels maps each fedfailover metric the manager serves to its
// label names, constant and variable.
func fedfailoverLabels(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		crmetrics.Registry.(prometheus.Collector).Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		m := fqName.FindStringSubmatch(s)
		if m == nil || !strings.HasPrefix(m[1], Namespace+"_") {
			continue
		}
		labels := []string{}
		for _, l := range descLabels.FindAllStringSubmatch(s, -1) {
			for _, kv := range strings.Split(l[2], ",") {
				if name, _, _ := strings.Cut(kv, "="); name != "" {
					labels = append(labels, name)
				}
			}
		}
		slices.Sort(labels)
		out[m[1]] = labels
	}
	return out
}

// TestInstallDocListsEveryMetric: the metric table of docs/install.md has
// a row for each fedfailover metric the manager serves, with its labels,
// and none for a metric it does not serve.
func TestInstallDocListsEveryMetric(t *testing.T) {
	served := fedfailoverLabels(t)
	rows := metricRow.FindAllStringSubmatch(string(readRepoFile(t, installDoc)), -1)
	documented := map[string]bool{}
	for _, r := range rows {
		name, typ, labelCell := r[1], r[2], r[3]
		documented[name] = true
		want, ok := served[name]
		if !ok {
			t.Errorf("%s documents %s, which the manager does not serve", installDoc, name)
			continue
		}
		// The labels are the backticked names outside parentheses (which
		// list their values).
		have := []string{}
		for _, m := range backticked.FindAllStringSubmatch(parenthesized.ReplaceAllString(labelCell, ""), -1) {
			have = append(have, m[1])
		}
		slices.Sort(have)
		if !slices.Equal(have, want) {
			t.Errorf("%s: %s has labels %v in the table, the manager serves %v", installDoc, name, have, want)
		}
		if strings.HasSuffix(name, "_total") != (typ == "counter") {
			t.Errorf("%s: %s is documented as a %s", installDoc, name, typ)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(served)) {
		if !documented[name] {
			t.Errorf("%s: the metric table lacks %s", installDoc, name)
		}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d metric rows in %s: is the table still there?", len(rows), installDoc)
	}
}

// TestNoTargetLabels: the chart's ServiceMonitor scrapes with honorLabels,
// so a label of the manager's own would replace the one Prometheus gives
// the target. Only namespace may do that (the RSP's, on purpose).
func TestNoTargetLabels(t *testing.T) {
	ch := make(chan *prometheus.Desc)
	go func() {
		crmetrics.Registry.(prometheus.Collector).Describe(ch)
		close(ch)
	}()
	n := 0
	for d := range ch {
		n++
		for _, l := range descLabels.FindAllStringSubmatch(d.String(), -1) {
			for _, kv := range strings.Split(l[2], ",") {
				name, _, _ := strings.Cut(kv, "=")
				if slices.Contains([]string{"job", "instance", "pod", "service", "endpoint", "container"}, name) {
					t.Errorf("%s has the label %q, which would replace the target's", d, name)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d metric families described", n)
	}
}
