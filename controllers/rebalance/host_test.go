package rebalance

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/memberrbac"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/rbaccheck"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// hostCfg is a real API server (envtest) with fedfailover's and kubefed's
// CRDs, for what only a real server does faithfully: server-side apply
// field ownership, finalizers.
var hostCfg *rest.Config

func TestMain(m *testing.M) {
	crds, err := paths.HostCRDFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	code := testenv.RunMain(m, func(cfg *rest.Config) error { hostCfg = cfg; return nil }, crds...)
	// Every request rebalance made to a member is one its role grants.
	os.Exit(rbaccheck.After(code, &memberRequests, memberrbac.ByRebalance))
}

var namespaces atomic.Int32

// onHost is a reconciler over the real host with a fresh namespace; the
// policies given are created and removed (finalizers and all) at the end.
func onHost(t *testing.T, pols ...*v1alpha1.FailoverPolicy) (*Reconciler, client.Client, *events.FakeRecorder, string) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(hostCfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := fmt.Sprintf("host-%d", namespaces.Add(1))
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pols {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range pols {
			got := &v1alpha1.FailoverPolicy{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				continue
			}
			orig := got.DeepCopy()
			got.Finalizers = nil
			_ = c.Patch(ctx, got, client.MergeFrom(orig))
			_ = c.Delete(ctx, got)
		}
	})
	rec := events.NewFakeRecorder(50)
	r := &Reconciler{host: c, recorder: rec, store: newStore(), mem: map[types.NamespacedName]*memory{},
		now: func() time.Time { return t0 }, members: noMembers(t)}
	return r, c, rec, ns
}

// userRSP creates the user's RSP (1:1 over member1 and member2, 6 replicas)
// in ns as kubectl would, with its own field manager.
func userRSP(t *testing.T, c client.Client, ns string) *fedschedv1a1.ReplicaSchedulingPreference {
	t.Helper()
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 6, Clusters: prefs(1, 1)}}
	if err := c.Create(context.Background(), rsp, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	return rsp
}

func hasFinalizer(t *testing.T, c client.Client, name, finalizer string) bool {
	t.Helper()
	got := &v1alpha1.FailoverPolicy{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return controllerutil.ContainsFinalizer(got, finalizer)
}
