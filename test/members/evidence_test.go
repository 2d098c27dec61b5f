package members

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// TestCAPIClusterMustBeUnambiguous: a Cluster API Cluster that merely has
// the member's name, or one of several same-named Clusters in different
// namespaces, gives no Machine evidence, and the policy's
// MachineEvidenceUnavailable condition and `kubectl failover explain` say
// why; the annotation resolves it (a matching controlPlaneEndpoint only
// when no other Cluster has the name). On
// the old code the lookalike Cluster was picked silently (its Machine
// used as evidence) and no condition existed.
func TestCAPIClusterMustBeUnambiguous(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	j := f.join(t, "alpha", "alpha", map[string]string{"evidence-test": "yes"})
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	pol := policy(t, f, "capi-identity", &metav1.LabelSelector{MatchLabels: map[string]string{"evidence-test": "yes"}})
	alphaEndpoint := endpointOf(t, f.members["alpha"].cfg.Host)

	// 1. One Cluster named alpha, with another endpoint: unverified.
	capiCluster(t, f, "twin-b", "alpha", otherEndpoint)
	machine(t, f, "twin-b", "alpha", "lookalike-m0", "alpha-n0")
	waitEvidence(t, f, pol, metav1.ConditionTrue, v1alpha1.ReasonCAPIClusterUnverified, "member alpha: Cluster twin-b/alpha")
	wantNoMachine(t, h, f, "alpha", "alpha-n0", v1alpha1.ReasonCAPIClusterUnverified)

	// 2. A second one with alpha's endpoint: two candidates are ambiguous,
	// whatever their endpoints (an endpoint is as easy to copy as a name).
	capiCluster(t, f, "twin-a", "alpha", alphaEndpoint)
	machine(t, f, "twin-a", "alpha", "alpha-m0", "alpha-n0")
	waitEvidence(t, f, pol, metav1.ConditionTrue, v1alpha1.ReasonCAPIClusterAmbiguous, "twin-b/alpha")
	wantNoMachine(t, h, f, "alpha", "alpha-n0", v1alpha1.ReasonCAPIClusterAmbiguous)

	// 3. A third copies alpha's endpoint: still ambiguous.
	capiCluster(t, f, "twin-c", "alpha", alphaEndpoint)
	machine(t, f, "twin-c", "alpha", "copy-m0", "alpha-n0")
	waitEvidence(t, f, pol, metav1.ConditionTrue, v1alpha1.ReasonCAPIClusterAmbiguous, "twin-a/alpha")
	waitEvidence(t, f, pol, metav1.ConditionTrue, v1alpha1.ReasonCAPIClusterAmbiguous, "twin-c/alpha")
	wantNoMachine(t, h, f, "alpha", "alpha-n0", v1alpha1.ReasonCAPIClusterAmbiguous)

	// 4. The annotation names the member's Cluster.
	patchKFC(t, f, j, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCAPICluster: "twin-a/alpha"}
	})
	waitEvidence(t, f, pol, metav1.ConditionFalse, v1alpha1.ReasonCAPIClustersResolved, "")
	wantMachine(t, h, "alpha", "alpha-n0", "twin-a/alpha-m0")
}

func waitEvidence(t *testing.T, f *federation, pol *v1alpha1.FailoverPolicy, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMachineEvidenceUnavailable)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) || c.ObservedGeneration != p.Generation {
			return errorf("%s %+v, want %s/%s with %q", v1alpha1.ConditionMachineEvidenceUnavailable, c, status, reason, msg)
		}
		return nil
	})
}

// wantNoMachine: neither node recovery's lookup nor explain's finds a
// Machine for the node, and both say why.
func wantNoMachine(t *testing.T, h *harness, f *federation, cluster, node, reason string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 10*time.Second, "no Machine for "+cluster+"/"+node, func() error {
		ms, err := h.cache.MachinesByNode(ctx, cluster)
		var ce *capimap.ClusterError
		if !errors.As(err, &ce) || ce.Reason != reason || len(ms) != 0 {
			return errorf("MachinesByNode = %v, %v; want none and a %s error", ms, err, reason)
		}
		if m, err := h.cache.MachineForNode(ctx, cluster, node); m != nil || !errors.Is(err, member.ErrNoCAPICluster) {
			return errorf("MachineForNode = %v, %v; want none", m, err)
		}
		// explain reads the KubeFedCluster from its snapshot of the host.
		var kfc kubefedv1beta1.KubeFedCluster
		if err := f.host.Get(ctx, client.ObjectKey{Namespace: kubefedNS, Name: cluster}, &kfc); err != nil {
			return err
		}
		snap := &cli.Snapshot{Clusters: []kubefedv1beta1.KubeFedCluster{kfc}}
		m, _, note, err := cli.FindMachine(ctx, cli.MachineSource{Host: f.host}, snap, cluster, node)
		if err != nil || m != nil || !strings.Contains(note, "no Machine evidence is used") {
			return errorf("explain: Machine %v, note %q, error %v; want none and why", m, note, err)
		}
		return nil
	})
}

func wantMachine(t *testing.T, h *harness, cluster, node, want string) {
	t.Helper()
	eventually(t, 10*time.Second, "Machine of "+cluster+"/"+node, func() error {
		m, err := h.cache.MachineForNode(context.Background(), cluster, node)
		if err != nil {
			return err
		}
		if got := m.Namespace + "/" + m.Name; got != want {
			return errorf("MachineForNode = %s, want %s", got, want)
		}
		return nil
	})
}
