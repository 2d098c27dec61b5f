package capimap

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// cluster is a Cluster API Cluster; endpoint is "host:port", "host" (port
// unset) or "" (none).
func cluster(ns, name, endpoint string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	host, port, found := strings.Cut(endpoint, ":")
	c.Spec.ControlPlaneEndpoint.Host = host
	if found {
		p, _ := strconv.Atoi(port)
		c.Spec.ControlPlaneEndpoint.Port = int32(p)
	}
	return c
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
		cluster("fleet", "alpha", "alpha.example:6443"),
		cluster("capi-prod", "alpha-prod", "prod.example:6443"), cluster("decoy", "alpha-prod", ""),
		cluster("a", "twin", "twin.example:6443"), cluster("b", "twin", "twin.example:6443"),
		cluster("a", "pair", "pair.example:6443"), cluster("b", "pair", "evil.example:6443"),
		cluster("fleet", "lookalike", "other.example:6443"),
		cluster("fleet", "noport", "noport.example"),
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
		endpoint    string // the KubeFedCluster's apiEndpoint
		annotation  string
		node        string
		wantCluster string // namespace/name; empty when an error is wanted
		wantMachine string // name; empty when ErrNoMachine is wanted
		wantErr     error
		wantReason  string // the *ClusterError's reason; empty for a plain ErrNoCluster
		errHas      string
	}{
		{name: "member name and endpoint", member: "alpha", endpoint: "https://alpha.example:6443", node: "alpha-n0",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "endpoint: case and trailing slash", member: "alpha", endpoint: "https://ALPHA.example:6443/", node: "alpha-n0",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "endpoint without scheme", member: "alpha", endpoint: "alpha.example:6443", node: "alpha-n0",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "endpoint: default https port on both sides", member: "noport", endpoint: "https://noport.example", wantCluster: "fleet/noport"},
		{name: "endpoint: explicit 443 against an unset port", member: "noport", endpoint: "https://noport.example:443", wantCluster: "fleet/noport"},
		{name: "member name, other port", member: "alpha", endpoint: "https://alpha.example", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterUnverified, errHas: "Cluster fleet/alpha (controlPlaneEndpoint alpha.example:6443) merely has the member's name"},
		{name: "member name, no endpoint", member: "alpha", wantErr: ErrNoCluster, wantReason: v1alpha1.ReasonCAPIClusterUnverified,
			errHas: "apiEndpoint is (none)"},
		{name: "a Cluster that merely has the member's name", member: "lookalike", endpoint: "https://lookalike.example:6443",
			wantErr: ErrNoCluster, wantReason: v1alpha1.ReasonCAPIClusterUnverified, errHas: contract.AnnotationCAPICluster},
		{name: "annotation namespace/name beats a decoy", member: "beta", annotation: "capi-prod/alpha-prod", node: "prod-n0",
			wantCluster: "capi-prod/alpha-prod", wantMachine: "prod-m0"},
		{name: "annotation bare name, one namespace has it", member: "beta", annotation: "alpha", node: "alpha-n0",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m0"},
		{name: "annotation bare name in two namespaces, one with the endpoint", member: "beta", endpoint: "https://prod.example:6443",
			annotation: "alpha-prod", wantErr: ErrNoCluster, wantReason: v1alpha1.ReasonCAPIClusterAmbiguous,
			errHas: "two candidates are ambiguous, whatever their endpoints"},
		{name: "annotation bare name in two namespaces", member: "beta", annotation: "alpha-prod", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterAmbiguous, errHas: `2 Clusters are named "alpha-prod"`},
		{name: "member name in two namespaces, same endpoint", member: "twin", endpoint: "https://twin.example:6443", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterAmbiguous,
			errHas:     "a/twin (controlPlaneEndpoint twin.example:6443), b/twin (controlPlaneEndpoint twin.example:6443)"},
		{name: "member name in two namespaces, one with the endpoint", member: "pair", endpoint: "https://pair.example:6443",
			wantErr: ErrNoCluster, wantReason: v1alpha1.ReasonCAPIClusterAmbiguous, errHas: `2 Clusters are named "pair"`},
		{name: "no Cluster", member: "gamma", endpoint: "https://gamma.example", wantErr: ErrNoCluster, errHas: `no Cluster named "gamma"`},
		{name: "annotated Cluster missing", member: "beta", annotation: "capi-prod/nope", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterNotFound, errHas: contract.AnnotationCAPICluster},
		{name: "annotated bare name missing", member: "beta", annotation: "nope", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterNotFound, errHas: "names no existing Cluster"},
		{name: "annotation malformed", member: "beta", annotation: "capi-prod/", wantErr: ErrNoCluster,
			wantReason: v1alpha1.ReasonCAPIClusterAnnotationInvalid, errHas: contract.AnnotationCAPICluster},
		{name: "no Machine for the node", member: "alpha", endpoint: "https://alpha.example:6443", node: "alpha-n9",
			wantCluster: "fleet/alpha", wantErr: ErrNoMachine},
		{name: "Machine of another Cluster", member: "alpha", endpoint: "https://alpha.example:6443", node: "alpha-n1",
			wantCluster: "fleet/alpha", wantErr: ErrNoMachine},
		{name: "two Machines claim the node", member: "alpha", endpoint: "https://alpha.example:6443", node: "alpha-n3",
			wantCluster: "fleet/alpha", wantMachine: "alpha-m2"},
	}
	for rname, r := range readers(t, objs...) {
		for _, c := range cases {
			t.Run(rname+"/"+c.name, func(t *testing.T) {
				ctx := t.Context()
				m := Member{Name: c.member, APIEndpoint: c.endpoint}
				if c.annotation != "" {
					m.Annotations = map[string]string{contract.AnnotationCAPICluster: c.annotation}
				}
				cl, err := r.Cluster(ctx, m)
				if c.wantCluster == "" {
					if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.errHas) {
						t.Fatalf("Cluster: %v, want %v with %q", err, c.wantErr, c.errHas)
					}
					var ce *ClusterError
					if got := errors.As(err, &ce); got != (c.wantReason != "") || (got && ce.Reason != c.wantReason) {
						t.Fatalf("Cluster: %#v, want a ClusterError with reason %q", err, c.wantReason)
					}
					return
				}
				if err != nil || cl.String() != c.wantCluster {
					t.Fatalf("Cluster = %s, %v; want %s", cl, err, c.wantCluster)
				}
				if c.node == "" {
					return
				}
				got, err := r.MachineForNode(ctx, cl, c.node)
				switch {
				case c.wantMachine == "" && !errors.Is(err, ErrNoMachine):
					t.Fatalf("MachineForNode: %v, want ErrNoMachine", err)
				case c.wantMachine != "" && (err != nil || got.Name != c.wantMachine):
					t.Fatalf("MachineForNode = %v, %v; want %s", got, err, c.wantMachine)
				}
			})
		}
	}
}

// TestAnnotatedClusterMissingIsNotFound: the CLI tells a missing annotated
// Cluster from a missing CRD by the API's NotFound, which the ClusterError
// keeps.
func TestAnnotatedClusterMissingIsNotFound(t *testing.T) {
	for rname, r := range readers(t) {
		_, err := r.Cluster(t.Context(), Member{Name: "beta", Annotations: map[string]string{contract.AnnotationCAPICluster: "ns/nope"}})
		if !apierrors.IsNotFound(err) || !errors.Is(err, ErrNoCluster) {
			t.Errorf("%s: %v, want NotFound and ErrNoCluster", rname, err)
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
