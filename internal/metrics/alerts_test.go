package metrics

import (
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	alertsFile     = "config/prometheus/alerts.yaml"
	alertTestsFile = "config/prometheus/alerts_test.yaml"
)

// ruleFile is the part of a Prometheus rule file the checks below read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestAlertRules lints the rules and runs their unit tests with promtool,
// Prometheus' own rule evaluator.
func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", alertsFile)
	promtool(t, "test", "rules", alertTestsFile)
}

// TestAlertsQueryServedMetrics: an alert over a metric nothing serves would
// never fire.
func TestAlertsQueryServedMetrics(t *testing.T) {
	var rf ruleFile
	if err := yaml.Unmarshal(readRepoFile(t, alertsFile), &rf); err != nil {
		t.Fatal(err)
	}
	registered := registeredNames(t)
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			missing, err := unserved(registered, r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
				continue
			}
			if len(missing) > 0 {
				t.Errorf("alert %s queries %v, which the manager does not serve", r.Alert, missing)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook_url"] == "" {
				t.Errorf("alert %s lacks a severity, summary or runbook_url", r.Alert)
			}
		}
	}
	if n < 6 {
		t.Errorf("found %d alerts in %s, want at least 6", n, alertsFile)
	}
}

// ruleTests is the part of a promtool test file the check below reads.
type ruleTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertTestedFiringAndNot: alerts_test.yaml evaluates every alert
// at a time it must fire and at one it must not, and names no alert that
// alerts.yaml lacks.
func TestEveryAlertTestedFiringAndNot(t *testing.T) {
	var rf ruleFile
	if err := yaml.Unmarshal(readRepoFile(t, alertsFile), &rf); err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(readRepoFile(t, alertTestsFile), &rt); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("%s: no test where alert %s fires", alertTestsFile, r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no test where alert %s must not fire", alertTestsFile, r.Alert)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which %s lacks", alertTestsFile, name, alertsFile)
		}
	}
	for name := range silent {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which %s lacks", alertTestsFile, name, alertsFile)
		}
	}
}
