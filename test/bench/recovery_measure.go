package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/lab"
)

// What the recovery benchmark measures (samples of the workload and its
// volume) and reports (per-run figures, median and p95, the table); the
// scenario that produces them is in recovery.go.

// rcRun is one powered-off node recovered by fedfailover. Offsets are
// seconds after power-off; the *ToRunning fields are nil when the
// replacement was not Running within the bound.
type rcRun struct {
	Run                    int      `json:"run"`
	Node                   string   `json:"node"`
	ReplacementNode        string   `json:"replacement_node,omitempty"`
	EvidenceWrittenSeconds float64  `json:"evidence_written_after_poweroff_seconds"`
	NotReadySeconds        *float64 `json:"not_ready_observed_after_poweroff_seconds"`
	LostSeconds            *float64 `json:"lost_after_poweroff_seconds"`
	TaintSeconds           *float64 `json:"taint_observed_after_poweroff_seconds"`
	// Record is the node's NodeRecovery; ActedAt its status.actedAt (when
	// fedfailover acted, by the host's clock, whole seconds); ActedSeconds
	// the same after power-off.
	Record                 string   `json:"record,omitempty"`
	ActedAt                string   `json:"acted_at,omitempty"`
	ActedSeconds           *float64 `json:"acted_after_poweroff_seconds"`
	PowerOffAt             string   `json:"poweroff_at"`
	EvidenceToTaintSeconds *float64 `json:"evidence_to_taint_seconds"`
	// Where the time after fencing goes, as first observed (seconds after
	// the evidence was complete): the old pod object gone, its attachment
	// to the dead node gone, the replacement bound to a node, the volume
	// attached there.
	OldPodGoneSeconds        *float64 `json:"evidence_to_old_pod_gone_seconds"`
	OldAttachmentGoneSeconds *float64 `json:"evidence_to_old_attachment_gone_seconds"`
	ScheduledSeconds         *float64 `json:"evidence_to_replacement_scheduled_seconds"`
	AttachedSeconds          *float64 `json:"evidence_to_volume_attached_seconds"`
	EvidenceToRunningSeconds *float64 `json:"evidence_to_running_seconds"`
	PoweroffToRunningSeconds *float64 `json:"poweroff_to_running_seconds"`
}

// rcBaseline is the same fault with no operator running.
type rcBaseline struct {
	Node                  string   `json:"node"`
	Recovered             bool     `json:"recovered"`
	PoweroffToRunning     *float64 `json:"poweroff_to_running_seconds"`
	ObservedStuckSeconds  float64  `json:"observed_stuck_seconds"`
	PodState              string   `json:"pod_state"`
	ManualTaintToRunning  *float64 `json:"manual_taint_to_running_seconds"`
	ManualTaintRecovered  bool     `json:"manual_taint_recovered"`
	ManualTaintAfterStuck float64  `json:"manual_taint_after_poweroff_seconds"`
}

