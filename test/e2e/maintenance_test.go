//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Planned maintenance of a member (issue #32) on the lab: a
// MemberMaintenance of member1 empties it while the workload keeps
// serving (its Ready pods, sampled every 200 ms, never below the user's
// total), is refused when member2 has no room, and once deleted the
// user's 1:1 weights come back through the failback.

// readinessPublished waits until the policy published the N+1 figures of
// ns/name with both members: the admission reads them.
func readinessPublished(t *testing.T, policy, ns, name string) {
	t.Helper()
	eventually(t, 90*time.Second, "the policy's status.failoverReadiness of "+ns+"/"+name, func(ctx context.Context) (bool, string) {
		p := &v1alpha1.FailoverPolicy{}
		if err := nrHostCl.Get(ctx, client.ObjectKey{Name: policy}, p); err != nil {
			return false, err.Error()
		}
		for _, st := range p.Status.FailoverReadiness {
			if st.Namespace == ns && st.Name == name && len(st.Members) == 2 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", p.Status.FailoverReadiness)
	})
}

// startMaintenance creates a MemberMaintenance of member, deleted when
// the test ends (every RSP of the lab would drain it).
func startMaintenance(t *testing.T, name, member string) {
	t.Helper()
	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberMaintenanceSpec{Member: member, Reason: t.Name()}}
	if err := nrHost(t).Create(t.Context(), mm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endMaintenance(t, name) })
}

func endMaintenance(t *testing.T, name string) {
	t.Helper()
	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := nrHostCl.Delete(context.Background(), mm); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting MemberMaintenance %s: %v", name, err)
	}
}

// maintenanceCondition is the condition typ of the maintenance, for its
// current generation.
func maintenanceCondition(ctx context.Context, name, typ string) (*v1alpha1.MemberMaintenance, *metav1.Condition, error) {
	mm := &v1alpha1.MemberMaintenance{}
	if err := nrHostCl.Get(ctx, client.ObjectKey{Name: name}, mm); err != nil {
		return nil, nil, err
	}
	c := meta.FindStatusCondition(mm.Status.Conditions, typ)
	if c != nil && c.ObservedGeneration != mm.Generation {
		c = nil
	}
	return mm, c, nil
}

// drainMember1 starts the maintenance of member1 and waits until it is
// drained (member2 runs all the replicas, the maintenance says so),
// checking that Ready never fell below total and that it went stepwise.
func drainMember1(t *testing.T, mmName, ns, name string, total int32) {
	t.Helper()
	samples := recordRSP(t, ns, name)
	start := time.Now()
	startMaintenance(t, mmName, "member1")
	eventually(t, 30*time.Second, "the maintenance accepted", func(ctx context.Context) (bool, string) {
		_, c, err := maintenanceCondition(ctx, mmName, v1alpha1.ConditionAccepted)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message
	})
	eventually(t, 3*time.Minute, "member1 drained: member2 runs all the replicas, the maintenance Drained", func(ctx context.Context) (bool, string) {
		if ok, msg := split(ctx, ns, name, 0, total); !ok {
			return false, msg
		}
		mm, c, err := maintenanceCondition(ctx, mmName, v1alpha1.ConditionDrained)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionTrue, mm.Status.Progress
	})
	rebalanceResult(t, "maintenance-drain", time.Since(start))
	got := samples.stop()
	steps := changesOf(got)
	t.Logf("RSP during the drain:\n%s", strings.Join(steps.lines(got[0].at), "\n"))
	if len(steps) < 3 {
		t.Errorf("member1 emptied in one jump, want make and break steps of at most maxStep=2: %v", steps.lines(got[0].at))
	}
	if m := minReadyOf(got); m < total {
		t.Errorf("Ready pods dropped to %d during the drain, want at least the user's %d (make before break)", m, total)
	}
	mm, _, err := maintenanceCondition(t.Context(), mmName, v1alpha1.ConditionDrained)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d of %d replicas moved off member1: drained", total/2, total/2); mm.Status.Progress != want {
		t.Errorf("progress %q, want %q", mm.Status.Progress, want)
	}
}

