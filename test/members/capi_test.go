package members

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
)

func TestNodeMachineMapping(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	ctx := context.Background()

	// beta maps to the Cluster of the same name; alpha's KubeFedCluster
	// names its Cluster by annotation, and a decoy Cluster "alpha" must not win.
	// beta's Cluster has beta's API endpoint (so it is beta's, not merely
	// named like it); the others have one of their own.
	capiCluster(t, f, "capi-beta", "beta", endpointOf(t, f.members["beta"].cfg.Host))
	capiCluster(t, f, "capi-prod", "alpha-prod", otherEndpoint)
	capiCluster(t, f, "decoy", "alpha", otherEndpoint)
	nodes := map[string]string{"beta-n0": "beta-m0", "beta-n1": "beta-m1"}
	for n, m := range nodes {
		readyNode(t, f.members["beta"], n)
		machine(t, f, "capi-beta", "beta", m, n)
	}
	readyNode(t, f.members["beta"], "beta-no-machine")
	machine(t, f, "capi-prod", "alpha-prod", "alpha-m0", "alpha-n0")
	machine(t, f, "decoy", "alpha", "decoy-m0", "alpha-n0")
	machine(t, f, "capi-beta", "beta", "beta-unprovisioned", "")

	a := f.join(t, "alpha", "alpha", nil)
	patchKFC(t, f, a, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCAPICluster: "capi-prod/alpha-prod"}
	})
	f.join(t, "beta", "beta", nil)
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)

	got, err := h.cache.CAPICluster(ctx, "beta")
	must(t, err)
	if got != (types.NamespacedName{Namespace: "capi-beta", Name: "beta"}) {
		t.Errorf("CAPICluster(beta) = %s", got)
	}
	eventually(t, 5*time.Second, "Machines of beta's nodes", func() error {
		for n, m := range nodes {
			mach, err := h.cache.MachineForNode(ctx, "beta", n)
			if err != nil {
				return err
			}
			if mach.Name != m {
				return errorf("MachineForNode(beta, %s) = %s, want %s", n, mach.Name, m)
			}
		}
		return nil
	})
	if _, err := h.cache.MachineForNode(ctx, "beta", "beta-no-machine"); !errors.Is(err, member.ErrNoMachine) {
		t.Errorf("node without Machine: got %v, want ErrNoMachine", err)
	}
	byNode, err := h.cache.MachinesByNode(ctx, "beta")
	must(t, err)
	if len(byNode) != len(nodes) {
		t.Errorf("MachinesByNode(beta) has %d entries, want %d", len(byNode), len(nodes))
	}
	for n, m := range nodes {
		if byNode[n] == nil || byNode[n].Name != m {
			t.Errorf("MachinesByNode(beta)[%s] = %v, want %s", n, byNode[n], m)
		}
	}
	// Every cached Node of beta maps to a Machine or is known to have none.
	r, err := h.cache.GetReader(ctx, "beta")
	must(t, err)
	var list corev1.NodeList
	must(t, r.List(ctx, &list))
	for _, n := range list.Items {
		_, err := h.cache.MachineForNode(ctx, "beta", n.Name)
		if (err == nil) != (nodes[n.Name] != "") {
			t.Errorf("node %s: MachineForNode error %v", n.Name, err)
		}
	}

	// The annotation overrides the same-name default.
	got, err = h.cache.CAPICluster(ctx, "alpha")
	must(t, err)
	if got != (types.NamespacedName{Namespace: "capi-prod", Name: "alpha-prod"}) {
		t.Errorf("CAPICluster(alpha) = %s, want capi-prod/alpha-prod", got)
	}
	eventually(t, 5*time.Second, "alpha's Machine via the annotated Cluster", func() error {
		m, err := h.cache.MachineForNode(ctx, "alpha", "alpha-n0")
		if err != nil {
			return err
		}
		if m.Namespace != "capi-prod" || m.Name != "alpha-m0" {
			return errorf("got %s/%s", m.Namespace, m.Name)
		}
		return nil
	})
}

// otherEndpoint is no member's API endpoint.
var otherEndpoint = clusterv1.APIEndpoint{Host: "elsewhere.invalid", Port: 6443}

// endpointOf is the controlPlaneEndpoint of an API server URL.
func endpointOf(t *testing.T, rawURL string) clusterv1.APIEndpoint {
	t.Helper()
	u, err := url.Parse(rawURL)
	must(t, err)
	port, err := strconv.Atoi(u.Port())
	must(t, err)
	return clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(port)}
}

func capiCluster(t *testing.T, f *federation, ns, name string, endpoint clusterv1.APIEndpoint) {
	t.Helper()
	ctx := context.Background()
	if err := f.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !isExists(err) {
		t.Fatal(err)
	}
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: endpoint}}
	must(t, f.host.Create(ctx, c))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), c) })
}

// machine creates a Machine of cluster; a non-empty node sets status.nodeRef
// as the Machine controller does once the Node exists.
func machine(t *testing.T, f *federation, ns, cluster, name, node string) {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-" + name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.test.io", Kind: "TestMachine", Name: name},
		},
	}
	must(t, f.host.Create(ctx, m))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), m) })
	if node != "" {
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
		must(t, f.host.Status().Update(ctx, m))
	}
	var got clusterv1.Machine
	must(t, f.host.Get(ctx, client.ObjectKeyFromObject(m), &got))
	if got.Status.NodeRef.Name != node {
		t.Fatalf("Machine %s: nodeRef %q not stored", name, got.Status.NodeRef.Name)
	}
}
