package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// TestFindMachineNotes: what is missing is a note for the explanation, a
// failed read is an error that says what to do. (That FindMachine finds
// the Machine the controllers use is tested in controllers/member.)
func TestFindMachineNotes(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	m1 := machine("fleet", "m1-node-1", false, clusterv1.MachineInfrastructureReadyReason)
	m1.Spec.ClusterName, m1.Status.NodeRef.Name = "member1", "m1-node-1"
	objs := []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member1"},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "member1.example", Port: 6443}}},
		// Merely named like member3: another endpoint.
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member3"},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "elsewhere.example", Port: 6443}}},
		m1,
	}
	listFails := func(err error) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if _, ok := l.(*clusterv1.MachineList); ok {
				return err
			}
			return c.List(ctx, l, o...)
		}}
	}
	noCRD := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Machine"}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machines"}, "", errors.New("no"))
	cases := map[string]struct {
		cluster, node, annotation string
		funcs                     interceptor.Funcs
		machine                   string
		note                      string
		err                       string
	}{
		"found":                  {cluster: "member1", node: "m1-node-1", machine: "m1-node-1"},
		"no Machine":             {cluster: "member1", node: "m1-node-9", note: `no Machine for node "m1-node-9" in Cluster fleet/member1`},
		"no Cluster":             {cluster: "member2", node: "m2-node-1", note: `no Cluster named "member2"`},
		"lookalike Cluster":      {cluster: "member3", node: "m3-node-1", note: "Cluster fleet/member3 (controlPlaneEndpoint elsewhere.example:6443) merely has the member's name"},
		"annotated Cluster gone": {cluster: "member1", node: "m1-node-1", annotation: "fleet/gone", note: contract.AnnotationCAPICluster + `="fleet/gone"`},
		"annotation names it":    {cluster: "member2", node: "m1-node-1", annotation: "fleet/member1", machine: "m1-node-1"},
		"Cluster API not served": {cluster: "member1", node: "m1-node-1", funcs: listFails(noCRD), note: "machines.cluster.x-k8s.io is not served"},
		"forbidden is an error":  {cluster: "member1", node: "m1-node-1", funcs: listFails(forbidden), err: "ask for get/list/watch permission on machines.cluster.x-k8s.io"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(c.funcs).Build()
			snap := fixture()
			for i := range snap.Clusters {
				if snap.Clusters[i].Name == c.cluster && c.annotation != "" {
					snap.Clusters[i].Annotations = map[string]string{contract.AnnotationCAPICluster: c.annotation}
				}
			}
			m, note, err := FindMachine(t.Context(), r, snap, c.cluster, c.node)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case c.machine != "" && (m == nil || m.Name != c.machine):
				t.Fatalf("machine %v, want %s", m, c.machine)
			case c.machine == "" && (m != nil || !strings.Contains(note, c.note)):
				t.Fatalf("machine %v, note %q; want none and a note with %q", m, note, c.note)
			}
		})
	}
}
