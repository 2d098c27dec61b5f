package rebalance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/scheme"
)

// federatedDeployment is a FederatedDeployment as a user writes it, with
// what the templates cache must drop (overrides, status, annotations).
func federatedDeployment(ns, name, cpu string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "app", "image": "app:1",
					"resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}},
			}}}},
			"placement": map[string]any{"clusterSelector": map[string]any{"matchLabels": map[string]any{"tier": "gold"}}},
			"overrides": []any{map[string]any{"clusterName": "member1",
				"clusterOverrides": []any{map[string]any{"path": "/spec/replicas", "value": int64(3)}}}},
		},
	}}
	u.SetGroupVersionKind(federatedGroupVersion.WithKind("FederatedDeployment"))
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(map[string]string{"note": "a user's"})
	return u
}

// installFederatedDeployments serves FederatedDeployment on the host as
// kubefedctl enable does (a namespaced CRD of types.kubefed.io whose spec
// keeps any field), and waits until it is established. FederatedReplicaSet
// stays unserved, as on a federation that never enabled it.
func installFederatedDeployments(t *testing.T, c client.Client) {
	t.Helper()
	anything := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "federateddeployments.types.kubefed.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: federatedGroupVersion.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "FederatedDeployment", ListKind: "FederatedDeploymentList",
				Plural: "federateddeployments", Singular: "federateddeployment"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: federatedGroupVersion.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *anything, "status": *anything}}}}},
		},
	}
	if err := c.Create(t.Context(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "FederatedDeployment served", func() (bool, string) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(crd), got); err != nil {
			return false, err.Error()
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not established"
	})
}

// startTemplatesCache serves FederatedDeployment on the host and runs, as
// the user of cfg, a manager with the templates cache production builds.
func startTemplatesCache(t *testing.T, cfg *rest.Config) (ctrl.Manager, cache.Cache) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	direct, err := client.New(hostCfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	installFederatedDeployments(t, direct)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	templates, err := newTemplateCache(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(templates); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	return mgr, templates
}

// TestFederatedWorkloadsFromTheTemplatesCache runs loadWorkload on the
// cache production builds (newTemplateCache, its transform, a real API
// server): what a pass reads is there, what it does not read is not, a
// change reaches it, and an unchanged target is decoded once.
func TestFederatedWorkloadsFromTheTemplatesCache(t *testing.T) {
	mgr, templates := startTemplatesCache(t, hostCfg)

	c := mgr.GetClient()
	ns := fmt.Sprintf("templates-%d", namespaces.Add(1))
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	fd := federatedDeployment(ns, "web", "500m")
	if err := c.Create(t.Context(), fd); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{templates: templates}
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", IntersectWithClusterSelector: true}}

	load := func() workload {
		t.Helper()
		w, err := r.loadWorkload(t.Context(), rsp)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	cpuOf := func(w workload) string {
		if len(w.spec.Containers) != 1 {
			return "no container"
		}
		return w.spec.Containers[0].Resources.Requests.Cpu().String()
	}
	var first workload
	pollUntil(t, 30*time.Second, "the template in the cache", func() (bool, string) {
		first = load()
		return cpuOf(first) == "500m", cpuOf(first)
	})
	if first.placement == nil || !first.placement.Matches(labels.Set{"tier": "gold"}) || first.placement.Matches(labels.Set{"tier": "lead"}) {
		t.Errorf("placement = %v, want tier=gold", first.placement)
	}
	if again := load(); again.spec != first.spec {
		t.Error("an unchanged target was decoded again")
	}

	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(fd.GroupVersionKind())
	if err := templates.Get(t.Context(), client.ObjectKeyFromObject(fd), cached); err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"spec", "overrides"}, {"metadata", "annotations"}, {"metadata", "managedFields"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(cached.Object, path...); found {
			t.Errorf("the cached FederatedDeployment keeps %v", path)
		}
	}

	// The user raises the request: the next passes see it.
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(fd.GroupVersionKind())
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fd), live); err != nil {
		t.Fatal(err)
	}
	tmpl, _, _ := unstructured.NestedMap(live.Object, templatePath...)
	tmpl["containers"].([]any)[0].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"cpu": "2"}}
	if err := unstructured.SetNestedMap(live.Object, tmpl, templatePath...); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "the new request in a pass", func() (bool, string) {
		w := load()
		return w.spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("2")), cpuOf(w)
	})

	// Intersection off: no placement, from the same object.
	rsp.Spec.IntersectWithClusterSelector = false
	if w := load(); w.placement != nil {
		t.Errorf("placement = %v without intersectWithClusterSelector, want none", w.placement)
	}

	// A kind the federation does not serve: an empty pod, as before.
	rsp.Spec.TargetKind = "FederatedReplicaSet"
	if w := load(); len(w.spec.Containers) != 0 {
		t.Errorf("an unserved target kind gave %d containers, want an empty pod", len(w.spec.Containers))
	}
	rsp.Spec.TargetKind = "FederatedDeployment"

	// The target goes: a pass estimates for an empty pod.
	if err := c.Delete(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "the target gone from a pass", func() (bool, string) {
		w := load()
		return len(w.spec.Containers) == 0, cpuOf(w)
	})
}

// TestRefusedTemplatesListFailsThePass: a host that refuses the federated
// workloads' list (a role without list or watch) fails the pass once the
// wait for the cache's first list ends; the pass does not block for ever
// on a cache that never syncs, and gives no guessed template.
func TestRefusedTemplatesListFailsThePass(t *testing.T) {
	// A user no role binds: discovery is allowed, the list is refused.
	refused := rest.CopyConfig(hostCfg)
	refused.Impersonate = rest.ImpersonationConfig{UserName: "fedfailover-test-no-role"}
	_, templates := startTemplatesCache(t, refused)
	if !templates.WaitForCacheSync(t.Context()) { // started, no informer yet
		t.Fatal("the templates cache did not start")
	}

	const wait = 2 * time.Second
	r := &Reconciler{templates: templates, templateWait: wait}
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment"}}
	type result struct {
		w   workload
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		w, err := r.loadWorkload(t.Context(), rsp)
		done <- result{w, err}
	}()
	select {
	case got := <-done:
		if got.err == nil {
			t.Fatalf("a refused list gave no error (containers %d)", len(got.w.spec.Containers))
		}
		if !strings.Contains(got.err.Error(), "FederatedDeployment default/web") {
			t.Errorf("error %q does not name the target", got.err)
		}
		if took := time.Since(start); took < wait {
			t.Errorf("the pass failed after %v, before the %v wait for the first list: %v", took, wait, got.err)
		}
	case <-time.After(wait + 30*time.Second):
		t.Fatalf("the pass still waits %v after a refused list, with a %v bound", wait+30*time.Second, wait)
	}
}
