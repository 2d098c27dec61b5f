package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The rebalance benchmark's federation: the workload is spread 1:1 over two
// members; member2 is the one that runs out of room or fails.
const (
	rbWorkload   = "web"
	rbHealthy    = "member1"
	rbFaulty     = "member2"
	rbSamplePace = 250 * time.Millisecond
	// rbSteady is how long the workload runs split and Ready before member2
	// fails.
	rbSteady = 30 * time.Second
)

// The policy the benchmark runs fedfailover with: the API defaults.
var rbBenchPolicy = v1alpha1.RebalanceSpec{
	CapacityExhaustedAfter: "10s", ClusterFailedAfter: "20s", MinInterval: "30s",
	Failback: v1alpha1.FailbackSpec{StabilizationWindow: "2m", MaxStep: 2, MakeBeforeBreak: true},
}

// rbMeasure is one scenario run in one mode. Seconds is nil when all
// replicas were not Running within the bound.
type rbMeasure struct {
	Run      int      `json:"run"`
	Scenario string   `json:"scenario"`
	Mode     string   `json:"mode"`
	Seconds  *float64 `json:"seconds"`
	MinReady int32    `json:"min_ready"`
	// Timeline is what placed the replicas: each change of the RSP spec,
	// member1's Deployment and kubefed's view of member2, from the onset.
	Timeline []string `json:"timeline"`
	// Failback (member failure only): from member2's API server restart
	// until the user's RSP and the 1:1 split are back and Ready; nil when
	// not within --failback-bound. FailbackMinReady is the lowest count of
	// Running, Ready, non-terminating pods over both members meanwhile.
	FailbackSeconds  *float64 `json:"failback_seconds,omitempty"`
	FailbackMinReady *int32   `json:"failback_min_ready,omitempty"`
	FailbackTimeline []string `json:"failback_timeline,omitempty"`
	// Scale-up only: Target is the raised totalReplicas; PlacedBeyondRoom
	// the most replicas member2's Deployment was given beyond what it held
	// when it was full (kubefed places the user's own edit at once); and
	// FalseCaps counts the samples, while both members had room, in which
	// the RSP capped member2 below its share.
	// BeyondRoomSeconds is how long (sampled) member2's Deployment wanted
	// more than it held.
	// LoadAvg1 is the machine's 1-minute load average when the measurement
	// ended: a figure taken with no headroom measures the machine.
	LoadAvg1          float64  `json:"load_average_1m"`
	Target            int32    `json:"target,omitempty"`
	PlacedBeyondRoom  *int32   `json:"placed_beyond_room,omitempty"`
	BeyondRoomSeconds *float64 `json:"beyond_room_seconds,omitempty"`
	FalseCaps         *int     `json:"false_caps,omitempty"`
}

type rbOptions struct {
	scenarios     []string
	runs          int
	total         int
	bound         time.Duration
	failbackBound time.Duration
	dir           string
}