// Drain during steady traffic: member1's replicas move to member2
// stepwise, the workload's Ready pods never fewer than the user's 6.
func TestMaintenanceDrainDuringSteadyTraffic(t *testing.T) {
	const ns, name, total = "maintenance-drain", "web", 6
	startRebalance(t)
	rbPolicy(t, "maintenance-drain", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "replicas split 3/3 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, name, total/2, total/2)
	})
	readinessPublished(t, "maintenance-drain", ns, name)
	drainMember1(t, "maintenance-drain-member1", ns, name, total)
}

// Refused for lack of room: member2 takes no new pod, so member1's 3
// replicas have nowhere to go: the request is refused naming the RSP and
// the 3, and nothing moves.
func TestMaintenanceRefusedForLackOfRoom(t *testing.T) {
	const ns, name, total, mmName = "maintenance-refused", "web", 6, "maintenance-refused-member1"
	startRebalance(t)
	rbPolicy(t, "maintenance-refused", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "replicas split 3/3 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, name, total/2, total/2)
	})
	exhaust(t) // member2's nodes cordoned: its 3 keep running, no new pod fits
	eventually(t, 90*time.Second, "the policy sees member1's failure now would leave replicas Pending", func(ctx context.Context) (bool, string) {
		p := &v1alpha1.FailoverPolicy{}
		if err := nrHostCl.Get(ctx, client.ObjectKey{Name: "maintenance-refused"}, p); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionFailoverReady)
		if c == nil {
			return false, "no FailoverReady condition"
		}
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "member1"), c.Message
	})
	startMaintenance(t, mmName, "member1")
	want := fmt.Sprintf("%s/%s: 3 of its %d replicas", ns, name, total)
	eventually(t, 30*time.Second, "the maintenance refused, naming the RSP and the 3", func(ctx context.Context) (bool, string) {
		_, c, err := maintenanceCondition(ctx, mmName, v1alpha1.ConditionAccepted)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonMaintenanceNoRoom && strings.Contains(c.Message, want), c.Reason + ": " + c.Message
	})
	holds(t, 20*time.Second, "refused: the user's 1:1 untouched, 3/3", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total/2, total/2)
	})
}

// Ended: the maintenance deleted after the drain, the user's 1:1 weights
// come back through the failback: not before the 20s stabilization
// window, in steps, Ready never below 6, without going back and forth.
func TestMaintenanceEndedBackToWeights(t *testing.T) {
	const ns, name, total, mmName = "maintenance-ended", "web", 6, "maintenance-ended-member1"
	startRebalance(t)
	rbPolicy(t, "maintenance-ended", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "replicas split 3/3 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, name, total/2, total/2)
	})
	readinessPublished(t, "maintenance-ended", ns, name)
	drainMember1(t, mmName, ns, name, total)

	samples := recordRSP(t, ns, name)
	endMaintenance(t, mmName)
	ended := time.Now()
	eventually(t, 3*time.Minute, "the user's 1:1 back, replicas split 3/3", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total/2, total/2)
	})
	back := time.Since(ended)
	rebalanceResult(t, "maintenance-ended", back)
	got := samples.stop()
	steps := changesOf(got)
	t.Logf("RSP after the end:\n%s", strings.Join(steps.lines(got[0].at), "\n"))
	if back < 20*time.Second {
		t.Errorf("the user's weights came back %.1fs after the end, before the 20s stabilization window", back.Seconds())
	}
	if len(steps) < 3 {
		t.Errorf("the weights came back in one jump, want steps of at most maxStep=2: %v", steps.lines(got[0].at))
	}
	if again := steps.revisited(); again != "" {
		t.Errorf("placement %s came back after another one: the failback flapped (%v)", again, steps.lines(got[0].at))
	}
	if m := minReadyOf(got); m < total {
		t.Errorf("Ready pods dropped to %d during the failback, want at least %d", m, total)
	}
}
