package rebalance

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/rbaccheck"
)

// memberRequests records what rebalance asks of members, for the check of
// TestMain against fedfailover's member role.
var memberRequests rbaccheck.Recorder

// fakeMembers is a federation of connected members, each served by a fake
// client holding its objects; names in down are not connected to
// fedfailover, names in kubefedDown not Ready to kubefed (Offline).
type fakeMembers struct {
	readers     map[string]client.Client
	down        map[string]bool
	kubefedDown map[string]bool
	// clock, when set, is kubefed's: each KubeFedCluster was probed at
	// clock() (kubefed probes every 10 s); unset, no probe time is given.
	clock func() time.Time
	// liveDelay is added to each live read (Owners), as a member API
	// server's round trip would.
	liveDelay time.Duration

	// usage is each member's pods summed per node, recomputed after a write
	// to the member (stale), as the member cache keeps it from its informer:
	// summing every pod on each pass would cost the tests what production
	// no longer pays.
	mu    sync.Mutex
	usage map[string]*capacity.Usage
	stale map[string]bool

	// holders, when set, shards the members: the replica holding each
	// (self: this one) and whether its Lease is live as this replica sees it.
	holders   map[string]string
	self      string
	deadLease map[string]bool
}

func noMembers(t *testing.T) *fakeMembers {
	t.Helper()
	return &fakeMembers{readers: map[string]client.Client{}, down: map[string]bool{}, kubefedDown: map[string]bool{}}
}

// kill takes members down for real: fedfailover cannot reach them and
// kubefed reports them offline.
func (f *fakeMembers) kill(names ...string) {
	for _, n := range names {
		f.down[n], f.kubefedDown[n] = true, true
	}
}

// revive brings members back for both views.
func (f *fakeMembers) revive(names ...string) {
	for _, n := range names {
		f.down[n], f.kubefedDown[n] = false, false
	}
}

// add registers a connected, kubefed-Ready member holding objs.
func (f *fakeMembers) add(t *testing.T, name string, objs ...client.Object) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stale == nil {
		f.usage, f.stale = map[string]*capacity.Usage{}, map[string]bool{}
	}
	f.stale[name] = true
	written := func() { f.mu.Lock(); f.stale[name] = true; f.mu.Unlock() }
	f.readers[name] = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			written()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			written()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			written()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			written()
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			written()
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			written()
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
}

func (f *fakeMembers) KubeFedClusters(_ context.Context, _ labels.Selector) ([]kubefedv1beta1.KubeFedCluster, error) {
	var out []kubefedv1beta1.KubeFedCluster
	var probed metav1.Time
	if f.clock != nil {
		probed = metav1.NewTime(f.clock())
	}
	for _, n := range sortedKeys(f.readers) {
		// As kubefed v0.10.0 writes them: Ready=True, or Offline=True alone.
		cond := kubefedv1beta1.ClusterCondition{Type: "Ready", Status: corev1.ConditionTrue, LastProbeTime: probed}
		if f.kubefedDown[n] {
			cond = kubefedv1beta1.ClusterCondition{Type: "Offline", Status: corev1.ConditionTrue, LastProbeTime: probed}
		}
		out = append(out, kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: kubefedv1beta1.KubeFedClusterStatus{Conditions: []kubefedv1beta1.ClusterCondition{cond}}})
	}
	return out, nil
}

func (f *fakeMembers) Connected(c string) bool { return !f.down[c] }
func (f *fakeMembers) Unknown(string) bool     { return false }
func (f *fakeMembers) GetReader(_ context.Context, c string) (client.Reader, error) {
	if f.down[c] {
		return nil, member.ErrNotConnected
	}
	return memberRequests.Client(f.readers[c]), nil
}

// PodUsage is the member's pods summed per node, as they are since the
// last write to the member.
func (f *fakeMembers) PodUsage(ctx context.Context, c string) (*capacity.Usage, error) {
	if f.down[c] {
		return nil, member.ErrNotConnected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.usage[c]; ok && !f.stale[c] {
		return u, nil
	}
	var pods corev1.PodList
	if err := f.readers[c].List(ctx, &pods); err != nil {
		return nil, err
	}
	u := capacity.NewUsage()
	for i := range pods.Items {
		u.Add(member.CompactPod(&pods.Items[i]))
	}
	if f.usage == nil {
		f.usage, f.stale = map[string]*capacity.Usage{}, map[string]bool{}
	}
	f.usage[c], f.stale[c] = u, false
	return u, nil
}

func (f *fakeMembers) Owners(_ context.Context, c string) (member.Owners, error) {
	if f.down[c] {
		return nil, member.ErrNotConnected
	}
	if f.liveDelay > 0 {
		return member.LiveOwners(memberRequests.Client(slowClient{Client: f.readers[c], delay: f.liveDelay})), nil
	}
	return member.LiveOwners(memberRequests.Client(f.readers[c])), nil
}

// slowClient is a member client whose reads take a round trip's time.
type slowClient struct {
	client.Client
	delay time.Duration
}

func (s slowClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	time.Sleep(s.delay) // the cost being modelled, not a synchronisation
	return s.Client.Get(ctx, key, obj, opts...)
}

func (s slowClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	time.Sleep(s.delay) // the cost being modelled, not a synchronisation
	return s.Client.List(ctx, list, opts...)
}
func (f *fakeMembers) Watch(context.Context, string, member.WatchInput) error { return nil }

func (f *fakeMembers) Sharded() bool { return f.holders != nil }

func (f *fakeMembers) HoldsMember(c string) bool {
	return f.holders == nil || (f.holders[c] == f.self && !f.deadLease[c])
}

func (f *fakeMembers) MemberHolder(c string) (string, bool) {
	if f.holders == nil {
		return "", true
	}
	return f.holders[c], f.holders[c] != "" && !f.deadLease[c]
}
