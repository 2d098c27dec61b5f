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
			m, _, note, err := FindMachine(t.Context(), MachineSource{Host: r}, snap, c.cluster, c.node)
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

// TestFindMachineInTheManagementCluster: a member whose KubeFedCluster names
// a management cluster has its Machine read there (--management-context),
// never from the host, where a Machine of the same names may exist; without
// the context, a note says how to give it.
func TestFindMachineInTheManagementCluster(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	objs := func(m *clusterv1.Machine) []client.Object {
		m.Spec.ClusterName, m.Status.NodeRef.Name = "member1", "m1-node-1"
		return []client.Object{&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member1"},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "member1.example", Port: 6443}}}, m}
	}
	// The host has a healthy lookalike; the management cluster the real,
	// fenced one.
	host := fake.NewClientBuilder().WithScheme(s).WithObjects(objs(machine("fleet", "m1-node-1", false, clusterv1.MachineInfrastructureReadyReason))...).Build()
	fenced := machine("fleet", "m1-node-1", true, clusterv1.MachineInfrastructureDeletedReason)
	mgmt := fake.NewClientBuilder().WithScheme(s).WithObjects(objs(fenced)...).Build()
	snap := fixture()
	for i := range snap.Clusters {
		if snap.Clusters[i].Name == "member1" {
			snap.Clusters[i].Annotations = map[string]string{contract.AnnotationCAPIManagementCluster: "mgmt-kubeconfig"}
		}
	}

	m, _, note, err := FindMachine(t.Context(), MachineSource{Host: host}, snap, "member1", "m1-node-1")
	if err != nil || m != nil || !strings.Contains(note, "--management-context") || !strings.Contains(note, "mgmt-kubeconfig") {
		t.Fatalf("without a management context: machine %v, note %q, error %v; want none and how to read it", m, note, err)
	}
	m, where, note, err := FindMachine(t.Context(), MachineSource{Host: host, Management: mgmt, ManagementContext: "capi-mgmt"}, snap, "member1", "m1-node-1")
	if err != nil || m == nil || m.DeletionTimestamp == nil || where != "management cluster (context capi-mgmt)" || note != "" {
		t.Fatalf("machine %v, where %q, note %q, error %v; want the management cluster's", m, where, note, err)
	}
	e, err := BuildExplanation(snap, "member1", "m1-node-1", m, where, note)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := RenderExplanation(&out, e, snap.Now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Read from:", "management cluster (context capi-mgmt)", "from the Machine in the management cluster (context capi-mgmt)", "Fenced:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
	if e.Fencing == nil || !e.Fencing.Fenced {
		t.Errorf("fencing %+v, want fenced by the management cluster's Machine", e.Fencing)
	}

	// A failed read of the management cluster says which cluster it was.
	down := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
		}}).Build()
	if _, _, _, err := FindMachine(t.Context(), MachineSource{Host: host, Management: down, ManagementContext: "capi-mgmt"}, snap, "member1", "m1-node-1"); err == nil ||
		!strings.Contains(err.Error(), "management cluster (context capi-mgmt)") {
		t.Errorf("error %v, want one naming the management cluster", err)
	}
}
