package capimap

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

func cluster(ns, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func machine(ns, name, cluster, node string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	m.Spec.ClusterName, m.Status.NodeRef.Name = cluster, node
	return m
}

// readers are the same objects behind an indexed reader (the controller's
// cache) and a plain one (the CLI).
func readers(t *testing.T, objs ...client.Object) map[string]Reader {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	indexed := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&clusterv1.Machine{}, MachineClusterField, MachineClusterValues).Build()
	plain := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return map[string]Reader{"indexed": {Reader: indexed, Indexed: true}, "plain": {Reader: plain}}
}

func TestMapping(t *testing.T) {
	objs := []client.Object{
		cluster("fleet", "alpha"), cluster("capi-prod", "alpha-prod"), cluster("decoy", "alpha-prod"),
		cluster("a", "twin"), cluster("b", "twin"),
		machine("fleet", "alpha-m0", "alpha", "alpha-n0"),
		machine("fleet", "alpha-m1", "alpha", ""),                // not provisioned yet
		machine("fleet", "other-m0", "other", "alpha-n1"),        // another Cluster in the namespace
		machine("fleet", "alpha-m3", "alpha", "alpha-n3"),        // two Machines claim alpha-n3:
		machine("fleet", "alpha-m2", "alpha", "alpha-n3"),        // the first by name wins
		machine("capi-prod", "prod-m0", "alpha-prod", "prod-n0"), //
		machine("decoy", "decoy-m0", "alpha-prod", "prod-n0"),
	}
	cases := []struct {
		name        string
		member      string
		annotation  string
		node        string
		wantCluster string // namespace/name; empty when an error is wanted
		wantMachine string // name; empty when ErrNoMachine is wanted
		wantErr     error
		errHas      string
	}{
		{name: "member name, no annotation", member: "alpha", node: "alpha-n0", wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "annotation namespace/name beats a decoy", member: "beta", annotation: "capi-prod/alpha-prod", node: "prod-n0",
			wantCluster: "capi-prod/alpha-prod", wantMachine: "prod-m0"},
		{name: "annotation bare name, one namespace has it", member: "beta", annotation: "alpha", node: "alpha-n0",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "annotation bare name in two namespaces", member: "beta", annotation: "alpha-prod", wantErr: ErrNoCluster, errHas: "all match"},
		{name: "member name in two namespaces", member: "twin", wantErr: ErrNoCluster, errHas: "[a/twin b/twin] all match"},
		{name: "no Cluster", member: "gamma", wantErr: ErrNoCluster, errHas: `no Cluster named "gamma"`},
		{name: "annotated Cluster missing", member: "beta", annotation: "capi-prod/nope", wantErr: ErrNoCluster, errHas: contract.AnnotationCAPICluster},
		{name: "annotation malformed", member: "beta", annotation: "capi-prod/", wantErr: ErrNoCluster, errHas: contract.AnnotationCAPICluster},
		{name: "no Machine for the node", member: "alpha", node: "alpha-n9", wantCluster: "fleet/alpha", wantErr: ErrNoMachine},
		{name: "Machine of another Cluster", member: "alpha", node: "alpha-n1", wantCluster: "fleet/alpha", wantErr: ErrNoMachine},
		{name: "two Machines claim the node", member: "alpha", node: "alpha-n3", wantCluster: "fleet/alpha", wantMachine: "alpha-m2"},
	}
	for rname, r := range readers(t, objs...) {
		for _, c := range cases {
			t.Run(rname+"/"+c.name, func(t *testing.T) {
				ctx := t.Context()
				var a map[string]string
				if c.annotation != "" {
					a = map[string]string{contract.AnnotationCAPICluster: c.annotation}
				}
				cl, err := r.Cluster(ctx, c.member, a)
				if c.wantCluster == "" {
					if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.errHas) {
						t.Fatalf("Cluster: %v, want %v with %q", err, c.wantErr, c.errHas)
					}
					return
				}
				if err != nil || cl.String() != c.wantCluster {
					t.Fatalf("Cluster = %s, %v; want %s", cl, err, c.wantCluster)
				}
				m, err := r.MachineForNode(ctx, cl, c.node)
				switch {
				case c.wantMachine == "" && !errors.Is(err, ErrNoMachine):
					t.Fatalf("MachineForNode: %v, want ErrNoMachine", err)
				case c.wantMachine != "" && (err != nil || m.Name != c.wantMachine):
					t.Fatalf("MachineForNode = %v, %v; want %s", m, err, c.wantMachine)
				}
			})
		}
	}
}

func TestMachinesByNode(t *testing.T) {
	objs := []client.Object{
		machine("fleet", "m0", "alpha", "n0"), machine("fleet", "m1", "alpha", "n1"), machine("fleet", "m2", "alpha", ""),
		machine("fleet", "x0", "beta", "n2"), machine("other", "y0", "alpha", "n3"),
	}
	for rname, r := range readers(t, objs...) {
		t.Run(rname, func(t *testing.T) {
			got, err := r.MachinesByNode(t.Context(), types.NamespacedName{Namespace: "fleet", Name: "alpha"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got["n0"].Name != "m0" || got["n1"].Name != "m1" {
				t.Fatalf("got %v, want n0->m0 and n1->m1 only", got)
			}
		})
	}
}

func TestByNodeTieIgnoresListOrder(t *testing.T) {
	cl := types.NamespacedName{Namespace: "fleet", Name: "alpha"}
	a, b := *machine("fleet", "a", "alpha", "n"), *machine("fleet", "b", "alpha", "n")
	for _, order := range [][]clusterv1.Machine{{a, b}, {b, a}} {
		if got := byNode(cl, order)["n"]; got == nil || got.Name != "a" {
			t.Fatalf("order %s,%s: got %v, want a", order[0].Name, order[1].Name, got)
		}
	}
}
