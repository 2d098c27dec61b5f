package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// badSelector fails to parse: "In" needs values.
var badSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

type opt func(*v1alpha1.FailoverPolicy)

func pol(name string, age time.Duration, opts ...opt) v1alpha1.FailoverPolicy {
	p := v1alpha1.FailoverPolicy{}
	p.Name = name
	p.CreationTimestamp = metav1.NewTime(t0.Add(-age))
	p.Spec.NodeRecovery = &v1alpha1.NodeRecoverySpec{}
	p.Spec.Rebalance = &v1alpha1.RebalanceSpec{}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func clusters(s *metav1.LabelSelector) opt {
	return func(p *v1alpha1.FailoverPolicy) { p.Spec.ClusterSelector = s }
}
func noRecovery(p *v1alpha1.FailoverPolicy)  { p.Spec.NodeRecovery.Enabled = ptr.To(false) }
func noRebalance(p *v1alpha1.FailoverPolicy) { p.Spec.Rebalance = nil }
func deleting(p *v1alpha1.FailoverPolicy)    { p.DeletionTimestamp = &metav1.Time{Time: t0} }
func pods(s *metav1.LabelSelector) opt {
	return func(p *v1alpha1.FailoverPolicy) { p.Spec.NodeRecovery.Pods.Selector = s }
}
func rsps(scope v1alpha1.PodScope) opt {
	return func(p *v1alpha1.FailoverPolicy) { p.Spec.Rebalance.ReplicaSchedulingPreferences = scope }
}

func names(ps []*v1alpha1.FailoverPolicy) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func unusableNames(us []Unusable) string {
	var out []string
	for _, u := range us {
		out = append(out, u.Policy.Name)
	}
	return strings.Join(out, ",")
}

func nameOf(p *v1alpha1.FailoverPolicy) string {
	if p == nil {
		return ""
	}
	return p.Name
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		sel     *metav1.LabelSelector
		labels  map[string]string
		match   bool
		wantErr bool
	}{
		{name: "absent selects everything", labels: map[string]string{"a": "b"}, match: true},
		{name: "empty selects everything", sel: &metav1.LabelSelector{}, match: true},
		{name: "labels match", sel: sel("tier", "edge"), labels: map[string]string{"tier": "edge"}, match: true},
		{name: "labels differ", sel: sel("tier", "edge"), labels: map[string]string{"tier": "core"}},
		{name: "invalid selects nothing", sel: badSelector, labels: map[string]string{"tier": "edge"}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(FieldClusterSelector, c.sel)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v", err, c.wantErr)
			}
			if err != nil {
				var se *SelectorError
				if !errors.As(err, &se) || se.Field != FieldClusterSelector || !strings.HasPrefix(err.Error(), "spec.clusterSelector: ") ||
					!strings.Contains(err.Error(), "values") {
					t.Errorf("error %q: want the field and the parser's message", err)
				}
			}
			if got := s.Matches(labelsOf(c.labels)); got != c.match {
				t.Errorf("matches %v, want %v", got, c.match)
			}
		})
	}
}

func TestInvalidNamesEachField(t *testing.T) {
	p := pol("p", 0, clusters(badSelector), pods(badSelector),
		rsps(v1alpha1.PodScope{NamespaceSelector: badSelector}))
	var fields []string
	for _, e := range Invalid(&p) {
		fields = append(fields, e.Field)
	}
	want := FieldClusterSelector + "," + FieldPodSelector + "," + FieldRSPNamespaceSelector
	if strings.Join(fields, ",") != want {
		t.Fatalf("fields %v, want %s", fields, want)
	}
	msg := InvalidMessage(Invalid(&p))
	if !strings.Contains(msg, FieldRSPNamespaceSelector+": ") || !strings.Contains(msg, "acts on nothing new") {
		t.Errorf("message %q", msg)
	}
	ok := pol("ok", 0, clusters(sel("a", "b")))
	if got := Invalid(&ok); len(got) != 0 {
		t.Errorf("valid policy reported invalid: %v", got)
	}
}

