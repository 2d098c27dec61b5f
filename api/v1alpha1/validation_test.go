package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// The API tests run against a real kube-apiserver so the CRD's OpenAPI and
// CEL rules are exercised exactly as admission applies them.
// One API server serves every test in this package.
var apiClient client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, func(cfg *rest.Config) error {
		s, err := scheme.New()
		if err != nil {
			return err
		}
		apiClient, err = client.New(cfg, client.Options{Scheme: s})
		return err
	}))
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	if apiClient == nil {
		t.Fatal("API server not started")
	}
	return apiClient
}

func policyFromYAML(t *testing.T, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "FailoverPolicy",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	return u
}

func TestValidation(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	// Each case is invalid for exactly one reason; the error must name the
	// field and say why.
	cases := []struct {
		name      string
		spec      string
		wantField string
		wantWhy   string
	}{
		{"zero notReadyFor", `nodeRecovery: {notReadyFor: 0s}`,
			"spec.nodeRecovery.notReadyFor", "must be a positive duration"},
		{"negative notReadyFor", `nodeRecovery: {notReadyFor: "-5s"}`,
			"spec.nodeRecovery.notReadyFor", "should match"},
		{"notReadyFor without unit", `nodeRecovery: {notReadyFor: "30"}`,
			"spec.nodeRecovery.notReadyFor", "should match"},
		{"maxFailedMembers over 100%", `rebalance: {maxFailedMembers: "150%"}`,
			"spec.rebalance.maxFailedMembers", "percentage from 0% to 100%"},
		{"unknown placement", `rebalance: {placement: Eager}`,
			"spec.rebalance.placement", "supported values"},
		{"nodeSelector with an unknown operator", `nodeRecovery: {nodeSelector: {matchExpressions: [{key: a, operator: Near}]}}`,
			"spec.nodeRecovery.nodeSelector.matchExpressions", "must be In, NotIn, Exists or DoesNotExist"},
		{"maxUnhealthy over 100%", `nodeRecovery: {maxUnhealthy: "101%"}`,
			"spec.nodeRecovery.maxUnhealthy", "percentage from 0% to 100%"},
		{"maxUnhealthy negative", `nodeRecovery: {maxUnhealthy: -1}`,
			"spec.nodeRecovery.maxUnhealthy", "non-negative integer"},
		{"maxUnhealthy words", `nodeRecovery: {maxUnhealthy: "half"}`,
			"spec.nodeRecovery.maxUnhealthy", "percentage from 0% to 100%"},
		{"unknown method", `nodeRecovery: {method: Reboot}`,
			"spec.nodeRecovery.method", "Unsupported value"},
		{"no fencing evidence", `nodeRecovery: {fencing: {machineInfrastructureDeleted: false}}`,
			"spec.nodeRecovery.fencing", "no fencing evidence is enabled"},
		{"assumeFencedAfter shorter than notReadyFor", `nodeRecovery: {notReadyFor: 2m, fencing: {assumeFencedAfter: 1m}}`,
			"spec.nodeRecovery.fencing.assumeFencedAfter", "must not be shorter than notReadyFor"},
		{"requestMachineDeletion without infrastructure evidence",
			`nodeRecovery: {fencing: {machineInfrastructureDeleted: false, externalFenceAnnotation: x.io/fenced, requestMachineDeletion: true}}`,
			"spec.nodeRecovery.fencing.requestMachineDeletion", "needs machineInfrastructureDeleted"},
		{"powered-off condition with bad status", `nodeRecovery: {fencing: {poweredOffConditions: [{type: PowerOn, status: "Off"}]}}`,
			"spec.nodeRecovery.fencing.poweredOffConditions[0].status", "Unsupported value"},
		{"powered-off condition without type", `nodeRecovery: {fencing: {poweredOffConditions: [{type: "", status: "False"}]}}`,
			"spec.nodeRecovery.fencing.poweredOffConditions[0].type", "at least 1 chars long"},
		{"bad external fence annotation", `nodeRecovery: {fencing: {externalFenceAnnotation: "not a key!"}}`,
			"spec.nodeRecovery.fencing.externalFenceAnnotation", "should match"},
		{"remediation template kind without the Template suffix",
			`nodeRecovery: {remediation: {template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediation, name: t, namespace: ns}}}`,
			"spec.nodeRecovery.remediation.template.kind", "should match"},
		{"remediation template apiVersion without a group",
			`nodeRecovery: {remediation: {template: {apiVersion: v1, kind: LabRemediationTemplate, name: t, namespace: ns}}}`,
			"spec.nodeRecovery.remediation.template.apiVersion", "should match"},
		{"remediation template without a namespace",
			`nodeRecovery: {remediation: {template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediationTemplate, name: t}}}`,
			"spec.nodeRecovery.remediation.template.namespace", "Required value"},
		{"remediation timeout too short",
			`nodeRecovery: {remediation: {timeout: 1s, template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediationTemplate, name: t, namespace: ns}}}`,
			"spec.nodeRecovery.remediation.timeout", "must be between 5s and 24h"},
		{"remediation timeout not a duration",
			`nodeRecovery: {remediation: {timeout: soon, template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediationTemplate, name: t, namespace: ns}}}`,
			"spec.nodeRecovery.remediation.timeout", "should match"},
		{"unknown external fence source", `nodeRecovery: {fencing: {externalFenceAnnotation: x.io/fenced, externalFenceSource: Kubelet}}`,
			"spec.nodeRecovery.fencing.externalFenceSource", "Unsupported value"},
		{"external fence source in lower case", `nodeRecovery: {fencing: {externalFenceAnnotation: x.io/fenced, externalFenceSource: node}}`,
			"spec.nodeRecovery.fencing.externalFenceSource", "Unsupported value"},
		{"unknown detection", `nodeRecovery: {detection: Lease}`, "spec.nodeRecovery.detection", "Unsupported value"},
		{"detection in lower case", `nodeRecovery: {detection: evidence}`, "spec.nodeRecovery.detection", "Unsupported value"},
		{"pod namespaces and namespaceSelector", `nodeRecovery: {pods: {namespaces: [a], namespaceSelector: {matchLabels: {a: b}}}}`,
			"spec.nodeRecovery.pods", "mutually exclusive"},
		{"zero stormCooldown", `nodeRecovery: {stormCooldown: 0ms}`,
			"spec.nodeRecovery.stormCooldown", "must be a positive duration"},
		{"maxStep zero", `rebalance: {failback: {maxStep: 0}}`,
			"spec.rebalance.failback.maxStep", "should be greater than or equal to 1"},
		{"stabilizationWindow shorter than minInterval", `rebalance: {minInterval: 5m, failback: {stabilizationWindow: 1m}}`,
			"spec.rebalance.failback.stabilizationWindow", "must not be shorter than minInterval"},
		{"capacityExhaustedAfter without unit", `rebalance: {capacityExhaustedAfter: "0.5"}`,
			"spec.rebalance.capacityExhaustedAfter", "should match"},
		{"zero clusterFailedAfter", `rebalance: {clusterFailedAfter: 0s}`,
			"spec.rebalance.clusterFailedAfter", "must be a positive duration"},
		{"RSP namespaces and namespaceSelector", `rebalance: {replicaSchedulingPreferences: {namespaces: [a], namespaceSelector: {}}}`,
			"spec.rebalance.replicaSchedulingPreferences", "mutually exclusive"},
		{"nothing to do", `dryRun: true`,
			"spec", "at least one of nodeRecovery or rebalance must be set"},
		{"duplicate reasons", `nodeRecovery: {fencing: {poweredOffConditions: [{type: PowerOn, status: "False", reasons: [Off, Off]}]}}`,
			"spec.nodeRecovery.fencing.poweredOffConditions[0].reasons[1]", "Duplicate value"},
		{"pod namespace not a DNS label", `nodeRecovery: {pods: {namespaces: ["Not_A_Namespace"]}}`,
			"spec.nodeRecovery.pods.namespaces[0]", "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"},
		{"RSP namespace not a DNS label", `rebalance: {replicaSchedulingPreferences: {namespaces: [demo, "-edge"]}}`,
			"spec.rebalance.replicaSchedulingPreferences.namespaces[1]", "should match"},
		{"cluster selector operator Near", `{rebalance: {}, clusterSelector: {matchExpressions: [{key: region, operator: Near, values: [eu]}]}}`,
			"spec.clusterSelector.matchExpressions", "operator must be In, NotIn, Exists or DoesNotExist"},
		{"cluster selector In without values", `{rebalance: {}, clusterSelector: {matchExpressions: [{key: region, operator: In}]}}`,
			"spec.clusterSelector.matchExpressions", "values must be non-empty for In and NotIn"},
		{"pod selector Exists with values", `nodeRecovery: {pods: {selector: {matchExpressions: [{key: app, operator: Exists, values: [db]}]}}}`,
			"spec.nodeRecovery.pods.selector.matchExpressions", "empty for Exists and DoesNotExist"},
		{"RSP namespace selector bad operator", `rebalance: {replicaSchedulingPreferences: {namespaceSelector: {matchExpressions: [{key: team, operator: Equals, values: [a]}]}}}`,
			"spec.rebalance.replicaSchedulingPreferences.namespaceSelector.matchExpressions", "operator must be In, NotIn, Exists or DoesNotExist"},
	}
	if len(cases) < 15 {
		t.Fatalf("need at least 15 invalid cases, have %d", len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := policyFromYAML(t, "invalid-"+strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"), tc.spec)
			err := c.Create(ctx, obj)
			if err == nil {
				_ = c.Delete(ctx, obj)
				t.Fatalf("case %d: policy %q was accepted, want rejection", i, tc.spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantField) {
				t.Errorf("error does not name field %q:\n%s", tc.wantField, msg)
			}
			if !strings.Contains(msg, tc.wantWhy) {
				t.Errorf("error does not say %q:\n%s", tc.wantWhy, msg)
			}
		})
	}
}

// TestValidSelectorsAccepted: the selector rules reject only what
// metav1.LabelSelectorAsSelector would reject.
func TestValidSelectorsAccepted(t *testing.T) {
	c := newClient(t)
	sel := `{matchLabels: {tier: db}, matchExpressions: [{key: a, operator: In, values: [x1, x2]}, {key: b, operator: NotIn, values: [z]},
		{key: c, operator: Exists}, {key: d, operator: DoesNotExist, values: []}]}`
	obj := policyFromYAML(t, "valid-selectors", `{clusterSelector: `+sel+`,
		nodeRecovery: {pods: {namespaces: [db, team-a, "0x"], selector: `+sel+`}},
		rebalance: {replicaSchedulingPreferences: {namespaceSelector: `+sel+`, selector: `+sel+`}}}`)
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("valid selectors rejected: %v", err)
	}
	_ = c.Delete(context.Background(), obj)
}

