package member

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// ownerFixture creates, on the API server c writes to, a Deployment web at
// revision 2 with its ReplicaSets of revisions 1 and 2, a ReplicaSet with
// the same labels controlled by another Deployment, and one pod of each
// ReplicaSet. It returns the Deployment as created.
func ownerFixture(t *testing.T, c client.Client, ns string) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
		Annotations: map[string]string{revisionAnnotation: "2", "note": strings.Repeat("x", 1000)}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	must(c.Create(ctx, d))
	d.Status.ObservedGeneration = d.Generation
	must(c.Status().Update(ctx, d))
	ctl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	for _, rs := range []struct {
		name, revision string
		owner          types.UID
	}{{"web-1", "1", d.UID}, {"web-2", "2", d.UID}, {"api-2", "2", "uid-of-api"}} {
		set := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs.name,
			Labels: labels, Annotations: map[string]string{revisionAnnotation: rs.revision}, OwnerReferences: ctl("Deployment", "web", rs.owner)},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
		must(c.Create(ctx, set))
		must(c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs.name + "-pod", Labels: labels,
			OwnerReferences: ctl("ReplicaSet", rs.name, set.UID)}, Spec: tmpl.Spec}))
	}
	return d
}

// TestOwnersFromTheMemberCache: through a real API server and the
// production connection, the workload owners are read live until their
// informers have synced, then from the cache; both give the same answers
// (the Deployment's replicas, revision and observed generation, the
// ReplicaSets it controls and no other), the cached objects keep no pod
// template, and a change reaches the cache. The owned pods are found
// through the controller index, in the namespace asked only.
func TestOwnersFromTheMemberCache(t *testing.T) {
	cfg := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	d := ownerFixture(t, c, "shop")
	ownerFixture(t, c, "other") // the same names and labels in another namespace

	conn := syncedConnection(t, cfg)

	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	type answer struct {
		replicas    int32
		revision    string
		generation  int64
		observed    int64
		replicaSets []string
	}
	read := func(o Owners) answer {
		t.Helper()
		got, err := o.Deployment(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		sets, err := o.ReplicaSetsOf(ctx, got)
		if err != nil {
			t.Fatal(err)
		}
		a := answer{replicas: *got.Spec.Replicas, revision: got.Annotations[revisionAnnotation], generation: got.Generation,
			observed: got.Status.ObservedGeneration}
		for _, rs := range sets {
			a.replicaSets = append(a.replicaSets, rs.Name+"@"+rs.Annotations[revisionAnnotation])
		}
		slices.Sort(a.replicaSets)
		return a
	}

	first := conn.owners(ctx)
	if _, live := first.(liveOwners); !live {
		t.Fatalf("first read: %T, want the live reads while the owner informers start", first)
	}
	want := answer{replicas: 3, revision: "2", generation: d.Generation, observed: d.Generation, replicaSets: []string{"web-1@1", "web-2@2"}}
	if got := read(first); !reflect.DeepEqual(got, want) {
		t.Errorf("live: %+v, want %+v", got, want)
	}
	var cached Owners
	poll(t, 30*time.Second, "the owners read from the member cache", func() error {
		cached = conn.owners(ctx)
		if _, ok := cached.(cachedOwners); !ok {
			return fmt.Errorf("still %T", cached)
		}
		return nil
	})
	if got := read(cached); !reflect.DeepEqual(got, want) {
		t.Errorf("cached: %+v, want %+v (as live)", got, want)
	}
	got, _ := cached.Deployment(ctx, key)
	if len(got.Spec.Template.Spec.Containers) != 0 || len(got.Annotations) != 1 {
		t.Errorf("cached Deployment keeps its template (%d containers) or other annotations (%v): only what the owner chain reads",
			len(got.Spec.Template.Spec.Containers), got.Annotations)
	}
	if _, err := cached.Deployment(ctx, types.NamespacedName{Namespace: "shop", Name: "none"}); err == nil || !apierrors.IsNotFound(err) {
		t.Errorf("a missing Deployment: %v, want NotFound as a client says it", err)
	}
	rs, err := cached.ReplicaSet(ctx, types.NamespacedName{Namespace: "shop", Name: "web-2"})
	if err != nil || *rs.Spec.Replicas != 1 {
		t.Errorf("ReplicaSet web-2: %v, %v; want 1 replica", rs, err)
	}

	// kubefed gives the member 5: the cache follows.
	live := &appsv1.Deployment{}
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Replicas = ptr.To(int32(5))
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the cached Deployment at 5 replicas, not yet observed", func() error {
		if a := read(conn.owners(ctx)); a.replicas != 5 || a.generation != live.Generation || a.observed >= a.generation {
			return fmt.Errorf("%+v", a)
		}
		return nil
	})

	// The owned pods, by controller index: web-2's, web-1's, not api-2's.
	sets, err := cached.ReplicaSetsOf(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, s := range sets {
		uids = append(uids, s.UID)
	}
	var pods []string
	if err := VisitOwnedPods(ctx, conn.cache, "shop", uids, func(p *cachedpod.Pod) { pods = append(pods, p.Namespace+"/"+p.Name) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(pods)
	if want := []string{"shop/web-1-pod", "shop/web-2-pod"}; !slices.Equal(pods, want) {
		t.Errorf("owned pods %v, want %v", pods, want)
	}
}

// syncedConnection dials the member at cfg as production does (default
// options, an open fence) and waits up to 30 s for its cache to sync.
func syncedConnection(t *testing.T, cfg *rest.Config) *connection {
	t.Helper()
	synced := make(chan struct{})
	conn, err := dial(t.Context(), cfg, clientgoscheme.Scheme, Options{}.withDefaults(), newWriteFence("m", func() bool { return true }, 0),
		newDenials(time.Now, nil), func() { close(synced) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.stop)
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		t.Fatal("member cache not synced after 30 s")
	}
	return conn
}
