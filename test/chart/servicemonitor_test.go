package chart

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	scraper       = "fedfailover-metrics-scraper"
	scraperSecret = "fedfailover-metrics-scraper-token"
	metricsReader = "fedfailover-metrics-reader"
)

// serviceMonitorEndpoint returns the ServiceMonitor and its one endpoint.
func serviceMonitorEndpoint(t *testing.T, objs []*unstructured.Unstructured) (*unstructured.Unstructured, map[string]any) {
	t.Helper()
	sm := find(objs, "ServiceMonitor", namespace, managerName)
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
	}
	ep, _ := eps[0].(map[string]any)
	return sm, ep
}

// TestServiceMonitorLabelsAndAuthorization: the ServiceMonitor keeps the
// metrics' own labels (the RSP's namespace, which the dashboard's
// namespace variable reads), names the job the alerts watch, and
// authenticates with a token Secret through `authorization`, never the
// deprecated bearerTokenFile.
func TestServiceMonitorLabelsAndAuthorization(t *testing.T) {
	t.Run("default: honorLabels, job fedfailover, the chart's scraper token", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")
		sm, ep := serviceMonitorEndpoint(t, objs)
		if ep["honorLabels"] != true {
			t.Errorf("endpoint honorLabels %v, want true: the RSP metrics' namespace label must win over the pod's", ep["honorLabels"])
		}
		assertNoBearerTokenFile(t, sm)
		assertAuthorization(t, ep, scraperSecret, "token")
		assertJobIsWatched(t, objs, sm)

		sa := find(objs, "ServiceAccount", namespace, scraper)
		if sa == nil {
			t.Fatalf("no ServiceAccount %s", scraper)
		}
		s := find(objs, "Secret", namespace, scraperSecret)
		if s == nil {
			t.Fatalf("no Secret %s", scraperSecret)
		}
		var secret corev1.Secret
		convert(t, s, &secret)
		if secret.Type != corev1.SecretTypeServiceAccountToken || secret.Annotations[corev1.ServiceAccountNameKey] != scraper {
			t.Errorf("Secret %s: type %s, annotations %v; want a token of ServiceAccount %s", scraperSecret, secret.Type, secret.Annotations, scraper)
		}
		b := find(objs, "ClusterRoleBinding", "", scraper)
		if b == nil {
			t.Fatalf("no ClusterRoleBinding %s", scraper)
		}
		var rb rbacv1.ClusterRoleBinding
		convert(t, b, &rb)
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: scraper, Namespace: namespace}}
		if rb.RoleRef.Name != metricsReader || !reflect.DeepEqual(rb.Subjects, want) {
			t.Errorf("ClusterRoleBinding %s: %+v to %+v, want %s to %+v", scraper, rb.RoleRef, rb.Subjects, metricsReader, want)
		}
		reader := find(objs, "ClusterRole", "", metricsReader)
		if reader == nil {
			t.Fatalf("no ClusterRole %s", metricsReader)
		}
		wantRules := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
		if have := rulesOf(t, reader); !reflect.DeepEqual(have, wantRules) {
			t.Errorf("%s rules %+v, want only %+v", metricsReader, have, wantRules)
		}
	})

	t.Run("a token Secret of your own: no scraper identity of the chart", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.serviceMonitor.enabled=true",
			"metrics.serviceMonitor.authorization.secretName=prometheus-token", "metrics.serviceMonitor.authorization.key=jwt")
		sm, ep := serviceMonitorEndpoint(t, objs)
		assertNoBearerTokenFile(t, sm)
		assertAuthorization(t, ep, "prometheus-token", "jwt")
		for _, kind := range []string{"ServiceAccount", "Secret", "ClusterRoleBinding"} {
			for _, o := range objs {
				if o.GetKind() == kind && strings.Contains(o.GetName(), "scraper") {
					t.Errorf("%s %s rendered although a token Secret is given", kind, o.GetName())
				}
			}
		}
	})

	t.Run("off by default", func(t *testing.T) {
		objs := helmTemplate(t)
		if hasKind(objs, "ServiceMonitor") || find(objs, "ServiceAccount", namespace, scraper) != nil ||
			find(objs, "Secret", namespace, scraperSecret) != nil {
			t.Error("ServiceMonitor or its scraper identity rendered by default")
		}
	})
}

func assertNoBearerTokenFile(t *testing.T, sm *unstructured.Unstructured) {
	t.Helper()
	b, err := yaml.Marshal(sm.Object)
	if err != nil {
		t.Fatal(err)
	}
	for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
		if strings.Contains(string(b), deprecated) {
			t.Errorf("the ServiceMonitor uses the deprecated %s:\n%s", deprecated, b)
		}
	}
}

func assertAuthorization(t *testing.T, ep map[string]any, secret, key string) {
	t.Helper()
	want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": secret, "key": key}}
	if !reflect.DeepEqual(ep["authorization"], want) {
		t.Errorf("endpoint authorization %v, want %v", ep["authorization"], want)
	}
}

var upJob = regexp.MustCompile(`\bup\{job="([^"]+)"\}`)

// assertJobIsWatched: the job Prometheus gives the scrape (the value of
// the metrics Service's jobLabel label) is the one FedfailoverManagerAbsent
// watches in the rendered PrometheusRule.
func assertJobIsWatched(t *testing.T, objs []*unstructured.Unstructured, sm *unstructured.Unstructured) {
	t.Helper()
	jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
	svc := find(objs, "Service", namespace, "fedfailover-metrics")
	if svc == nil {
		t.Fatal("no metrics Service")
	}
	job := svc.GetLabels()[jobLabel]
	if jobLabel == "" || job == "" {
		t.Fatalf("ServiceMonitor jobLabel %q, Service labels %v: the job would be the Service's name", jobLabel, svc.GetLabels())
	}
	rule := find(objs, "PrometheusRule", namespace, "fedfailover-alerts")
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	b, err := yaml.Marshal(rule.Object)
	if err != nil {
		t.Fatal(err)
	}
	var watched []string
	for _, m := range upJob.FindAllStringSubmatch(string(b), -1) {
		watched = append(watched, m[1])
	}
	if len(watched) == 0 || slices.ContainsFunc(watched, func(j string) bool { return j != job }) {
		t.Errorf("the alerts watch up{job=%v}, the ServiceMonitor scrapes as job %q", watched, job)
	}
}
