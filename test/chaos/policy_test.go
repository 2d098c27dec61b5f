package chaos

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// storedLivePolicy is the live policy's spec as the API server stores it:
// both jobs enabled by the CRD's defaults.
func storedLivePolicy() v1alpha1.FailoverPolicySpec {
	return v1alpha1.FailoverPolicySpec{
		NodeRecovery: &v1alpha1.NodeRecoverySpec{},
		Rebalance:    &v1alpha1.RebalanceSpec{},
	}
}

// TestResetPolicyRecreatesTheStoredSpec: a deleted policy comes back as it
// was set up. It used to be re-created from its manifest decoded into Go,
// whose omitted enabled fields became explicit falses: both jobs off for
// the rest of the campaign, which then proved nothing (0 destructive acts
// in 50 runs).
func TestResetPolicyRecreatesTheStoredSpec(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	host := fake.NewClientBuilder().WithScheme(s).Build()
	c := &Campaign{host: host, policyBaseline: map[string]v1alpha1.FailoverPolicySpec{livePolicy: storedLivePolicy()}}

	if err := c.resetPolicy(ctx, livePolicy); err != nil { // deleted: re-created
		t.Fatal(err)
	}
	var p v1alpha1.FailoverPolicy
	if err := host.Get(ctx, client.ObjectKey{Name: livePolicy}, &p); err != nil {
		t.Fatal(err)
	}
	if d := policyDrift(storedLivePolicy(), p.Spec); d != "" {
		t.Fatalf("re-created policy: %s", d)
	}

	p.Spec.Paused, p.Spec.NodeRecovery.Enabled = true, ptr.To(false) // edited: restored
	if err := host.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if err := c.resetPolicy(ctx, livePolicy); err != nil {
		t.Fatal(err)
	}
	if err := host.Get(ctx, client.ObjectKey{Name: livePolicy}, &p); err != nil {
		t.Fatal(err)
	}
	if d := policyDrift(storedLivePolicy(), p.Spec); d != "" {
		t.Fatalf("restored policy: %s", d)
	}
}

// TestPolicyDriftNamesWhatDiffers: I4 reports a policy that did not come
// back as set up, by the part that differs.
func TestPolicyDriftNamesWhatDiffers(t *testing.T) {
	if d := policyDrift(storedLivePolicy(), storedLivePolicy()); d != "" {
		t.Fatalf("same spec: drift %q", d)
	}
	off := storedLivePolicy()
	off.NodeRecovery.Enabled, off.Rebalance.Enabled = ptr.To(false), ptr.To(false)
	d := policyDrift(storedLivePolicy(), off)
	for _, want := range []string{"nodeRecovery differs (enabled false, want true)", "rebalance differs (enabled false, want true)"} {
		if !strings.Contains(d, want) {
			t.Errorf("drift %q does not say %q", d, want)
		}
	}
	sel := storedLivePolicy()
	sel.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
	if d := policyDrift(storedLivePolicy(), sel); d != "clusterSelector differs" {
		t.Errorf("selector drift %q", d)
	}
}
