package member

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// visitedKeys visits O's kind in r and returns the objects' keys, sorted,
// and the objects by key.
func visitedKeys[O client.Object](t testing.TB, r client.Reader, namespace string) ([]string, map[string]O) {
	t.Helper()
	byKey := map[string]O{}
	err := VisitCached(context.Background(), r, namespace, func(o O) {
		byKey[client.ObjectKeyFromObject(o).String()+"@"+o.GetResourceVersion()] = o
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(byKey)), byKey
}

// listedKeys lists list in r and returns the items' keys, sorted.
func listedKeys(t testing.TB, r client.Reader, list client.ObjectList, namespace string) []string {
	t.Helper()
	if err := r.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		obj := o.(client.Object)
		keys = append(keys, client.ObjectKeyFromObject(obj).String()+"@"+obj.GetResourceVersion())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// sameAsList checks that visiting O's kind in r finds what List finds, for
// every namespace and each one given, and returns what was visited in all.
func sameAsList[O client.Object](t *testing.T, r client.Reader, newList func() client.ObjectList, namespaces ...string) map[string]O {
	t.Helper()
	return sameAsListed[O](t, r, r, newList, namespaces...)
}

// sameAsListed is sameAsList with the list read from lr (Pods: the member
// caches hold cachedpod.Pods, which only VisitCached reads).
func sameAsListed[O client.Object](t *testing.T, r, lr client.Reader, newList func() client.ObjectList, namespaces ...string) map[string]O {
	t.Helper()
	var all map[string]O
	for _, ns := range append([]string{""}, namespaces...) {
		got, byKey := visitedKeys[O](t, r, ns)
		if want := listedKeys(t, lr, newList(), ns); !slices.Equal(got, want) {
			t.Errorf("%v in namespace %q: visited %v, listed %v", reflect.TypeFor[O](), ns, got, want)
		}
		if ns == "" {
			all = byKey
		}
	}
	return all
}

// storeObject is the object the informer of obj's kind holds under key.
func storeObject(t *testing.T, c cache.Cache, obj client.Object, key string) any {
	t.Helper()
	inf, err := c.GetInformer(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := inf.(toolscache.SharedIndexInformer).GetIndexer().GetByKey(key)
	if err != nil || !ok {
		t.Fatalf("%T %s not in the informer's store (%v)", obj, key, err)
	}
	return got
}

// TestVisitCachedReadsTheMemberCache: through a member connection's reader
// and client, VisitCached visits what List returns, filtered by namespace
// as List filters, and the objects it visits are the informer store's own:
// no copies, the same pointers on every visit.
func TestVisitCachedReadsTheMemberCache(t *testing.T) {
	cfg := testenv.Start(t)
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}))
	for i := range 3 {
		must(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}}))
	}
	for _, key := range []client.ObjectKey{{Namespace: "default", Name: "a"}, {Namespace: "default", Name: "b"}, {Namespace: "other", Name: "c"}} {
		must(c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: corev1.PodSpec{NodeName: "node-0", AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}))
	}
	must(c.Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-0"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "node-0",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-0")}}}))

	conn := syncedConnection(t, cfg)

	// The member client reads a Pod live, whole: the cache holds compact pods.
	var whole corev1.Pod
	must(conn.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, &whole))
	if len(whole.Spec.Containers) != 1 {
		t.Errorf("pod read through the member client has %d containers, want the live pod's 1", len(whole.Spec.Containers))
	}
	var all corev1.PodList
	must(conn.client.List(ctx, &all))
	if len(all.Items) != 3 {
		t.Errorf("pods listed through the member client: %d, want 3", len(all.Items))
	}

	for _, tc := range []struct {
		name string
		r    client.Reader
	}{{"GetReader", conn.cache}, {"GetClient", conn.client}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := sameAsList[*corev1.Node](t, tc.r, func() client.ObjectList { return &corev1.NodeList{} })
			pods := sameAsListed[*cachedpod.Pod](t, tc.r, c, func() client.ObjectList { return &corev1.PodList{} }, "default", "other", "none")
			vas := sameAsList[*storagev1.VolumeAttachment](t, tc.r, func() client.ObjectList { return &storagev1.VolumeAttachmentList{} })
			if len(nodes) != 3 || len(pods) != 3 || len(vas) != 1 {
				t.Fatalf("visited %d nodes, %d pods, %d VolumeAttachments; want 3, 3, 1", len(nodes), len(pods), len(vas))
			}
			_, again := visitedKeys[*cachedpod.Pod](t, tc.r, "")
			for key, p := range pods {
				if again[key] != p {
					t.Errorf("pod %s: visited %p, then %p: not the cache's own object", key, p, again[key])
				}
				if s := storeObject(t, conn.cache, &corev1.Pod{}, p.Namespace+"/"+p.Name); s != any(p) {
					t.Errorf("pod %s: visited %p, the informer holds %p", key, p, s)
				}
			}
			for key, n := range nodes {
				if s := storeObject(t, conn.cache, &corev1.Node{}, n.Name); s != any(n) {
					t.Errorf("node %s: visited %p, the informer holds %p", key, n, s)
				}
			}
		})
	}
}