func TestScopeMatches(t *testing.T) {
	obj := Object{Labels: map[string]string{"app": "web"}, Namespace: "demo", NamespaceLabels: map[string]string{"team": "a"}}
	cases := []struct {
		name   string
		scope  v1alpha1.PodScope
		match  bool
		nsNeed bool
	}{
		{name: "empty scope selects all", match: true},
		{name: "namespace listed", scope: v1alpha1.PodScope{Namespaces: []string{"other", "demo"}}, match: true},
		{name: "namespace not listed", scope: v1alpha1.PodScope{Namespaces: []string{"other"}}},
		{name: "namespace labels match", scope: v1alpha1.PodScope{NamespaceSelector: sel("team", "a")}, match: true, nsNeed: true},
		{name: "namespace labels differ", scope: v1alpha1.PodScope{NamespaceSelector: sel("team", "b")}, nsNeed: true},
		{name: "object labels differ", scope: v1alpha1.PodScope{Selector: sel("app", "db"), Namespaces: []string{"demo"}}},
		{name: "object and namespace match", scope: v1alpha1.PodScope{Selector: sel("app", "web"), Namespaces: []string{"demo"}}, match: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseScope("x", c.scope)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Matches(obj); got != c.match {
				t.Errorf("matches %v, want %v", got, c.match)
			}
			if s.NeedsNamespaceLabels() != c.nsNeed {
				t.Errorf("needs namespace labels %v, want %v", s.NeedsNamespaceLabels(), c.nsNeed)
			}
		})
	}
	if s, err := ParseScope("x", v1alpha1.PodScope{Selector: badSelector}); err == nil || !strings.HasPrefix(err.Error(), "x.selector: ") || s.Matches(obj) {
		t.Errorf("invalid object selector: %v, matches %v", err, s.Matches(obj))
	}
	if !(Scope{}).Matches(obj) {
		t.Error("the zero Scope selects nothing")
	}
}

func TestForMember(t *testing.T) {
	edge := map[string]string{"tier": "edge"}
	cases := []struct {
		name        string
		policies    []v1alpha1.FailoverPolicy
		labels      map[string]string
		governing   string
		overlapping string
		unusable    string
	}{
		{name: "no policy"},
		{name: "one selecting all", policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour)}, governing: "a"},
		{name: "selector does not match", policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, clusters(sel("tier", "core")))}, labels: edge},
		{name: "node recovery off or absent",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, noRecovery), pol("b", time.Hour, func(p *v1alpha1.FailoverPolicy) { p.Spec.NodeRecovery = nil })}},
		{name: "being deleted", policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, deleting)}},
		{name: "oldest wins, the others overlap",
			policies: []v1alpha1.FailoverPolicy{pol("new", time.Minute), pol("old", time.Hour, clusters(sel("tier", "edge"))), pol("mid", 30*time.Minute)},
			labels:   edge, governing: "old", overlapping: "mid,new"},
		{name: "same age: first by name",
			policies: []v1alpha1.FailoverPolicy{pol("b", time.Hour), pol("a", time.Hour)}, governing: "a", overlapping: "b"},
		{name: "invalid clusterSelector acts on nothing: the next one governs",
			policies:  []v1alpha1.FailoverPolicy{pol("old", time.Hour, clusters(badSelector)), pol("new", time.Minute)},
			governing: "new", unusable: "old"},
		{name: "invalid pods selector acts on nothing",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, pods(badSelector))}, unusable: "a"},
		{name: "invalid RSP selector does not stop node recovery",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, rsps(v1alpha1.PodScope{Selector: badSelector}))}, governing: "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ForMember(c.policies, c.labels)
			if nameOf(s.Governing) != c.governing || names(s.Overlapping) != c.overlapping || unusableNames(s.Unusable) != c.unusable {
				t.Errorf("governing %q overlapping %q unusable %q, want %q %q %q",
					nameOf(s.Governing), names(s.Overlapping), unusableNames(s.Unusable), c.governing, c.overlapping, c.unusable)
			}
			if s.Held != nil {
				t.Errorf("held %s for a member", s.Held.Policy.Name)
			}
		})
	}
}

