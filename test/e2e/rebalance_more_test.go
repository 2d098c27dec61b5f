//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/rebalance"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/test/lab"
)

// stabilization is rbSpec's failback window.
const stabilization = 20 * time.Second

// Member 2's nodes flap between schedulable and cordoned while the
// workload is shifted away from it. Each room period is shorter than the
// stabilization window but together they outlast it: every cordon must
// restart the window, so nothing moves back while flapping; once member2
// stays schedulable, the baseline returns after one full window, in the
// usual steps, without revisiting a placement.
func TestRebalanceFlappingMemberDuringStabilization(t *testing.T) {
	const ns, name, total = "rebalance-flap", "web", 6
	exhaust(t)
	startRebalance(t)
	rbPolicy(t, "rebalance-flap", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "shifted: member1 runs all replicas", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !pinnedTo(r, "member1", total) || !pinnedTo(r, "member2", 0) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total, 0)
	})
	shifted := mustRSP(t, ns, name)
	rec := recordRSP(t, ns, name)

	const flaps, roomFor = 3, 8 * time.Second
	flapStart := time.Now()
	for i := 1; i <= flaps; i++ {
		if err := theLab.RestoreCapacity(t.Context(), "member2"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("flap %d: member2's room observed", i), func(ctx context.Context) (bool, string) {
			m, err := rspMarks(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return m.Members["member2"].RoomSince != nil, fmt.Sprintf("member2 marks %+v", m.Members["member2"])
		})
		holds(t, roomFor, fmt.Sprintf("flap %d: RSP stays shifted while member2 is not yet stable", i), func(ctx context.Context) (bool, string) {
			r, err := getRSP(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return pinnedTo(r, "member1", total) && pinnedTo(r, "member2", 0), rspString(r)
		})
		if err := theLab.ExhaustCapacity(t.Context(), "member2", lab.ExhaustCordon); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("flap %d: member2's room mark cleared by the cordon", i), func(ctx context.Context) (bool, string) {
			m, err := rspMarks(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return m.Members["member2"].RoomSince == nil, fmt.Sprintf("member2 marks %+v", m.Members["member2"])
		})
	}
	flapped := time.Since(flapStart)
	if flapped < stabilization {
		t.Fatalf("flapping lasted %.1fs, shorter than the %s window: the test proves nothing", flapped.Seconds(), stabilization)
	}
	if got := rec.placements(); len(got) != 1 {
		t.Fatalf("RSP changed while member2 flapped for %.0fs: %v", flapped.Seconds(), got)
	}

	if err := theLab.RestoreCapacity(t.Context(), "member2"); err != nil {
		t.Fatal(err)
	}
	stable := time.Now()
	eventually(t, 3*time.Minute, "baseline back, replicas split 3/3", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total/2, total/2)
	})
	samples := rec.stop()
	changes := changesOf(samples)
	t.Logf("RSP placements (since the workload was shifted):\n%s", strings.Join(changes.lines(stable), "\n"))
	if changes[0].spec != rspString(shifted) {
		t.Errorf("first recorded placement %q, want the shifted one %q", changes[0].spec, rspString(shifted))
	}
	if len(changes) < 2 {
		t.Fatalf("baseline returned but no change was recorded: %v", changes.lines(stable))
	}
	// roomSince is kept to the second: allow that much.
	if first := changes[1].at.Sub(stable); first < stabilization-time.Second {
		t.Errorf("first failback change %.1fs after member2 stopped flapping, want at least the %s window", first.Seconds(), stabilization)
	}
	// shifted, then at most two make/break pairs of maxStep=2, then the baseline.
	if len(changes) > 6 {
		t.Errorf("%d RSP placements, want at most 6 (flapping?)", len(changes))
	}
	if dup := changes.revisited(); dup != "" {
		t.Errorf("placement %q written twice: the RSP oscillated", dup)
	}
}