// TestExternalFenceSourceAccepted: both sources are accepted, as written.
func TestExternalFenceSourceAccepted(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for _, src := range []v1alpha1.ExternalFenceSource{v1alpha1.ExternalFenceSourceMachine, v1alpha1.ExternalFenceSourceNode} {
		name := "fence-source-" + strings.ToLower(string(src))
		obj := policyFromYAML(t, name, `{nodeRecovery: {fencing: {externalFenceAnnotation: x.io/fenced, externalFenceSource: `+string(src)+`}}}`)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("externalFenceSource %s rejected: %v", src, err)
		}
		var got v1alpha1.FailoverPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeRecovery.Fencing.ExternalFenceSource != src {
			t.Errorf("externalFenceSource stored as %q, want %q", got.Spec.NodeRecovery.Fencing.ExternalFenceSource, src)
		}
		_ = c.Delete(ctx, obj)
	}
}

// TestDetectionAccepted: both detections are accepted, as written.
func TestDetectionAccepted(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for _, d := range []v1alpha1.NodeLossDetection{v1alpha1.NodeLossDetectionEvidence, v1alpha1.NodeLossDetectionNotReady} {
		name := "detection-" + strings.ToLower(string(d))
		obj := policyFromYAML(t, name, `{nodeRecovery: {detection: `+string(d)+`}}`)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("detection %s rejected: %v", d, err)
		}
		var got v1alpha1.FailoverPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeRecovery.Detection != d {
			t.Errorf("detection stored as %q, want %q", got.Spec.NodeRecovery.Detection, d)
		}
		_ = c.Delete(ctx, obj)
	}
}