func TestForRSP(t *testing.T) {
	web := Object{Labels: map[string]string{"app": "web"}, Namespace: "demo", NamespaceLabels: map[string]string{"team": "a"}}
	badRSP := rsps(v1alpha1.PodScope{Selector: badSelector})
	cases := []struct {
		name        string
		policies    []v1alpha1.FailoverPolicy
		owner       string
		governing   string
		overlapping string
		unusable    string
		held        string
	}{
		{name: "no policy: release"},
		{name: "selects by namespace",
			policies:  []v1alpha1.FailoverPolicy{pol("a", time.Hour, rsps(v1alpha1.PodScope{Namespaces: []string{"demo"}})), pol("b", 2*time.Hour, rsps(v1alpha1.PodScope{Namespaces: []string{"x"}}))},
			governing: "a"},
		{name: "selects by namespace labels and labels",
			policies:  []v1alpha1.FailoverPolicy{pol("a", time.Hour, rsps(v1alpha1.PodScope{Selector: sel("app", "web"), NamespaceSelector: sel("team", "a")}))},
			governing: "a"},
		{name: "rebalance off or deleting",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, noRebalance), pol("b", time.Hour, deleting)}, owner: "b"},
		{name: "oldest wins",
			policies:  []v1alpha1.FailoverPolicy{pol("young", time.Minute), pol("old", time.Hour)},
			governing: "old", overlapping: "young"},
		{name: "owner's RSP selector invalid: held, not released",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, badRSP)}, owner: "a", unusable: "a", held: "a"},
		{name: "owner's clusterSelector invalid: held",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, clusters(badSelector))}, owner: "a", unusable: "a", held: "a"},
		{name: "owner invalid and older than a valid one: held, not handed over",
			policies: []v1alpha1.FailoverPolicy{pol("old", time.Hour, badRSP), pol("young", time.Minute)},
			owner:    "old", governing: "young", unusable: "old", held: "old"},
		{name: "owner invalid but a valid older one would win anyway",
			policies: []v1alpha1.FailoverPolicy{pol("young", time.Minute, badRSP), pol("old", time.Hour)},
			owner:    "young", governing: "old", unusable: "young"},
		{name: "invalid policy that never managed the RSP takes nothing new",
			policies: []v1alpha1.FailoverPolicy{pol("bad", time.Hour, badRSP), pol("good", time.Minute)},
			owner:    "good", governing: "good", unusable: "bad"},
		{name: "invalid pods selector does not stop rebalance",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, pods(badSelector))}, owner: "a", governing: "a"},
		{name: "owner disabled with an invalid selector: released",
			policies: []v1alpha1.FailoverPolicy{pol("a", time.Hour, badRSP, func(p *v1alpha1.FailoverPolicy) { p.Spec.Rebalance.Enabled = ptr.To(false) })}, owner: "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ForRSP(c.policies, web, c.owner)
			held := ""
			if s.Held != nil {
				held = s.Held.Policy.Name
				if s.Held.Err == nil {
					t.Error("held without an error")
				}
			}
			if nameOf(s.Governing) != c.governing || names(s.Overlapping) != c.overlapping || unusableNames(s.Unusable) != c.unusable || held != c.held {
				t.Errorf("governing %q overlapping %q unusable %q held %q, want %q %q %q %q",
					nameOf(s.Governing), names(s.Overlapping), unusableNames(s.Unusable), held, c.governing, c.overlapping, c.unusable, c.held)
			}
		})
	}
}

func TestNeedNamespaceLabels(t *testing.T) {
	if NeedNamespaceLabels([]v1alpha1.FailoverPolicy{pol("a", 0)}) {
		t.Error("no namespaceSelector, yet labels needed")
	}
	if !NeedNamespaceLabels([]v1alpha1.FailoverPolicy{pol("a", 0), pol("b", 0, rsps(v1alpha1.PodScope{NamespaceSelector: sel("x", "y")}))}) {
		t.Error("namespaceSelector, yet labels not needed")
	}
}

func labelsOf(m map[string]string) labels.Set { return labels.Set(m) }