// TestVisitCachedListsOtherReaders: a reader that is no member cache (the
// fake clients of unit tests) is listed, with the namespace as a filter.
func TestVisitCachedListsOtherReaders(t *testing.T) {
	pod := func(ns, name string) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		pod("default", "a"), pod("default", "b"), pod("other", "c"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}).Build()
	sameAsList[*cachedpod.Pod](t, c, func() client.ObjectList { return &corev1.PodList{} }, "default", "other", "none")
	if nodes := sameAsList[*corev1.Node](t, c, func() client.ObjectList { return &corev1.NodeList{} }); len(nodes) != 1 {
		t.Errorf("visited %d nodes, want 1", len(nodes))
	}
	if got, _ := visitedKeys[*cachedpod.Pod](t, c, "default"); len(got) != 2 {
		t.Errorf("visited %v in default, want its 2 pods", got)
	}
}

// TestVisitCachedRefusesOtherKinds: only the kinds a member cache holds can
// be visited.
func TestVisitCachedRefusesOtherKinds(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	if err := VisitCached(context.Background(), c, "", func(*corev1.ConfigMap) {}); err == nil {
		t.Error("visiting ConfigMaps: no error")
	}
}

// listOnly serves one list and a watch that never sends anything: an
// informer filled in-process, without an API server.
type listOnly struct{ list runtime.Object }

func (l listOnly) List(metav1.ListOptions) (runtime.Object, error) {
	return l.list.DeepCopyObject(), nil
}
func (listOnly) Watch(metav1.ListOptions) (apiwatch.Interface, error) { return apiwatch.NewFake(), nil }
func (listOnly) IsWatchListSemanticsUnSupported() bool                { return true }

// goalMemberCache is a started controller-runtime cache, with the member
// transforms, of one member at the goal size: 2,000 nodes and 20,000 pods
// (in 20 namespaces), listed from memory.
func goalMemberCache(b *testing.B) cache.Cache {
	b.Helper()
	nodes := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range 2000 {
		nodes.Items = append(nodes.Items, *memberNode(i))
	}
	pods := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range 20000 {
		pods.Items = append(pods.Items, *deploymentPod(i))
	}
	lists := map[reflect.Type]runtime.Object{reflect.TypeFor[*corev1.Node](): nodes, reflect.TypeFor[*corev1.Pod](): pods}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "https://in-process.invalid"}, cache.Options{
		HTTPClient: &http.Client{},
		Scheme:     clientgoscheme.Scheme,
		Mapper:     mapper,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Transform: transformNode},
			&corev1.Pod{}:  {Transform: transformPod},
		},
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(listOnly{lists[reflect.TypeOf(obj)]}, obj, resync, withControllerIndex(obj, idx))
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() {
		cancel()
		<-done
	})
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Pod{}} {
		if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			b.Fatal(err)
		}
	}
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache not synced")
	}
	var n int
	if err := VisitCached(ctx, c, "", func(*cachedpod.Pod) { n++ }); err != nil || n != len(pods.Items) {
		b.Fatalf("visited %d pods (%v), want %d", n, err, len(pods.Items))
	}
	return c
}

// BenchmarkReadGoalMember is what one pass pays to read a member of the
// goal size from its cache, keeping a pointer to each object read
// (VisitCached; a List without deep copies, which copied each object's
// struct into the list, measured 27.9 MB per recovery read before, and
// cannot list the cached pods any more). "recovery" reads every node and
// pod, as node recovery's pass does; "rebalance" every node and one
// namespace's 1,000 pods, as one RSP's rebalance pass does.
func BenchmarkReadGoalMember(b *testing.B) {
	c := goalMemberCache(b)
	ctx := b.Context()
	for _, tc := range []struct{ name, namespace string }{{"recovery", ""}, {"rebalance", "team-0"}} {
		b.Run(tc.name+"/VisitCached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var nodes []*corev1.Node
				var pods []*cachedpod.Pod
				if err := VisitCached(ctx, c, "", func(n *corev1.Node) { nodes = append(nodes, n) }); err != nil {
					b.Fatal(err)
				}
				if err := VisitCached(ctx, c, tc.namespace, func(p *cachedpod.Pod) { pods = append(pods, p) }); err != nil {
					b.Fatal(err)
				}
				if len(nodes) == 0 || len(pods) == 0 {
					b.Fatal("nothing read")
				}
			}
		})
	}
}

// BenchmarkWorkloadPodsGoalMember is what one RSP pass pays to find its
// workload's 100 pods in a member of the goal size (20,000 pods, 1,000 in
// the workload's namespace): walking the namespace's cached pods for
// those the workload's ReplicaSet controls (before), or reading them
// through the controller index (VisitOwnedPods).
func BenchmarkWorkloadPodsGoalMember(b *testing.B) {
	c := goalMemberCache(b)
	ctx := b.Context()
	owner := types.UID(fmt.Sprintf("9a7b6c5d-%04x-4e3f-8a1b-0c2d3e4f5a6b", 0)) // deploymentPod's ReplicaSet of svc-0
	const ns, want = "team-0", 100
	b.Run("namespace-walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var mine []*cachedpod.Pod
			if err := VisitCached(ctx, c, ns, func(p *cachedpod.Pod) {
				if ctl := metav1.GetControllerOfNoCopy(p); ctl != nil && ctl.UID == owner {
					mine = append(mine, p)
				}
			}); err != nil || len(mine) != want {
				b.Fatalf("%d pods (%v), want %d", len(mine), err, want)
			}
		}
	})
	b.Run("VisitOwnedPods", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var mine []*cachedpod.Pod
			if err := VisitOwnedPods(ctx, c, ns, []types.UID{owner}, func(p *cachedpod.Pod) { mine = append(mine, p) }); err != nil || len(mine) != want {
				b.Fatalf("%d pods (%v), want %d", len(mine), err, want)
			}
		}
	})
}