// replacement reports whether the workload's pod is Ready on a node other
// than notOn with its claim's volume attached to that node and nowhere else.
func (b *rcBench) replacement(ctx context.Context, ns, notOn string) (pod *corev1.Pod, pv string, ok bool, why string, err error) {
	pods := &corev1.PodList{}
	if err := b.member.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": rcWorkload}); err != nil {
		return nil, "", false, err.Error(), err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !lab.PodReady(p) || p.Spec.NodeName == notOn {
			why = fmt.Sprintf("%s %s on %q deleting=%v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil)
			continue
		}
		pod = p
	}
	if pod == nil {
		if why == "" {
			why = "no pod"
		}
		return nil, "", false, why, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := b.member.Get(ctx, client.ObjectKey{Namespace: ns, Name: lab.VolumeTemplateName + "-" + pod.Name}, pvc); err != nil {
		return nil, "", false, err.Error(), err
	}
	pv = pvc.Spec.VolumeName
	vas := &storagev1.VolumeAttachmentList{}
	if err := b.member.List(ctx, vas); err != nil {
		return nil, "", false, err.Error(), err
	}
	var attached, all []string
	for _, va := range vas.Items {
		if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv {
			continue
		}
		all = append(all, va.Spec.NodeName)
		if va.Status.Attached {
			attached = append(attached, va.Spec.NodeName)
		}
	}
	want := []string{pod.Spec.NodeName}
	if !slices.Equal(attached, want) || !slices.Equal(all, want) {
		return nil, "", false, fmt.Sprintf("pod Ready on %s, volume %s attached to %v, attachments for %v", pod.Spec.NodeName, pv, attached, all), nil
	}
	return pod, pv, true, "", nil
}

// podState describes the workload's pods for the report.
func (b *rcBench) podState(ctx context.Context, ns string) string {
	pods := &corev1.PodList{}
	if err := b.member.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	s := ""
	for _, p := range pods.Items {
		st := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			st = "Terminating"
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %s on %s", p.Name, st, p.Spec.NodeName)
	}
	return s
}

// waitRunning samples until the replacement is Running off node or the
// deadline passes (ok false).
func (b *rcBench) waitRunning(ctx context.Context, ns, node, pv string, deadline time.Time) (bool, error) {
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		smp, err := b.sample(sctx, ns, node, pv)
		cancel()
		if err == nil && smp.running != "" {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(rcSamplePace):
		}
	}
}

// rcSample is one look at the workload and its volume: one pod list and
// one VolumeAttachment list, so that sampling every 100 ms stays light.
type rcSample struct {
	oldPod    bool   // a pod of the workload is still bound to the old node
	scheduled string // a pod is bound to another node
	running   string // that pod is Ready and the volume is attached there and nowhere else
	oldVA     bool   // the volume still has an attachment to the old node
	attached  bool   // the volume is attached to another node
}

func (b *rcBench) sample(ctx context.Context, ns, node, pv string) (rcSample, error) {
	var s rcSample
	pods := &corev1.PodList{}
	if err := b.member.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": rcWorkload}); err != nil {
		return s, err
	}
	vas := &storagev1.VolumeAttachmentList{}
	if err := b.member.List(ctx, vas); err != nil {
		return s, err
	}
	var ready string
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Spec.NodeName == node:
			s.oldPod = true
		case p.Spec.NodeName != "":
			s.scheduled = p.Spec.NodeName
			if lab.PodReady(p) {
				ready = p.Spec.NodeName
			}
		}
	}
	var attached, all []string
	for _, va := range vas.Items {
		if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv {
			continue
		}
		all = append(all, va.Spec.NodeName)
		if va.Spec.NodeName == node {
			s.oldVA = true
		}
		if va.Status.Attached {
			attached = append(attached, va.Spec.NodeName)
			if va.Spec.NodeName != node {
				s.attached = true
			}
		}
	}
	if ready != "" && slices.Equal(attached, []string{ready}) && slices.Equal(all, []string{ready}) {
		s.running = ready
	}
	return s, nil
}

func rcRound3(v float64) float64 { return math.Round(v*1000) / 1000 }

func rcFmt(v *float64) string {
	if v == nil {
		return "not recovered"
	}
	return fmt.Sprintf("%.1fs", *v)
}

// rcStats is the median and p95 of one figure over all runs; both nil when
// any run lacks it (a median over only the runs that recovered would hide
// the others).
func rcStats(runs []rcRun, get func(rcRun) *float64) (median, p95 *float64, n int) {
	var xs []float64
	for _, r := range runs {
		if v := get(r); v != nil {
			xs = append(xs, *v)
		}
	}
	if len(runs) == 0 || len(xs) != len(runs) {
		return nil, nil, len(xs)
	}
	return ptr.To(round1(Median(xs))), ptr.To(round1(P95(xs))), len(xs)
}

