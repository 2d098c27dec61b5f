package noderecovery

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

// TestReboundReplacementsAreDeletedAtAPace: the node is lost by evidence,
// tainted out of service and its pod force-deleted at once. Then, as in
// seed 1038 of the fault campaign, the member's scheduler does not see the
// taint (its cache behind after its API server restarted) and binds every
// replacement of db-0 back onto the fenced node. Over a minute of
// fedfailover's clock, a pass a second, the replacements are deleted in
// rounds that back off (1, 2, 4, ... s after the one before): six
// deletions in all, not one a pass. The policy status and an event say
// why. On the old code every pass deleted the replacement it found: 61
// deletions in the minute, a hot loop of writes to the member.
func TestReboundReplacementsAreDeletedAtAPace(t *testing.T) {
	a := startActed(t, "pace")
	e, cluster, w, k, ns, pod := a.e, a.cluster, a.w, a.k, a.ns, a.pod

	deletions, held := 1, ""
	for range 60 {
		if w.podGone(pod) == nil {
			// The stale scheduler binds the next replacement to the
			// fenced node.
			pod = e.pod(t, ns, "db-0", k.node.Name)
			w.podCached(pod)
		}
		w.advance(time.Second)
		must(t, w.pass())
		if w.podGone(pod) == nil {
			deletions++
			continue
		}
		reps, _ := w.r.store.reports.Snapshot(cluster)
		for _, rs := range reps[cluster].Recoveries {
			if rs.Node == k.node.Name && strings.Contains(rs.Message, "bound to the fenced node again") {
				held = rs.Message
			}
		}
	}
	if deletions < 4 || deletions > 8 {
		t.Fatalf("db-0 force-deleted %d times in a minute of passes a second apart; want the first deletion and paced rounds after it (6: at 0, 1, 3, 7, 15 and 31 s)", deletions)
	}
	if !strings.Contains(held, "after") || !strings.Contains(held, "force-deletion rounds") {
		t.Errorf("no pass said why the replacement was not deleted yet (status message %q)", held)
	}
	evs := drainEvents(w.r.recorder.(*events.FakeRecorder))
	if n := strings.Count(evs, ReasonForceDeletePaced); n != 1 {
		t.Errorf("%d %s events, want one for the recovery:\n%s", n, ReasonForceDeletePaced, evs)
	}
}

// acted is a member whose node k was lost by evidence (its Machine's
// infrastructure gone, its Lease silent for 15 s), tainted out of service
// and its pod db-0 (in namespace ns) force-deleted: an acted recovery.
type acted struct {
	e       *evidenceEnv
	cluster string
	w       *evidenceWorld
	k, k2   *kubelet
	ns      string
	pod     *corev1.Pod // the deleted db-0
}

func startActed(t *testing.T, base string) acted {
	t.Helper()
	e, cluster, w, k, k2 := startEvidenceMember(t, base, "")
	e.machine(t, cluster, k.node.Name, true)
	ns := e.namespace(t, cluster)
	pod := e.pod(t, ns, "db-0", k.node.Name)
	w.seenByCache(k, true)
	w.podCached(pod)
	w.firstReading(k)
	w.advance(15 * time.Second)
	w.passUntil("the taint and db-0 force-deleted", func() error {
		if !tainted(k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return w.podGone(pod)
	})
	return acted{e: e, cluster: cluster, w: w, k: k, k2: k2, ns: ns, pod: pod}
}

// drainEvents returns the events recorded so far, a line each.
func drainEvents(rec *events.FakeRecorder) string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return strings.Join(out, "\n")
		}
	}
}