// TestRemediationAccepted: a valid template reference is stored, and the
// timeout takes its default.
func TestRemediationAccepted(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	obj := policyFromYAML(t, "remediation-accepted",
		`{nodeRecovery: {remediation: {template: {apiVersion: lab.fedfailover.io/v1alpha1, kind: LabRemediationTemplate, name: power-off, namespace: fence}}}}`)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("remediation rejected: %v", err)
	}
	defer func() { _ = c.Delete(ctx, obj) }()
	var got v1alpha1.FailoverPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: "remediation-accepted"}, &got); err != nil {
		t.Fatal(err)
	}
	rem := got.Spec.NodeRecovery.Remediation
	if rem == nil || rem.Timeout != "5m" || rem.Template.RemediationKind() != "LabRemediation" {
		t.Fatalf("remediation stored as %+v, want timeout 5m and kind LabRemediation", rem)
	}
}

func TestDefaults(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	obj := policyFromYAML(t, "defaults", `{nodeRecovery: {}, rebalance: {}}`)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("minimal policy rejected: %v", err)
	}
	var got v1alpha1.FailoverPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: "defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	nr, rb := got.Spec.NodeRecovery, got.Spec.Rebalance
	checks := []struct {
		what      string
		got, want any
	}{
		{"nodeRecovery.enabled", nr.Enabled != nil && *nr.Enabled, true},
		{"nodeRecovery.notReadyFor", nr.NotReadyFor.Get(), time.Minute},
		{"nodeRecovery.method", nr.Method, v1alpha1.RecoveryMethodAuto},
		{"nodeRecovery.maxUnhealthy", *nr.MaxUnhealthy, intstr.FromString("40%")},
		{"nodeRecovery.stormCooldown", nr.StormCooldown.Get(), 5 * time.Minute},
		{"nodeRecovery.fencing.machineInfrastructureDeleted", nr.Fencing.MachineInfrastructureDeleted, true},
		{"nodeRecovery.fencing.requestMachineDeletion", nr.Fencing.RequestMachineDeletion, false},
		{"nodeRecovery.fencing.assumeFencedAfter", nr.Fencing.AssumeFencedAfter == nil, true},
		{"nodeRecovery.fencing.externalFenceSource", nr.Fencing.ExternalFenceSource, v1alpha1.ExternalFenceSourceMachine},
		{"nodeRecovery.detection", nr.Detection, v1alpha1.NodeLossDetectionEvidence},
		{"rebalance.enabled", rb.Enabled != nil && *rb.Enabled, true},
		{"rebalance.capacityExhaustedAfter", rb.CapacityExhaustedAfter.Get(), 10 * time.Second},
		{"rebalance.clusterFailedAfter", rb.ClusterFailedAfter.Get(), 20 * time.Second},
		{"rebalance.minInterval", rb.MinInterval.Get(), 30 * time.Second},
		{"rebalance.failback.stabilizationWindow", rb.Failback.StabilizationWindow.Get(), 2 * time.Minute},
		{"rebalance.failback.maxStep", rb.Failback.MaxStep, int32(2)},
		{"rebalance.failback.makeBeforeBreak", rb.Failback.MakeBeforeBreak, true},
		{"rebalance.placement", rb.Placement, v1alpha1.PlacementPredictive},
		{"dryRun", got.Spec.DryRun, false},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("default %s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

// A policy built in Go that leaves enabled out gets the default, true; an
// explicit false is kept. With a plain bool the Go client sent "enabled":
// false for every job left out, and both jobs were off (the fault
// campaign's policy reset fell into it).
func TestEnabledLeftOutInGoIsTheDefault(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		set  *bool
		want bool
	}{{"enabled-left-out", nil, true}, {"enabled-false", ptr.To(false), false}, {"enabled-true", ptr.To(true), true}} {
		p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: v1alpha1.FailoverPolicySpec{
			// Fencing and makeBeforeBreak are still plain bools with a
			// default of true: set here as the server would default them.
			NodeRecovery: &v1alpha1.NodeRecoverySpec{Enabled: tc.set, Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}},
			Rebalance:    &v1alpha1.RebalanceSpec{Enabled: tc.set, Failback: v1alpha1.FailbackSpec{MakeBeforeBreak: true}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got v1alpha1.FailoverPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: tc.name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeRecovery.On() != tc.want || got.Spec.Rebalance.On() != tc.want || got.Spec.NodeRecovery.Enabled == nil {
			t.Errorf("%s: stored nodeRecovery.enabled %v, rebalance.enabled %v; want %v (the default stored)", tc.name,
				got.Spec.NodeRecovery.Enabled, got.Spec.Rebalance.Enabled, tc.want)
		}
		_ = c.Delete(ctx, &got)
	}
}

func TestSamplesAccepted(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "failover_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found (err=%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &u.Object); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, u); err != nil {
				t.Fatalf("sample rejected: %v", err)
			}
			// A typed round trip proves the sample's fields all map onto the Go API.
			if u.GetKind() == "MemberMaintenance" {
				var mm v1alpha1.MemberMaintenance
				if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, &mm); err != nil {
					t.Fatal(err)
				}
				if mm.Spec.Member == "" || mm.Spec.Reason == "" {
					t.Errorf("sample %s lost its member or reason after decoding: %+v", u.GetName(), mm.Spec)
				}
				return
			}
			var typed v1alpha1.FailoverPolicy
			if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, &typed); err != nil {
				t.Fatal(err)
			}
			if typed.Spec.NodeRecovery == nil && typed.Spec.Rebalance == nil {
				t.Errorf("sample %s has neither nodeRecovery nor rebalance after decoding", u.GetName())
			}
		})
	}
}