func rebalanceCmd() *cobra.Command {
	var o rbOptions
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Time to all replicas Running after capacity exhaustion and member failure, vs kubefed alone",
		Long: `Starts a host and two members (kubefed joined), and per run measures two
scenarios, each once with kubefed alone (no operator) and once with the
fedfailover member and rebalance controllers running in this process (a fresh
manager per scenario, policy at the API defaults):

  exhaustion      member2 is cordoned, then a FederatedDeployment with an RSP
                  (weights 1:1) is created; from the first Unschedulable
                  transition of a member2 replica until totalReplicas are Ready.
  member failure  the workload runs split 1:1 and Ready (for 30 s); member2's
                  kube-apiserver is SIGKILLed; from the kill until
                  totalReplicas are Ready on reachable members.
  failback        then member2's kube-apiserver is started again; from the
                  restart until the RSP holds the user's weights again and
                  the replicas run split 1:1, Ready.

The Ready count (sum of the members' Deployment readyReplicas, 0 for an
unreachable member) is sampled every 250 ms; its lowest value is reported.
During failback it counts Running, Ready, non-terminating pods instead: a
restarted member's Deployment status lags its pods.
A mode that does not reach totalReplicas within --bound is reported as not
recovered (null), never as a number.
kubefed runs with its chart's default timings unless
FEDFAILOVER_LAB_KUBEFED_TIMINGS=tuned (then the figures are not comparable
with kubefed alone as users run it).
Goals: exhaustion >= 3x faster than kubefed alone and <= 20 s, member failure
<= 30 s, min Ready during failover and failback not below kubefed alone.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.runs < 1 {
				return fmt.Errorf("--runs must be at least 1, got %d", o.runs)
			}
			if o.total < 2 {
				return fmt.Errorf("--replicas must be at least 2, got %d", o.total)
			}
			for _, sc := range o.scenarios {
				if !slices.Contains(rbScenarios, sc) {
					return fmt.Errorf("--scenarios: unknown scenario %q (want some of %s)", sc, strings.Join(rbScenarios, ", "))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRebalanceBench(ctx, cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringSliceVar(&o.scenarios, "scenarios", rbScenarios, "scenarios to run")
	cmd.Flags().IntVar(&o.runs, "runs", 3, "runs of each scenario and mode")
	cmd.Flags().IntVar(&o.total, "replicas", 6, "totalReplicas of the benchmark workload")
	cmd.Flags().DurationVar(&o.bound, "bound", 180*time.Second, "give up waiting for all replicas Running after this long")
	cmd.Flags().DurationVar(&o.failbackBound, "failback-bound", 6*time.Minute, "give up waiting for the baseline to return after member2 restarts after this long")
	cmd.Flags().StringVar(&o.dir, "dir", "", "lab directory (default: a temporary directory)")
	return cmd
}

// rbBench is one benchmark session on one lab.
type rbBench struct {
	out     io.Writer
	o       rbOptions
	l       *lab.Lab
	hostCfg *rest.Config
	host    client.Client
	timings string // kubefed's
}

func runRebalanceBench(ctx context.Context, out io.Writer, o rbOptions) (err error) {
	b := &rbBench{out: out, o: o}
	timings := os.Getenv(lab.KubefedTimingsEnv)
	if timings == "" {
		timings = lab.KubefedTimingsDefault
	}
	b.timings = timings
	b.progress("starting the lab (host + 2 members, 3 nodes each, kubefed at %s timings)", timings)
	var down func() error
	b.l, down, err = upLab(ctx, o.dir, lab.Options{Members: 2, Nodes: 3, KubefedTimings: timings,
		// A loaded machine starts API servers slowly; the figures measured
		// later do not include the start.
		StartTimeout: 3 * time.Minute}, b.progress)
	if err != nil {
		return err
	}
	defer downWith(&err, down)
	if err := b.connectHost(); err != nil {
		return err
	}

	var all []rbMeasure
	for run := 1; run <= o.runs; run++ {
		for _, sc := range o.scenarios {
			for _, mode := range rbModes(sc) {
				m, err := b.scenario(ctx, run, 1, sc, mode)
				if err != nil && ctx.Err() == nil {
					// A loaded machine can fail the setup (a slow scheduler,
					// a member slow to come back): one more try, fresh namespace.
					b.progress("run %d %s (%s) failed, trying once more: %v", run, sc, mode, err)
					m, err = b.scenario(ctx, run, 2, sc, mode)
				}
				if err != nil {
					return fmt.Errorf("run %d %s (%s): %w", run, sc, mode, err)
				}
				secs := "not recovered"
				if m.Seconds != nil {
					secs = fmt.Sprintf("%.1fs", *m.Seconds)
				}
				of := int32(o.total)
				if m.Target > 0 {
					of = m.Target
				}
				b.progress("run %d/%d %-14s %-11s %s, min Ready %d/%d", run, o.runs, sc, mode, secs, m.MinReady, of)
				for _, line := range m.Timeline {
					fmt.Fprintf(b.out, "      %s\n", line)
				}
				if sc == "member-failure" {
					secs = "not back"
					if m.FailbackSeconds != nil {
						secs = fmt.Sprintf("%.1fs", *m.FailbackSeconds)
					}
					minReady := "-"
					if m.FailbackMinReady != nil {
						minReady = strconv.Itoa(int(*m.FailbackMinReady))
					}
					b.progress("run %d/%d %-14s %-11s %s, min Ready %s/%d", run, o.runs, "failback", mode, secs, minReady, o.total)
					for _, line := range m.FailbackTimeline {
						fmt.Fprintf(b.out, "      %s\n", line)
					}
				}
				all = append(all, m)
			}
		}
		if run < o.runs {
			// A table so far, in case the session is cut short.
			if err := b.report(all, run); err != nil {
				return err
			}
		}
	}
	return b.report(all, o.runs)
}

func (b *rbBench) progress(format string, args ...any) { progress(b.out, format, args...) }

// connectHost installs the FailoverPolicy CRD in the lab host and makes a
// client that knows fedfailover's types.
func (b *rbBench) connectHost() (err error) {
	b.hostCfg, b.host, err = labHost(b.l)
	return err
}

// scenario runs one scenario in one mode in its own namespace and leaves
// the lab as it found it.
func (b *rbBench) scenario(ctx context.Context, run, attempt int, sc, mode string) (m rbMeasure, err error) {
	m = rbMeasure{Run: run, Scenario: sc, Mode: mode}
	ns := fmt.Sprintf("bench-%s-%s-%d-%d", sc, mode, run, attempt)
	if mode != "kubefed" {
		op, err := startOperator(ctx, b.hostCfg, controllers.Options{WithoutNodeRecovery: true}, rbHealthy, rbFaulty)
		if err != nil {
			return m, err
		}
		defer func() {
			if serr := op.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: rbBenchPolicy.DeepCopy()}}
		pol.Spec.Rebalance.ReplicaSchedulingPreferences = v1alpha1.PodScope{Namespaces: []string{ns}}
		pol.Spec.Rebalance.Placement = rbPlacement(sc, mode)
		if err := b.host.Create(ctx, pol); err != nil {
			return m, err
		}
		defer func() {
			if derr := b.host.Delete(context.Background(), pol); derr != nil && !apierrors.IsNotFound(derr) && err == nil {
				err = derr
			}
		}()
	}
	defer func() {
		if cerr := b.deleteWorkload(ns); cerr != nil && err == nil {
			err = cerr
		}
	}()
	defer func() { m.LoadAvg1, _ = loadAvg() }()
	switch sc {
	case "exhaustion":
		err = b.exhaustion(ctx, ns, &m)
	case "scale-up":
		err = b.scaleUp(ctx, ns, &m)
	default:
		err = b.memberFailure(ctx, ns, &m)
	}
	return m, err
}

// rbScenarios are the benchmark's scenarios, in the order they run.
var rbScenarios = []string{"exhaustion", "member-failure", "scale-up"}

// rbModes are the modes a scenario runs in: kubefed alone, and fedfailover
// (scale-up: with reactive and with predictive placement, side by side).
func rbModes(sc string) []string {
	if sc == "scale-up" {
		return []string{"kubefed", "reactive", "predictive"}
	}
	return []string{"kubefed", "fedfailover"}
}

// rbPlacement is the policy's placement per scenario and mode: the
// exhaustion scenario measures the Unschedulable signal (its onset is the
// first Unschedulable replica, which a predictive cap could prevent);
// scale-up measures each mode side by side; member failure runs the API
// default.
func rbPlacement(sc, mode string) v1alpha1.PlacementMode {
	switch {
	case sc == "exhaustion" || mode == "reactive":
		return v1alpha1.PlacementReactive
	case mode == "predictive":
		return v1alpha1.PlacementPredictive
	}
	return ""
}

// exhaustion: member2 has no room when the workload arrives.
func (b *rbBench) exhaustion(ctx context.Context, ns string, m *rbMeasure) error {
	if err := b.l.ExhaustCapacity(ctx, rbFaulty, lab.ExhaustCordon); err != nil {
		return err
	}
	defer func() {
		if err := b.l.RestoreCapacity(context.Background(), rbFaulty); err != nil {
			b.progress("restoring %s capacity: %v", rbFaulty, err)
		}
	}()
	if err := b.createWorkload(ctx, ns); err != nil {
		return err
	}
	// The onset is the scheduler's verdict on member2's replicas; sampling
	// starts once member1's own share serves, so the dip reported is the
	// exhaustion's, not the workload's start.
	var since time.Time
	err := poll(ctx, 90*time.Second, "member2 replicas Unschedulable and member1's share Ready", func(ctx context.Context) (bool, string, error) {
		if since.IsZero() {
			s, err := b.unschedulableSince(ctx, ns)
			if err != nil {
				return false, "", err
			}
			since = s
		}
		_, r1, err := b.memberReplicas(ctx, rbHealthy, ns)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		return !since.IsZero() && r1 >= int32(b.o.total/2), fmt.Sprintf("unschedulable since %v, member1 ready %d", since, r1), nil
	})
	if err != nil {
		return err
	}
	return b.waitAllReady(ctx, ns, "", since, m)
}

// scaleUp: the workload runs split and Ready; the user raises
// totalReplicas by 2 while both members have room (a cap of member2 then
// is a false cap); member2 is filled; the user raises totalReplicas again,
// by the workload's own size. From that second edit until every replica
// is Ready.
func (b *rbBench) scaleUp(ctx context.Context, ns string, m *rbMeasure) error {
	if err := b.createWorkload(ctx, ns); err != nil {
		return err
	}
	if err := b.waitSplitReady(ctx, ns, int32(b.o.total/2), int32(b.o.total-b.o.total/2)); err != nil {
		return err
	}
	falseCaps := 0
	roomy := int32(b.o.total + 2)
	share := roomy - roomy/2
	if err := b.setTotal(ctx, ns, roomy); err != nil {
		return err
	}
	var scratch rbMeasure
	err := b.waitReady(ctx, ns, "", roomy, time.Now(), &scratch, func(ctx context.Context) {
		if capped(b.rspPrefs(ctx, ns), rbFaulty, int64(share)) {
			falseCaps++
		}
	})
	if err != nil {
		return err
	}
	m.FalseCaps = &falseCaps
	if scratch.Seconds == nil {
		return fmt.Errorf("scale-up to %d with room on both members: not all Ready within %s", roomy, b.o.bound)
	}
	if err := b.waitSplitReady(ctx, ns, roomy/2, share); err != nil {
		return err
	}
	if err := b.l.ExhaustCapacity(ctx, rbFaulty, lab.ExhaustFill); err != nil {
		return err
	}
	defer func() {
		if err := b.l.RestoreCapacity(context.Background(), rbFaulty); err != nil {
			b.progress("restoring %s capacity: %v", rbFaulty, err)
		}
	}()
	m.Target = roomy + int32(b.o.total)
	beyond := int32(0)
	var over time.Duration
	last := time.Now()
	onset := last
	if err := b.setTotal(ctx, ns, m.Target); err != nil {
		return err
	}
	err = b.waitReady(ctx, ns, "", m.Target, onset, m, func(ctx context.Context) {
		now := time.Now()
		if s2, _, err := b.memberReplicas(ctx, rbFaulty, ns); err == nil && s2 > share {
			beyond = max(beyond, s2-share)
			over += now.Sub(last)
		}
		last = now
	})
	m.PlacedBeyondRoom, m.BeyondRoomSeconds = &beyond, ptr.To(round1(over.Seconds()))
	return err
}

// waitSplitReady waits until member1 and member2 run want1 and want2
// replicas, all Ready.
func (b *rbBench) waitSplitReady(ctx context.Context, ns string, want1, want2 int32) error {
	return poll(ctx, 2*time.Minute, fmt.Sprintf("replicas split %d:%d and Ready", want1, want2), func(ctx context.Context) (bool, string, error) {
		s1, r1, err1 := b.memberReplicas(ctx, rbHealthy, ns)
		s2, r2, err2 := b.memberReplicas(ctx, rbFaulty, ns)
		if err1 != nil || err2 != nil {
			return false, fmt.Sprintf("member1: %v, member2: %v", err1, err2), nil
		}
		return s1 == want1 && r1 == want1 && s2 == want2 && r2 == want2,
			fmt.Sprintf("member1 %d (ready %d), member2 %d (ready %d)", s1, r1, s2, r2), nil
	})
}

// setTotal is the user's edit of the RSP's totalReplicas (a merge patch,
// as kubectl edit sends it).
func (b *rbBench) setTotal(ctx context.Context, ns string, total int32) error {
	r := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbWorkload}}
	patch := []byte(fmt.Sprintf(`{"spec":{"totalReplicas":%d}}`, total))
	return b.host.Patch(ctx, r, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-edit"))
}

// rspPrefs is the RSP's spec.clusters now (nil when it cannot be read).
func (b *rbBench) rspPrefs(ctx context.Context, ns string) map[string]fedschedv1a1.ClusterPreferences {
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := b.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbWorkload}, r); err != nil {
		return nil
	}
	return r.Spec.Clusters
}

// capped: the preferences hold member below share.
func capped(prefs map[string]fedschedv1a1.ClusterPreferences, member string, share int64) bool {
	p, ok := prefs[member]
	return ok && p.MaxReplicas != nil && *p.MaxReplicas < share
}

// memberFailure: member2's API server dies under a running workload.
func (b *rbBench) memberFailure(ctx context.Context, ns string, m *rbMeasure) error {
	if err := b.createWorkload(ctx, ns); err != nil {
		return err
	}
	half := int32(b.o.total / 2)
	// The member dies under a workload in its steady state: split and Ready
	// without a break for rbSteady. Right after the workload's start
	// kubefed's RSP controller still re-checks it every 10 s (pods not all
	// Ready yet: StatusNeedsRecheck), and a kill inside that window would
	// measure that leftover re-check instead of kubefed's reaction to a
	// failed member.
	var steadySince time.Time
	err := poll(ctx, 90*time.Second+rbSteady, "replicas split and Ready, steadily", func(ctx context.Context) (bool, string, error) {
		s1, r1, err1 := b.memberReplicas(ctx, rbHealthy, ns)
		s2, r2, err2 := b.memberReplicas(ctx, rbFaulty, ns)
		if err1 != nil || err2 != nil {
			steadySince = time.Time{}
			return false, fmt.Sprintf("member1: %v, member2: %v", err1, err2), nil
		}
		if split := s1 == half && r1 == half && s2 == int32(b.o.total)-half && r2 == s2; !split {
			steadySince = time.Time{}
			return false, fmt.Sprintf("member1 %d (ready %d), member2 %d (ready %d)", s1, r1, s2, r2), nil
		}
		if steadySince.IsZero() {
			steadySince = time.Now()
		}
		return time.Since(steadySince) >= rbSteady, fmt.Sprintf("split and Ready for %s", time.Since(steadySince).Round(time.Second)), nil
	})
	if err != nil {
		return err
	}
	killed := time.Now()
	if err := b.l.KillAPIServer(rbFaulty); err != nil {
		return err
	}
	restarted := false
	defer func() {
		if restarted {
			return
		}
		if err := b.reviveFaulty(context.Background()); err != nil {
			b.progress("restarting %s: %v", rbFaulty, err)
		}
	}()
	if err := b.waitAllReady(ctx, ns, rbFaulty, killed, m); err != nil {
		return err
	}
	restarted = true
	return b.failback(ctx, ns, m)
}

// failback restarts member2's API server and samples until the user's RSP
// and the 1:1 split are back and Ready, or --failback-bound passes; then
// it waits for kubefed to count member2 Ready, for the next scenario.
func (b *rbBench) failback(ctx context.Context, ns string, m *rbMeasure) error {
	onset := time.Now()
	if err := b.l.RestartAPIServer(ctx, rbFaulty); err != nil {
		return err
	}
	minReady := int32(math.MaxInt32)
	deadline := onset.Add(b.o.failbackBound)
	tick := time.NewTicker(rbSamplePace)
	defer tick.Stop()
	last := ""
	for {
		if n, ok := b.readyPods(ctx, ns); ok {
			minReady = min(minReady, n)
		}
		st := b.placementState(ctx, ns)
		if st != last {
			last = st
			m.FailbackTimeline = append(m.FailbackTimeline, fmt.Sprintf("%+.1fs %s", time.Since(onset).Seconds(), st))
		}
		if b.atBaseline(ctx, ns) {
			m.FailbackSeconds = ptr.To(time.Since(onset).Seconds())
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if minReady != math.MaxInt32 {
		m.FailbackMinReady = &minReady
	}
	return b.waitKubefedReady(ctx)
}

// atBaseline: the RSP holds the user's weights (1:1, no pins, the user's
// total) and both members run their half, Ready.
func (b *rbBench) atBaseline(ctx context.Context, ns string) bool {
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := b.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbWorkload}, r); err != nil {
		return false
	}
	if r.Spec.TotalReplicas != int32(b.o.total) || len(r.Spec.Clusters) != 2 {
		return false
	}
	for _, c := range []string{rbHealthy, rbFaulty} {
		p, ok := r.Spec.Clusters[c]
		if !ok || p.Weight != 1 || p.MinReplicas != 0 || p.MaxReplicas != nil {
			return false
		}
	}
	half := int32(b.o.total / 2)
	for c, want := range map[string]int32{rbHealthy: half, rbFaulty: int32(b.o.total) - half} {
		s, r, err := b.memberReplicas(ctx, c, ns)
		if err != nil || s != want || r != want {
			return false
		}
	}
	return true
}

// readyPods counts the workload's Running, Ready, non-terminating pods over
// both members; ok is false when member1 could not be read (member2 may
// still be coming back: its pods count 0 then).
func (b *rbBench) readyPods(ctx context.Context, ns string) (n int32, ok bool) {
	for _, c := range []string{rbHealthy, rbFaulty} {
		cl, err := b.l.Client(c)
		if err != nil {
			return 0, false
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		pods := &corev1.PodList{}
		err = cl.List(sctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": rbWorkload})
		cancel()
		if err != nil {
			if c == rbHealthy {
				return 0, false
			}
			continue
		}
		for i := range pods.Items {
			if lab.PodReady(&pods.Items[i]) {
				n++
			}
		}
	}
	return n, true
}

// waitAllReady samples the Ready count until it reaches totalReplicas or
// the bound passes (then Seconds stays nil). down is the member whose API
// server is dead (its replicas count 0); a failed read of another member
// (a slow machine) drops the sample rather than counting a false dip.
func (b *rbBench) waitAllReady(ctx context.Context, ns, down string, onset time.Time, m *rbMeasure) error {
	return b.waitReady(ctx, ns, down, int32(b.o.total), onset, m, nil)
}

// waitReady is waitAllReady until target replicas are Ready; sample, when
// set, is called at every sample.
func (b *rbBench) waitReady(ctx context.Context, ns, down string, target int32, onset time.Time, m *rbMeasure, sample func(context.Context)) error {
	m.MinReady = math.MaxInt32
	deadline := time.Now().Add(b.o.bound)
	tick := time.NewTicker(rbSamplePace)
	defer tick.Stop()
	last := ""
	for {
		ready, ok := b.readyTotal(ctx, ns, down)
		if ok {
			m.MinReady = min(m.MinReady, ready)
		}
		if st := b.placementState(ctx, ns); st != last {
			last = st
			m.Timeline = append(m.Timeline, fmt.Sprintf("%+.1fs %s", time.Since(onset).Seconds(), st))
		}
		if sample != nil {
			sample(ctx)
		}
		if ok && ready >= target {
			s := time.Since(onset).Seconds()
			m.Seconds = &s
			return nil
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// placementState describes who placed the replicas where: the RSP spec,
// member1's Deployment and whether kubefed counts member2 Ready.
func (b *rbBench) placementState(ctx context.Context, ns string) string {
	out := "rsp "
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := b.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbWorkload}, r); err != nil {
		out += "?"
	} else {
		out += fmt.Sprintf("total %d", r.Spec.TotalReplicas)
		for _, c := range []string{rbHealthy, rbFaulty} {
			p := r.Spec.Clusters[c]
			mx := "-"
			if p.MaxReplicas != nil {
				mx = strconv.FormatInt(*p.MaxReplicas, 10)
			}
			out += fmt.Sprintf(" %s{w%d min%d max%s}", c, p.Weight, p.MinReplicas, mx)
		}
	}
	if s1, r1, err := b.memberReplicas(ctx, rbHealthy, ns); err == nil {
		out += fmt.Sprintf("; member1 deployment %d (ready %d)", s1, r1)
	}
	k := &kubefedv1beta1.KubeFedCluster{}
	if err := b.host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: rbFaulty}, k); err == nil {
		ready := "Unknown"
		for _, c := range k.Status.Conditions {
			if c.Type == "Ready" {
				ready = string(c.Status)
			}
		}
		out += "; kubefed member2 Ready=" + ready
	}
	return out
}

// readyTotal sums the members' ready replicas; the member that is down
// counts 0. ok is false when another member could not be read.
func (b *rbBench) readyTotal(ctx context.Context, ns, down string) (total int32, ok bool) {
	for _, c := range []string{rbHealthy, rbFaulty} {
		if c == down {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, r, err := b.memberReplicas(sctx, c, ns)
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, false
		}
		total += r
	}
	return total, true
}

func (b *rbBench) memberReplicas(ctx context.Context, cluster, ns string) (spec, ready int32, err error) {
	return b.l.DeploymentReplicas(ctx, cluster, ns, rbWorkload)
}

// unschedulableSince is the earliest Unschedulable transition of the
// workload's pods in member2 (zero: none yet).
func (b *rbBench) unschedulableSince(ctx context.Context, ns string) (time.Time, error) {
	cl, err := b.l.Client(rbFaulty)
	if err != nil {
		return time.Time{}, err
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return time.Time{}, err
	}
	var since time.Time
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				(since.IsZero() || c.LastTransitionTime.Time.Before(since)) {
				since = c.LastTransitionTime.Time
			}
		}
	}
	return since, nil
}

// reviveFaulty restarts member2's API server and waits until kubefed sees
// it Ready again, so the next scenario starts from a healthy federation.
func (b *rbBench) reviveFaulty(ctx context.Context) error {
	if err := b.l.RestartAPIServer(ctx, rbFaulty); err != nil {
		return err
	}
	return b.waitKubefedReady(ctx)
}

func (b *rbBench) waitKubefedReady(ctx context.Context) error {
	return poll(ctx, 2*time.Minute, "KubeFedCluster member2 Ready", func(ctx context.Context) (bool, string, error) {
		k := &kubefedv1beta1.KubeFedCluster{}
		if err := b.host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: rbFaulty}, k); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		for _, c := range k.Status.Conditions {
			if c.Type == "Ready" && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %+v", k.Status.Conditions), nil
	})
}

// createWorkload creates a FederatedDeployment on both members with an RSP
// spreading totalReplicas 1:1, as the kubefed baseline test does.
func (b *rbBench) createWorkload(ctx context.Context, ns string) error {
	return b.l.ApplyYAML(ctx, lab.HostName, lab.FederatedDeploymentYAML(ns, rbWorkload, b.o.total, b.l.Members()))
}

// deleteWorkload deletes the RSP and the FederatedDeployment and waits (a
// bounded while) for kubefed to remove the member Deployments, so their
// pods do not weigh on the next scenario.
func (b *rbBench) deleteWorkload(ns string) error {
	ctx := context.Background()
	for _, k := range []struct{ gv, kind string }{
		{"scheduling.kubefed.io/v1alpha1", "ReplicaSchedulingPreference"},
		{"types.kubefed.io/v1beta1", "FederatedDeployment"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(k.gv)
		u.SetKind(k.kind)
		u.SetNamespace(ns)
		u.SetName(rbWorkload)
		if err := b.host.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := poll(ctx, 30*time.Second, "member Deployments deleted", func(ctx context.Context) (bool, string, error) {
		for _, c := range []string{rbHealthy, rbFaulty} {
			if _, _, err := b.memberReplicas(ctx, c, ns); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s: %v", c, err), nil
			}
		}
		return true, "", nil
	})
	if err == nil {
		return nil
	}
	// kubefed does not always remove what it propagated to a member that was
	// down meanwhile: delete the leftovers directly.
	for _, c := range []string{rbHealthy, rbFaulty} {
		cl, err := b.l.Client(c)
		if err != nil {
			return err
		}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbWorkload}}
		if err := cl.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting leftover Deployment in %s: %w", c, err)
		}
	}
	return nil
}

// rbSummary is one scenario and mode over all runs.
type rbSummary struct {
	median, p95 *float64
	recovered   int
	minReady    int32
}

func summarize(all []rbMeasure, sc, mode string) rbSummary {
	return summarizeBy(all, sc, mode, func(m rbMeasure) (*float64, *int32) { return m.Seconds, &m.MinReady })
}

// summarizeFailback summarizes the failback part of the member failures.
func summarizeFailback(all []rbMeasure, mode string) rbSummary {
	return summarizeBy(all, "member-failure", mode, func(m rbMeasure) (*float64, *int32) { return m.FailbackSeconds, m.FailbackMinReady })
}

func summarizeBy(all []rbMeasure, sc, mode string, figures func(rbMeasure) (*float64, *int32)) rbSummary {
	var secs []float64
	s := rbSummary{minReady: math.MaxInt32}
	n := 0
	for _, m := range all {
		if m.Scenario != sc || m.Mode != mode {
			continue
		}
		n++
		sec, ready := figures(m)
		if ready != nil {
			s.minReady = min(s.minReady, *ready)
		}
		if sec != nil {
			secs = append(secs, *sec)
		}
	}
	s.recovered = len(secs)
	// A median over only the runs that recovered would hide the others.
	if n > 0 && len(secs) == n {
		s.median, s.p95 = ptr.To(round1(Median(secs))), ptr.To(round1(P95(secs)))
	}
	return s
}

func fmtSecs(v *float64, recovered, runs int) string {
	if v == nil {
		return fmt.Sprintf("not recovered (%d/%d runs)", recovered, runs)
	}
	return Seconds(*v)
}

func (b *rbBench) report(all []rbMeasure, runs int) error {
	exF, exK := summarize(all, "exhaustion", "fedfailover"), summarize(all, "exhaustion", "kubefed")
	mfF, mfK := summarize(all, "member-failure", "fedfailover"), summarize(all, "member-failure", "kubefed")
	fbF, fbK := summarizeFailback(all, "fedfailover"), summarizeFailback(all, "kubefed")
	speedup := func(f, k rbSummary) *float64 {
		if f.median == nil || k.median == nil || *f.median <= 0 {
			return nil
		}
		return ptr.To(math.Round(*k.median / *f.median * 100) / 100)
	}
	exSpeed, mfSpeed, fbSpeed := speedup(exF, exK), speedup(mfF, mfK), speedup(fbF, fbK)
	fmtSpeed := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.2fx", *v)
	}
	rowOf := func(name string, f, k rbSummary, sp *float64, of int) []string {
		return []string{name,
			fmtSecs(f.median, f.recovered, runs), fmtSecs(f.p95, f.recovered, runs),
			fmtSecs(k.median, k.recovered, runs), fmtSecs(k.p95, k.recovered, runs),
			fmtSpeed(sp),
			fmtReadyOf(f.minReady, of), fmtReadyOf(k.minReady, of)}
	}
	row := func(name string, f, k rbSummary, sp *float64) []string { return rowOf(name, f, k, sp, b.o.total) }
	suP, suR, suK := summarize(all, "scale-up", "predictive"), summarize(all, "scale-up", "reactive"), summarize(all, "scale-up", "kubefed")
	suPSpeed, suRSpeed := speedup(suP, suK), speedup(suR, suK)
	ran := func(sc string) bool { return slices.Contains(b.o.scenarios, sc) }
	var rows [][]string
	if ran("exhaustion") {
		rows = append(rows, row("capacity exhaustion (reactive)", exF, exK, exSpeed))
	}
	if ran("member-failure") {
		rows = append(rows, row("member failure", mfF, mfK, mfSpeed), row("member failback", fbF, fbK, fbSpeed))
	}
	if ran("scale-up") {
		target := 2*b.o.total + 2
		rows = append(rows, rowOf("scale-up into a full member, predictive", suP, suK, suPSpeed, target),
			rowOf("scale-up into a full member, reactive", suR, suK, suRSpeed, target))
	}
	fmt.Fprintln(b.out)
	loadMin, loadMax := loadRange(all)
	fmt.Fprintf(b.out, "rebalance benchmark: %d of %d run(s), totalReplicas %d, bound %s, kubefed at %s timings; seconds to all replicas Ready (failback: to the baseline); 1-min load average at the end of each measurement %.2f-%.2f on %d cores\n",
		runs, b.o.runs, b.o.total, b.o.bound, b.timings, loadMin, loadMax, runtime.NumCPU())
	if err := Table(b.out, []string{"SCENARIO", "FEDFAILOVER S (MEDIAN)", "P95", "KUBEFED ALONE S (MEDIAN)", "P95", "SPEEDUP",
		"MIN READY FEDFAILOVER", "MIN READY KUBEFED"}, rows); err != nil {
		return err
	}
	placed, beyondSecs, falseCaps := scaleUpCounts(all)
	if ran("scale-up") {
		fmt.Fprintf(b.out, "scale-up (to %d, then +%d into a filled member2): most replicas member2's Deployment wanted beyond what it held, per mode %v, for at most %v s; false caps of member2 while both had room, per mode %v\n",
			b.o.total+2, b.o.total, placed, beyondSecs, falseCaps)
	}
	goals := rbGoals(exF, exK, mfF, mfK, fbF, fbK, exSpeed)
	goals["scale_up_predictive"] = suP.p95 != nil && *suP.p95 <= 5 && falseCaps["predictive"] == 0
	// A goal of a scenario not run is left out, not reported as missed.
	goalScenario := map[string]string{"exhaustion": "exhaustion", "member_failure": "member-failure", "scale_up_predictive": "scale-up"}
	for g, sc := range goalScenario {
		if !ran(sc) {
			delete(goals, g)
		}
	}
	if !ran("exhaustion") || !ran("member-failure") {
		delete(goals, "min_ready")
	}
	var said []string
	for _, g := range []struct{ key, text string }{
		{"exhaustion", "exhaustion >= 3x faster than kubefed alone and <= 20 s"},
		{"member_failure", "member failure <= 30 s"},
		{"min_ready", "min Ready during failover and failback not below kubefed alone"},
		{"scale_up_predictive", "scale-up into a full member, predictive, <= 5 s without a false cap"},
	} {
		if ok, known := goals[g.key]; known {
			said = append(said, fmt.Sprintf("%s: %s", g.text, met(ok)))
		}
	}
	fmt.Fprintf(b.out, "goals: %s\n", strings.Join(said, "; "))
	return WriteJSON(b.out, map[string]any{
		"scenarios":                             b.o.scenarios,
		"load_average_1m_min":                   loadMin,
		"load_average_1m_max":                   loadMax,
		"cpus":                                  runtime.NumCPU(),
		"scale_up_seconds_predictive":           suP.median,
		"scale_up_seconds_predictive_p95":       suP.p95,
		"scale_up_seconds_reactive":             suR.median,
		"scale_up_seconds_reactive_p95":         suR.p95,
		"scale_up_seconds_kubefed":              suK.median,
		"scale_up_seconds_kubefed_p95":          suK.p95,
		"scale_up_placed_beyond_room":           placed,
		"scale_up_beyond_room_seconds":          beyondSecs,
		"scale_up_false_caps":                   falseCaps,
		"benchmark":                             "rebalance",
		"runs":                                  runs,
		"total_replicas":                        b.o.total,
		"bound_seconds":                         b.o.bound.Seconds(),
		"policy":                                rbBenchPolicy,
		"kubefed_timings":                       b.timings,
		"goals_met":                             goals,
		"failback_seconds":                      fbF.median,
		"failback_seconds_p95":                  fbF.p95,
		"failback_seconds_kubefed":              fbK.median,
		"failback_seconds_kubefed_p95":          fbK.p95,
		"failback_recovered_runs":               fbF.recovered,
		"failback_kubefed_recovered_runs":       fbK.recovered,
		"min_ready_failback_fedfailover":        readyOrNil(fbF.minReady),
		"min_ready_failback_kubefed":            readyOrNil(fbK.minReady),
		"exhaustion_seconds":                    exF.median,
		"exhaustion_seconds_p95":                exF.p95,
		"exhaustion_seconds_kubefed":            exK.median,
		"exhaustion_seconds_kubefed_p95":        exK.p95,
		"exhaustion_speedup_vs_kubefed":         exSpeed,
		"exhaustion_recovered_runs":             exF.recovered,
		"exhaustion_kubefed_recovered_runs":     exK.recovered,
		"member_failure_seconds":                mfF.median,
		"member_failure_seconds_p95":            mfF.p95,
		"member_failure_seconds_kubefed":        mfK.median,
		"member_failure_seconds_kubefed_p95":    mfK.p95,
		"member_failure_speedup_vs_kubefed":     mfSpeed,
		"member_failure_recovered":              mfF.recovered == runs,
		"member_failure_kubefed_recovered":      mfK.recovered == runs,
		"member_failure_kubefed_recovered_runs": mfK.recovered,
		"min_ready_fedfailover":                 min(exF.minReady, mfF.minReady),
		"min_ready_kubefed":                     min(exK.minReady, mfK.minReady),
		"min_ready_exhaustion_fedfailover":      exF.minReady,
		"min_ready_exhaustion_kubefed":          exK.minReady,
		"min_ready_member_failure_fedfailover":  mfF.minReady,
		"min_ready_member_failure_kubefed":      mfK.minReady,
		"measurements":                          all,
		"sample_interval_ms":                    rbSamplePace.Milliseconds(),
	})
}

// loadRange is the lowest and highest load average the measurements ended at.
func loadRange(all []rbMeasure) (lo, hi float64) {
	for i, m := range all {
		if i == 0 || m.LoadAvg1 < lo {
			lo = m.LoadAvg1
		}
		hi = max(hi, m.LoadAvg1)
	}
	return lo, hi
}

// scaleUpCounts are, per mode, the most replicas member2 was given beyond
// what it held when full and the longest it wanted them, and the false
// caps over all scale-up runs.
func scaleUpCounts(all []rbMeasure) (map[string]int32, map[string]float64, map[string]int) {
	placed, beyondSecs, falseCaps := map[string]int32{}, map[string]float64{}, map[string]int{}
	for _, m := range all {
		if m.Scenario != "scale-up" {
			continue
		}
		if m.PlacedBeyondRoom != nil {
			placed[m.Mode] = max(placed[m.Mode], *m.PlacedBeyondRoom)
		}
		if m.BeyondRoomSeconds != nil {
			beyondSecs[m.Mode] = max(beyondSecs[m.Mode], *m.BeyondRoomSeconds)
		}
		if m.FalseCaps != nil {
			falseCaps[m.Mode] += *m.FalseCaps
		}
	}
	return placed, beyondSecs, falseCaps
}

// rbGoals checks the benchmark's goals (p95 for the time bounds, so that
// every run but an outlier meets them; the lowest Ready of any run).
func rbGoals(exF, exK, mfF, mfK, fbF, fbK rbSummary, exSpeed *float64) map[string]bool {
	within := func(v *float64, limit float64) bool { return v != nil && *v <= limit }
	return map[string]bool{
		"exhaustion":     exSpeed != nil && *exSpeed >= 3 && within(exF.p95, 20),
		"member_failure": within(mfF.p95, 30),
		"min_ready": exF.minReady >= exK.minReady && mfF.minReady >= mfK.minReady &&
			fbF.minReady >= fbK.minReady && fbF.recovered > 0,
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// fmtReadyOf shows a lowest Ready count of total; "-" when nothing was
// sampled.
func fmtReadyOf(n int32, total int) string {
	if n == math.MaxInt32 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", n, total)
}

func readyOrNil(n int32) *int32 {
	if n == math.MaxInt32 {
		return nil
	}
	return &n
}
