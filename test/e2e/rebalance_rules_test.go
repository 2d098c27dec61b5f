//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// Safety rule "turning things off" with the real kubefed: a policy deleted
// while its RSP is shifted (member2 without room) goes at once, its
// finalizer having handed the release over to the RSP's RebalanceRecord;
// member2 keeps its pin at 0 while it has no room (kubefed alone would
// leave replicas Pending there) and the record is not released; once
// member2 has room again the user's 1:1 returns stepwise, never with fewer
// Ready replicas than the user's total, and the record is released.
// Before, the finalizer wrote the user's spec back at once, onto a member
// without room.
func TestRebalanceRulesPolicyDeletedMidFailover(t *testing.T) {
	const ns, name, total = "rebalance-rules-delete", "web", 6
	restore := exhaust(t)
	startRebalance(t)
	p := rbPolicy(t, "rebalance-rules-delete", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "shifted: member1 pinned to all replicas", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, "member1", total) && pinnedTo(r, "member2", 0), rspString(r)
	})
	host := nrHost(t)
	cur := &v1alpha1.FailoverPolicy{}
	if err := host.Get(t.Context(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(cur, contract.FinalizerRebalance) {
		t.Fatalf("policy finalizers %v, want %s", cur.Finalizers, contract.FinalizerRebalance)
	}

	if err := host.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "policy gone, its release handed over to the record", func(ctx context.Context) (bool, string) {
		rec, err := getRecord(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		err = host.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.FailoverPolicy{})
		return apierrors.IsNotFound(err) && rec.Spec.Release != nil, fmt.Sprintf("record release %+v, policy: %v", rec.Spec.Release, err)
	})
	holds(t, 20*time.Second, "member2 without room keeps its pin, the record is not released", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, "member2", 0) && !stateReleased(ctx, r), rspString(r) + " " + recordString(t, ns, name)
	})
	if rec, err := getRecord(t.Context(), ns, name); err != nil || !strings.Contains(rec.Spec.Release.Waiting, "member2 is out of room") {
		t.Errorf("record %v (%v), want its release waiting on member2 out of room", recordString(t, ns, name), err)
	}

	samples := recordRSP(t, ns, name)
	restore()
	wantStepwiseRelease(t, ns, name, total, samples, 3*time.Minute)
}

// A policy deleted while member2 is failed (its API server killed: kubefed
// reports it not Ready, fedfailover cannot reach it) and member1 carries
// its replicas: the policy goes, member2 keeps its pin at 0 for as long as
// it is down, and the record is not released. member2 back: the user's 1:1
// returns stepwise (make-before-break, Ready never below the total), and
// the record is released.
func TestRebalanceReleaseWaitsForFailedMember(t *testing.T) {
	const ns, name, total = "rebalance-release-failed", "web", 6
	startRebalance(t)
	p := rbPolicy(t, "rebalance-release-failed", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "replicas split 3/3 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, name, total/2, total/2)
	})
	reviveMember2 := failMember2(t, ns, name, total)

	host := nrHost(t)
	if err := host.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "policy gone while member2 is down", func(ctx context.Context) (bool, string) {
		err := host.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.FailoverPolicy{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	holds(t, 30*time.Second, "member2 down keeps its pin, the record is not released", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, "member2", 0) && !stateReleased(ctx, r), rspString(r) + " " + recordString(t, ns, name)
	})

	samples := recordRSP(t, ns, name)
	reviveMember2()
	wantStepwiseRelease(t, ns, name, total, samples, 4*time.Minute)
}

// wantStepwiseRelease waits for the user's 1:1 to be back (replicas split
// evenly, the record released) and checks, from the samples recorded since
// the release could start, that it came in steps of at most maxStep=2 and
// that Ready never fell below the user's total.
func wantStepwiseRelease(t *testing.T, ns, name string, total int32, samples *rspRecorder, within time.Duration) {
	t.Helper()
	eventually(t, within, "the user's 1:1 back, replicas split evenly, the record released", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) || !stateReleased(ctx, r) {
			return false, rspString(r) + " " + recordString(t, ns, name)
		}
		return split(ctx, ns, name, total/2, total/2)
	})
	got := samples.stop()
	steps := changesOf(got)
	t.Logf("RSP during the release:\n%s", strings.Join(steps.lines(got[0].at), "\n"))
	if len(steps) < 3 {
		t.Errorf("the user's spec returned in one jump, want steps of at most maxStep=2: %v", steps.lines(got[0].at))
	}
	if m := minReadyOf(got); m < total {
		t.Errorf("Ready pods dropped to %d during the release, want at least %d (make-before-break)", m, total)
	}
}