// The operator is restarted twice: while the RSP is shifted, and in the
// middle of the stepwise failback. Each new process resumes from the
// annotation: the shifted spec is not mistaken for a user edit (the
// baseline stays 1:1 of 6), no change is made twice, no placement is
// revisited, Ready replicas never drop below totalReplicas, and the
// baseline is restored.
func TestRebalanceOperatorRestartMidShift(t *testing.T) {
	const ns, name, total = "rebalance-restart", "web", 6
	baseWeights := map[string]int64{"member1": 1, "member2": 1}
	restore := exhaust(t)
	op := startRebalance(t)
	pol := rbPolicy(t, "rebalance-restart", ns, nil)
	federatedWorkload(t, ns, name, total)
	eventually(t, 90*time.Second, "shifted: member1 runs all replicas", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !pinnedTo(r, "member1", total) || !pinnedTo(r, "member2", 0) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total, 0)
	})
	shifted := mustRSP(t, ns, name)
	before, err := rspMarks(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	rec := recordRSP(t, ns, name)

	// Restart 1, while shifted.
	op.stop()
	op = startRebalance(t)
	restore()
	// The new process is at work once it marks member2's room.
	eventually(t, 60*time.Second, "restarted operator marks member2's room", func(ctx context.Context) (bool, string) {
		m, err := rspMarks(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return m.Members["member2"].RoomSince != nil, fmt.Sprintf("member2 marks %+v", m.Members["member2"])
	})
	after, err := rspMarks(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if !baselineRecorded(t, mustRSP(t, ns, name), total, baseWeights) {
		t.Fatalf("baseline lost across the restart: %s", recordString(t, ns, name))
	}
	if !after.LastChange.Equal(before.LastChange) {
		t.Errorf("restart rewrote the RSP: lastChange %v, was %v", after.LastChange, before.LastChange)
	}
	if r := mustRSP(t, ns, name); rspString(r) != rspString(shifted) {
		t.Errorf("restart changed the RSP: %s, was %s", rspString(r), rspString(shifted))
	}

	// Restart 2, in the middle of the failback: as soon as its first step
	// is written.
	eventually(t, 90*time.Second, "failback begins", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return rspString(r) != rspString(shifted), rspString(r)
	})
	op.stop()
	midway := mustRSP(t, ns, name)
	if hasWeightsOnly(midway, total, baseWeights) {
		t.Fatalf("failback finished in one step before the restart: %s", rspString(midway))
	}
	t.Logf("restarting the operator mid-failback at %s", rspString(midway))
	startRebalance(t)

	eventually(t, 3*time.Minute, "baseline back, replicas split 3/3", func(ctx context.Context) (bool, string) {
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !hasWeightsOnly(r, total, baseWeights) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, total/2, total/2)
	})
	samples := rec.stop()
	changes := changesOf(samples)
	t.Logf("RSP placements (since the workload was shifted):\n%s", strings.Join(changes.lines(samples[0].at), "\n"))
	r := mustRSP(t, ns, name)
	if !baselineRecorded(t, r, total, baseWeights) {
		t.Errorf("baseline after failback %s, want total %d weights %v", recordString(t, r.Namespace, r.Name), total, baseWeights)
	}
	if len(changes) > 6 {
		t.Errorf("%d RSP placements, want at most 6: a restart repeated or added steps", len(changes))
	}
	if dup := changes.revisited(); dup != "" {
		t.Errorf("placement %q written twice across the restarts", dup)
	}
	// Each write of the controller is a new placement: a change repeated
	// by a restarted process would move lastChange without moving the spec.
	if w, p := writesOf(samples), len(changes)-1; w != p {
		t.Errorf("%d lastChange updates for %d placement changes: a change was written twice", w, p)
	}
	if m := minReadyOf(samples); m < total {
		t.Errorf("Ready replicas dropped to %d across the restarts, want at least %d (make-before-break)", m, total)
	}
	eventually(t, 30*time.Second, "policy status without an adopted user edit", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, pol.Name)
		if err != nil {
			return false, err.Error()
		}
		if i := slices.IndexFunc(p.Status.RecentDecisions, func(d v1alpha1.Decision) bool { return d.Reason == "AdoptedUserEdit" }); i >= 0 {
			t.Fatalf("a restart was taken for a user edit: %+v", p.Status.RecentDecisions[i])
		}
		restored := slices.ContainsFunc(p.Status.RecentDecisions, func(d v1alpha1.Decision) bool { return d.Action == rebalance.ActionRestore })
		return restored, fmt.Sprintf("decisions %+v", p.Status.RecentDecisions)
	})
}

