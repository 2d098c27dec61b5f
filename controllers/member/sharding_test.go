package member

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/memberconfig"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// holding returns a coordinator that holds members, renewed just now.
func holding(members ...string) *coordinator {
	c := &coordinator{o: ShardOptions{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		now: time.Now, held: map[string]*hold{}}
	for _, m := range members {
		c.held[m] = &hold{lastRenew: time.Now()}
	}
	return c
}

func idleConnection() *connection {
	return &connection{httpClient: &http.Client{Transport: &http.Transport{}},
		dialer: connrotation.NewDialer((&net.Dialer{}).DialContext),
		cfg:    &rest.Config{Host: "https://idle.example"}, version: &version.Info{GitVersion: "v1.37.2"}}
}

func TestHoldsMemberWithoutShardingIsAlwaysTrue(t *testing.T) {
	c := newCache(Options{}, nil)
	if !c.HoldsMember("any") || c.Sharded() {
		t.Fatal("sharding off: every member must be held and Sharded false")
	}
}

func TestHoldsMemberFollowsTheLeaseAndItsDeadline(t *testing.T) {
	c := newCache(Options{}, nil)
	c.shard = holding("mine")
	if !c.HoldsMember("mine") || c.HoldsMember("theirs") {
		t.Fatalf("HoldsMember(mine)=%v HoldsMember(theirs)=%v", c.HoldsMember("mine"), c.HoldsMember("theirs"))
	}
	// Renewed 8.5s ago: 1.5s left before the 10s deadline, less than the
	// 2s margin a write gets.
	c.shard.held["mine"].lastRenew = time.Now().Add(-8500 * time.Millisecond)
	if c.HoldsMember("mine") {
		t.Fatal("a Lease inside its renew margin still counts as held")
	}
	// The connection stays until the coordinator drops the hold: a late
	// renewal fences writes, it does not restart the cache.
	if !c.keepsConnection("mine") {
		t.Fatal("connection given up before the hold was dropped")
	}
}

func TestConnectionRefusedForAMemberNotHeld(t *testing.T) {
	c := newCache(Options{}, nil)
	c.shard = holding("mine")
	if _, _, ok := c.setConnected("theirs", idleConnection(), "fp", "", "msg"); ok {
		t.Fatal("a connection to a member owned elsewhere was installed")
	}
	if _, _, ok := c.setConnected("mine", idleConnection(), "fp", "", "msg"); !ok {
		t.Fatal("a connection to a held member was refused")
	}
}

// Losing a Lease tears the connection down at once, and the member is then
// unknown here (never connected), not failed.
func TestLosingTheLeaseDisconnectsAndForgetsConnectedOnce(t *testing.T) {
	c := newCache(Options{}, nil)
	c.shard = holding("mine")
	if _, _, ok := c.setConnected("mine", idleConnection(), "fp", "", "msg"); !ok {
		t.Fatal("connect refused")
	}
	var heard []string
	src := c.EventSource(func(_ context.Context, cl string) []reconcile.Request { heard = append(heard, cl); return nil })
	if err := src.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	delete(c.shard.held, "mine")
	c.ownershipChanged("mine", false)
	if c.Connected("mine") || c.EverConnected("mine") {
		t.Fatalf("after losing the Lease: connected %v, ever connected %v", c.Connected("mine"), c.EverConnected("mine"))
	}
	st := c.MemberStatuses(context.Background(), []string{"mine"})
	if st[0].Reason != ReasonNotOwned || st[0].Connected {
		t.Fatalf("status %+v, want NotOwned, not connected", st[0])
	}
	if len(heard) != 1 || heard[0] != "mine" {
		t.Fatalf("subscribers heard %v, want [mine]", heard)
	}
	// A member that left is not brought back by a late hand-over.
	c.ownershipChanged("gone", false)
	if _, ok := c.members["gone"]; ok {
		t.Fatal("ownershipChanged created state for an unknown member")
	}
}

// The member clients' user agent carries the shard identity with sharding
// on (replicas share the member credentials, so a member's audit log tells
// them apart only by it) and keeps the prefix audit checkers look for.
func TestMemberUserAgentCarriesTheShardIdentity(t *testing.T) {
	kfc := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "m1"},
		Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: "https://m1.example:6443",
			SecretRef: kubefedv1beta1.LocalSecretReference{Name: "m1-token"}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "m1-token"},
		Data: map[string][]byte{memberconfig.TokenKey: []byte("t")}}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	host := fake.NewClientBuilder().WithScheme(s).WithObjects(secret).Build()
	for _, c := range []struct {
		name  string
		shard *coordinator
		want  string
	}{
		{"sharding off", nil, "fedfailover-member"},
		{"sharding on", &coordinator{o: ShardOptions{Identity: "manager-7f3a"}}, "fedfailover-member/manager-7f3a"},
	} {
		cache := newCache(Options{}.withDefaults(), s)
		cache.shard = c.shard
		r := &reconciler{host: host, cache: cache}
		in, _, err := r.restConfig(t.Context(), kfc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg := in.cfg; cfg.UserAgent != c.want || !strings.HasPrefix(cfg.UserAgent, "fedfailover-member") {
			t.Errorf("%s: user agent %q, want %q", c.name, in.cfg.UserAgent, c.want)
		}
	}
}
