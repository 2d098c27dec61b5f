package member

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// TestExplainFindsTheControllersMachine feeds the same host objects to the
// Cache (an indexed reader, as the manager's cache) and to `kubectl
// failover explain` (a plain reader, as the CLI's client): for every node
// both must name the same Machine, or both none.
func TestExplainFindsTheControllersMachine(t *testing.T) {
	kfc := func(name, annotation string) client.Object {
		k := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: name},
			Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: "https://" + name + ".example:6443"}}
		if annotation != "" {
			k.Annotations = map[string]string{contract.AnnotationCAPICluster: annotation}
		}
		return k
	}
	// Each Cluster's endpoint is that of the member of its name.
	cluster := func(ns, name string) client.Object {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: name + ".example", Port: 6443}}}
	}
	machine := func(ns, name, cl, node string) client.Object {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cl}}}
		m.Spec.ClusterName, m.Status.NodeRef.Name = cl, node
		return m
	}
	// Labelled for alpha, but spec.clusterName (what Cluster API and the
	// mapping go by) says otherwise.
	stray := machine("fleet", "stray-m0", "other", "n2")
	stray.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "alpha"})
	objs := []client.Object{
		kfc("alpha", ""), kfc("beta", "capi-prod/beta-prod"), kfc("gamma", "gamma-capi"), kfc("twin", ""), kfc("lonely", ""),
		kfc("broken", "capi-prod/"), kfc("lookalike", ""),
		cluster("fleet", "alpha"), cluster("capi-prod", "beta-prod"), cluster("decoy", "beta-prod"), cluster("fleet", "gamma-capi"),
		cluster("a", "twin"), cluster("b", "twin"),
		// Merely the member's name: another endpoint.
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "lookalike"},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "elsewhere.example", Port: 6443}}},
		machine("fleet", "lookalike-m0", "lookalike", "n0"),
		machine("fleet", "alpha-m0", "alpha", "n0"), machine("fleet", "alpha-m1", "alpha", "n1"), machine("fleet", "alpha-m1b", "alpha", "n1"),
		machine("capi-prod", "beta-m0", "beta-prod", "n0"), machine("decoy", "decoy-m0", "beta-prod", "n1"),
		machine("fleet", "gamma-m0", "gamma-capi", "n0"),
		stray,
		machine("a", "twin-m0", "twin", "n0"),
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	indexed := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&clusterv1.Machine{}, capimap.MachineClusterField, capimap.MachineClusterValues).Build()
	plain := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	c := newCache(Options{}.withDefaults(), runtime.NewScheme())
	c.capi = capi{kubefed: indexed, host: capimap.Reader{Reader: indexed, Indexed: true}, ns: DefaultNamespace, enabled: true}
	ctx := t.Context()
	snap, err := cli.Gather(ctx, cli.Source{Reader: plain, KubefedNamespace: DefaultNamespace}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	found := 0
	for _, member := range []string{"alpha", "beta", "gamma", "twin", "lonely", "broken", "lookalike"} {
		// What node recovery uses: the member's Machines by node.
		byNode, ctrlErr := c.MachinesByNode(ctx, member)
		for _, node := range []string{"n0", "n1", "n2", "n9"} {
			want := byNode[node]
			got, _, note, err := cli.FindMachine(ctx, cli.MachineSource{Host: plain}, snap, member, node)
			if err != nil {
				t.Fatalf("%s/%s: explain failed: %v", member, node, err)
			}
			if name(got) != name(want) {
				t.Errorf("%s/%s: explain found %s, the controller %s (controller error %v, note %q)", member, node, name(got), name(want), ctrlErr, note)
			}
			if got == nil && note == "" {
				t.Errorf("%s/%s: no Machine and no note saying why", member, node)
			}
			if one, err := c.MachineForNode(ctx, member, node); name(one) != name(want) {
				t.Errorf("%s/%s: MachineForNode %s (%v), MachinesByNode %s", member, node, name(one), err, name(want))
			}
			if want != nil {
				found++
			}
		}
	}
	if found != 4 {
		t.Errorf("%d nodes have a Machine, want 4 (alpha n0 n1, beta n0, gamma n0): the fixture no longer tests what it should", found)
	}
}

func name(m *clusterv1.Machine) string {
	if m == nil {
		return "none"
	}
	return m.Namespace + "/" + m.Name
}