// rspMarks is the state fedfailover keeps of the RSP: its
// RebalanceRecord (not released).
func rspMarks(ctx context.Context, ns, name string) (*contract.RebalanceState, error) {
	rec, err := getRecord(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if rec.Spec.Released {
		return nil, fmt.Errorf("RebalanceRecord %s/%s released", ns, name)
	}
	return contract.StateFromRecord(&rec.Spec), nil
}

// getRecord reads the RSP's RebalanceRecord.
func getRecord(ctx context.Context, ns, name string) (*v1alpha1.RebalanceRecord, error) {
	rec := &v1alpha1.RebalanceRecord{}
	return rec, nrHostCl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rec)
}

// stateReleased: fedfailover keeps nothing of the RSP as managed (its
// record released or gone) and no legacy annotation is on it.
func stateReleased(ctx context.Context, r *fedschedv1a1.ReplicaSchedulingPreference) bool {
	if _, ok := r.Annotations[contract.AnnotationRebalance]; ok {
		return false
	}
	rec, err := getRecord(ctx, r.Namespace, r.Name)
	return apierrors.IsNotFound(err) || (err == nil && rec.Spec.Released)
}

func mustRSP(t *testing.T, ns, name string) *fedschedv1a1.ReplicaSchedulingPreference {
	t.Helper()
	r, err := getRSP(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rspSample is one look at the RSP and the Ready replicas.
type rspSample struct {
	at         time.Time
	spec       string
	lastChange string
	ready      int32
}

// rspRecorder samples an RSP every 200 ms in the background.
type rspRecorder struct {
	mu      sync.Mutex
	samples []rspSample
	cancel  context.CancelFunc
	done    chan struct{}
}

func recordRSP(t *testing.T, ns, name string) *rspRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := &rspRecorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rec.done)
		for {
			if r, err := getRSP(ctx, ns, name); err == nil {
				s := rspSample{at: time.Now(), spec: rspString(r), ready: unknownReady}
				if n, ok := readyPods(ctx, ns, name); ok {
					s.ready = n
				}
				if m, err := rspMarks(ctx, ns, name); err == nil && m.LastChange != nil {
					s.lastChange = m.LastChange.UTC().Format(time.RFC3339)
				}
				if ctx.Err() != nil {
					return // a sample cut short by stop is not a sample
				}
				rec.mu.Lock()
				rec.samples = append(rec.samples, s)
				rec.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { rec.stop() })
	return rec
}

// stop ends the recording and returns every sample.
func (r *rspRecorder) stop() []rspSample {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// placements lists the distinct consecutive specs recorded so far.
func (r *rspRecorder) placements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range changesOf(r.samples) {
		out = append(out, c.spec)
	}
	return out
}

// rspChanges are the first samples of each distinct consecutive spec.
type rspChanges []rspSample

func changesOf(samples []rspSample) rspChanges {
	var out rspChanges
	for _, s := range samples {
		if len(out) == 0 || out[len(out)-1].spec != s.spec {
			out = append(out, s)
		}
	}
	return out
}

func (c rspChanges) lines(since time.Time) []string {
	var out []string
	for _, s := range c {
		out = append(out, fmt.Sprintf("%+6.1fs %s", s.at.Sub(since).Seconds(), s.spec))
	}
	return out
}

// revisited returns a placement that came back after another one.
func (c rspChanges) revisited() string {
	seen := map[string]bool{}
	for _, s := range c {
		if seen[s.spec] {
			return s.spec
		}
		seen[s.spec] = true
	}
	return ""
}

// writesOf counts changes of the recorded lastChange.
func writesOf(samples []rspSample) int {
	n := 0
	for i := 1; i < len(samples); i++ {
		if samples[i].lastChange != samples[i-1].lastChange {
			n++
		}
	}
	return n
}

// unknownReady marks a sample whose members could not be read: it never
// counts as the minimum.
const unknownReady = int32(1 << 30)

func minReadyOf(samples []rspSample) int32 {
	m := int32(1 << 30)
	for _, s := range samples {
		m = min(m, s.ready)
	}
	return m
}

// recordString shows the RSP's RebalanceRecord for a failure message.
func recordString(t *testing.T, ns, name string) string {
	t.Helper()
	rec, err := getRecord(t.Context(), ns, name)
	if err != nil {
		return fmt.Sprintf("(no RebalanceRecord: %v)", err)
	}
	return fmt.Sprintf("%+v", rec.Spec)
}