func (b *rcBench) report(runs []rcRun, base *rcBaseline) error {
	evMed, evP95, evN := rcStats(runs, func(r rcRun) *float64 { return r.EvidenceToRunningSeconds })
	poMed, poP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.PoweroffToRunningSeconds })
	tMed, tP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.EvidenceToTaintSeconds })
	nrMed, nrP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.NotReadySeconds })
	goneMed, goneP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.OldPodGoneSeconds })
	vaMed, vaP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.OldAttachmentGoneSeconds })
	attMed, attP95, _ := rcStats(runs, func(r rcRun) *float64 { return r.AttachedSeconds })
	sec := func(v *float64) string {
		if v == nil {
			return fmt.Sprintf("not recovered (%d/%d runs)", evN, len(runs))
		}
		return Seconds(*v)
	}
	baseCol := "-"
	var baseManual *float64
	var baseRecovered *bool
	if base != nil {
		baseRecovered = ptr.To(base.Recovered)
		if base.Recovered {
			baseCol = Seconds(*base.PoweroffToRunning)
		} else {
			baseCol = fmt.Sprintf("not recovered (stuck %.0fs)", base.ObservedStuckSeconds)
		}
		baseManual = base.ManualTaintToRunning
	}
	manualCol := "-"
	if baseManual != nil {
		manualCol = Seconds(*baseManual) + " (taint by hand)"
	}
	fmt.Fprintln(b.out)
	fmt.Fprintf(b.out, "node recovery benchmark: %d run(s), notReadyFor %s, fencing machineInfrastructureDeleted, method Auto; seconds, sampled every %s\n",
		len(runs), b.o.notReadyFor, rcSamplePace)
	if err := Table(b.out, []string{"FIGURE", "FEDFAILOVER S (MEDIAN)", "P95", "NO OPERATOR (BASELINE)"}, [][]string{
		{"(a) evidence -> replacement Running", sec(evMed), sec(evP95), manualCol},
		{"(b) power-off -> replacement Running", sec(poMed), sec(poP95), baseCol},
		{"    evidence -> taint (fedfailover)", sec(tMed), sec(tP95), "-"},
		{"    evidence -> old pod gone", sec(goneMed), sec(goneP95), "-"},
		{"    evidence -> old attachment gone", sec(vaMed), sec(vaP95), "-"},
		{"    evidence -> volume attached to new node", sec(attMed), sec(attP95), "-"},
		{"    power-off -> NotReady (lab)", sec(nrMed), sec(nrP95), "-"},
	}); err != nil {
		return err
	}
	goalMet := evP95 != nil && *evP95 <= rcGoalP95
	fmt.Fprintf(b.out, "goal: (a) p95 <= %.0f s: %s\n", rcGoalP95, map[bool]string{true: "met", false: "MISSED"}[goalMet])
	return WriteJSON(b.out, map[string]any{
		"benchmark":                                "recovery",
		"runs":                                     len(runs),
		"not_ready_for_seconds":                    b.o.notReadyFor.Seconds(),
		"bound_seconds":                            b.o.bound.Seconds(),
		"policy":                                   b.policy(),
		"evidence_to_running_median_seconds":       evMed,
		"evidence_to_running_p95_seconds":          evP95,
		"poweroff_to_running_median_seconds":       poMed,
		"poweroff_to_running_p95_seconds":          poP95,
		"evidence_to_taint_median_seconds":         tMed,
		"evidence_to_taint_p95_seconds":            tP95,
		"poweroff_to_not_ready_median_seconds":     nrMed,
		"recovered_runs":                           evN,
		"goal_evidence_to_running_p95_seconds":     rcGoalP95,
		"goal_met":                                 goalMet,
		"baseline_recovered":                       baseRecovered,
		"baseline":                                 base,
		"baseline_bound_seconds":                   b.o.baselineBound.Seconds(),
		"baseline_manual_taint_to_running_seconds": baseManual,
		"measurements":                             runs,
		"sample_interval_ms":                       rcSamplePace.Milliseconds(),
	})
}
