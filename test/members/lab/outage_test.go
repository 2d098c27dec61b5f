//go:build e2e

package lab

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	poller "github.com/fedfailover/fedfailover/test/poll"
)

// A member whose API server was down long enough for its probes to go
// unanswered, and comes back: fedfailover must not count it connected
// again while its cache still shows the member as it was before the
// outage. The informers of a kept cache resume on client-go's reflector
// backoff (800 ms doubling to 30 s, with as much jitter again), so for up
// to a minute after the member answers they have not read a thing. In the
// e2e suite a release then counted three pods Ready on the member that it
// was in fact replacing, shrank the other member, and Ready fell below
// the user's total.
func TestLabMemberBackFromOutageIsConnectedOnlyWithACurrentCache(t *testing.T) {
	ctx := context.Background()
	l := upLab(t, 1, 1)
	// The stall timeout would tear the cache down during the outage and
	// hide what is tested: a cache kept through it.
	members := startMembers(t, l, member.Options{SyncStallTimeout: 10 * time.Minute})
	m := l.Members()[0]
	live, err := l.Client(m)
	if err != nil {
		t.Fatal(err)
	}
	before := outagePod("before-outage")
	if err := live.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, m+" connected, its cache holding "+before.Name, func() error {
		return cachedPod(ctx, members, m, before.Name)
	})

	if err := l.KillAPIServer(m); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := l.RestartAPIServer(context.Background(), m); err != nil {
				t.Errorf("restarting %s: %v", m, err)
			}
		}
	})
	poll(t, time.Minute, m+" not connected once its probes go unanswered", func() error {
		if members.Connected(m) {
			return errors.New("still connected")
		}
		return nil
	})
	// The outage itself: long enough for the informers' retries to back
	// off to several seconds, as any real outage of that length does.
	outageEnds := time.Now().Add(20 * time.Second)
	poller.T(t, time.Minute, 200*time.Millisecond, "the outage lasting 20 s, the member unanswered throughout", func(context.Context) (bool, string, error) {
		if members.Connected(m) {
			return false, "", errors.New("connected during the outage")
		}
		return !time.Now().Before(outageEnds), "outage going on", nil
	})
	if err := l.RestartAPIServer(ctx, m); err != nil {
		t.Fatal(err)
	}
	restarted = true
	// What changed on the member as it came back: the pod is gone.
	if err := live.Delete(ctx, before, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()

	// Each time the member counts as connected, its cache must not show
	// the deleted pod for longer than a watch takes to deliver an event.
	const watchLag = 2 * time.Second
	var staleSince time.Time
	poller.T(t, 2*time.Minute, 100*time.Millisecond, m+" connected again with a cache without "+before.Name, func(context.Context) (bool, string, error) {
		err := cachedPod(ctx, members, m, before.Name)
		switch {
		case errors.Is(err, member.ErrNotConnected):
			staleSince = time.Time{}
			return false, err.Error(), nil
		case err == nil:
			if staleSince.IsZero() {
				staleSince = time.Now()
			}
			if lag := time.Since(staleSince); lag > watchLag {
				return false, "", fmt.Errorf("%s connected again for %s, its cache still holding %s deleted %s ago",
					m, lag.Round(100*time.Millisecond), before.Name, time.Since(deleted).Round(100*time.Millisecond))
			}
			return false, "connected, the deletion not cached yet", nil
		case apierrors.IsNotFound(err):
			return true, "", nil
		}
		return false, err.Error(), nil
	})
}

// cachedPod finds a pod of namespace default in the member's cache: it
// errs with member.ErrNotConnected while the member is not connected, and
// with a NotFound error when the cache does not hold the pod.
func cachedPod(ctx context.Context, members *member.Cache, cluster, name string) error {
	rd, err := members.GetReader(ctx, cluster)
	if err != nil {
		return err
	}
	found := false
	if err := member.VisitCached(ctx, rd, metav1.NamespaceDefault, func(p *cachedpod.Pod) { found = found || p.Name == name }); err != nil {
		return err
	}
	if !found {
		return apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return nil
}

func outagePod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "app"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}
