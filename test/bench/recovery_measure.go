package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/test/lab"
)

// What the recovery benchmark measures (samples of the workload and its
// volume) and reports (per-run figures, median and p95, the table); the
// scenario that produces them is in recovery.go.

// rcRun is one powered-off node recovered by fedfailover. Offsets are
// seconds after power-off; the *ToRunning fields are nil when the
// replacement was not Running within the bound.
type rcRun struct {
	Run int `json:"run"`
	// Detection is the policy's spec.nodeRecovery.detection in this run.
	Detection              v1alpha1.NodeLossDetection `json:"detection"`
	Node                   string                     `json:"node"`
	ReplacementNode        string                     `json:"replacement_node,omitempty"`
	EvidenceWrittenSeconds float64                    `json:"evidence_written_after_poweroff_seconds"`
	NotReadySeconds        *float64                   `json:"not_ready_observed_after_poweroff_seconds"`
	LostSeconds            *float64                   `json:"lost_after_poweroff_seconds"`
	TaintSeconds           *float64                   `json:"taint_observed_after_poweroff_seconds"`
	// TaintedWhileReady says whether the Node still reported Ready=True
	// when the taint was first observed (nil: no taint observed).
	TaintedWhileReady *bool `json:"tainted_while_ready"`
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

func rcFmtBool(v *bool) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// rcFigure is one row of the table and a pair of JSON keys
// (<Key>_median_seconds, <Key>_p95_seconds) per detection.
type rcFigure struct {
	Label string
	Key   string
	Get   func(rcRun) *float64
	// Observed: runs may end before the figure is seen (power-off ->
	// NotReady in an Evidence run), so a figure no run has shows "-"
	// instead of "not recovered".
	Observed bool
}

var rcFigures = []rcFigure{
	{Label: "(a) evidence -> replacement Running", Key: "evidence_to_running", Get: func(r rcRun) *float64 { return r.EvidenceToRunningSeconds }},
	{Label: "(b) power-off -> replacement Running", Key: "poweroff_to_running", Get: func(r rcRun) *float64 { return r.PoweroffToRunningSeconds }},
	{Label: "    power-off -> taint", Key: "poweroff_to_taint", Get: func(r rcRun) *float64 { return r.TaintSeconds }},
	{Label: "    evidence -> taint", Key: "evidence_to_taint", Get: func(r rcRun) *float64 { return r.EvidenceToTaintSeconds }},
	{Label: "    evidence -> old pod gone", Key: "evidence_to_old_pod_gone", Get: func(r rcRun) *float64 { return r.OldPodGoneSeconds }},
	{Label: "    evidence -> old attachment gone", Key: "evidence_to_old_attachment_gone", Get: func(r rcRun) *float64 { return r.OldAttachmentGoneSeconds }},
	{Label: "    evidence -> volume attached to new node", Key: "evidence_to_volume_attached", Get: func(r rcRun) *float64 { return r.AttachedSeconds }},
	{Label: "    power-off -> NotReady (lab)", Key: "poweroff_to_not_ready", Get: func(r rcRun) *float64 { return r.NotReadySeconds }, Observed: true},
}

// rcCells are a figure's median and p95 cells over a detection's runs.
func rcCells(f rcFigure, runs []rcRun) (median, p95 string) {
	med, p, n := rcStats(runs, f.Get)
	switch {
	case len(runs) == 0:
		return "-", "-"
	case med != nil:
		return Seconds(*med), Seconds(*p)
	case f.Observed && n == 0:
		return "-", "-"
	case f.Observed:
		return fmt.Sprintf("seen in %d/%d runs", n, len(runs)), "-"
	}
	label := fmt.Sprintf("not recovered (%d/%d runs)", n, len(runs))
	return label, label
}

// rcTaintedWhileReady counts the runs whose taint was first observed while
// the Node still reported Ready=True, of those with a taint.
func rcTaintedWhileReady(runs []rcRun) (ready, tainted int) {
	for _, r := range runs {
		if r.TaintedWhileReady != nil {
			tainted++
			if *r.TaintedWhileReady {
				ready++
			}
		}
	}
	return ready, tainted
}

// rcByDetection splits the runs by detection, in the order of detections.
func rcByDetection(detections []v1alpha1.NodeLossDetection, runs []rcRun) [][]rcRun {
	out := make([][]rcRun, len(detections))
	for _, r := range runs {
		if i := slices.Index(detections, r.Detection); i >= 0 {
			out[i] = append(out[i], r)
		}
	}
	return out
}

// rcTable is the report's table: a median and a p95 column per detection,
// then the no-operator baseline.
func rcTable(detections []v1alpha1.NodeLossDetection, runs []rcRun, base *rcBaseline) (header []string, rows [][]string) {
	header = []string{"FIGURE"}
	for _, d := range detections {
		header = append(header, strings.ToUpper(string(d))+" S (MEDIAN)", "P95")
	}
	header = append(header, "NO OPERATOR (BASELINE)")
	baseCol, manualCol := "-", "-"
	if base != nil {
		if base.Recovered && base.PoweroffToRunning != nil {
			baseCol = Seconds(*base.PoweroffToRunning)
		} else {
			baseCol = fmt.Sprintf("not recovered (stuck %.0fs)", base.ObservedStuckSeconds)
		}
		if base.ManualTaintToRunning != nil {
			manualCol = Seconds(*base.ManualTaintToRunning) + " (taint by hand)"
		}
	}
	groups := rcByDetection(detections, runs)
	for i, f := range rcFigures {
		row := []string{f.Label}
		for _, g := range groups {
			med, p := rcCells(f, g)
			row = append(row, med, p)
		}
		switch i {
		case 0:
			row = append(row, manualCol)
		case 1:
			row = append(row, baseCol)
		default:
			row = append(row, "-")
		}
		rows = append(rows, row)
	}
	row := []string{"    tainted while Ready=True (runs)"}
	for _, g := range groups {
		ready, tainted := rcTaintedWhileReady(g)
		row = append(row, fmt.Sprintf("%d/%d", ready, tainted), "-")
	}
	return header, append(rows, append(row, "-"))
}

// rcResult is the JSON of one detection's runs: each figure's median and
// p95, the goal where it applies, the runs themselves.
func rcResult(d v1alpha1.NodeLossDetection, runs []rcRun, notReadyFor time.Duration) map[string]any {
	out := map[string]any{"detection": d, "runs": len(runs), "policy": rcPolicySpec(notReadyFor, d), "measurements": runs}
	for _, f := range rcFigures {
		med, p, _ := rcStats(runs, f.Get)
		out[f.Key+"_median_seconds"], out[f.Key+"_p95_seconds"] = med, p
	}
	_, _, n := rcStats(runs, func(r rcRun) *float64 { return r.EvidenceToRunningSeconds })
	ready, tainted := rcTaintedWhileReady(runs)
	out["recovered_runs"], out["tainted_runs"], out["tainted_while_ready_runs"] = n, tainted, ready
	if met, ok := rcGoalMet(d, runs); ok {
		out["goal_evidence_to_running_p95_seconds"], out["goal_met"] = rcGoalP95, met
	}
	return out
}

// rcGoalMet judges issue 5's goal, (a) p95 <= 5 s: what fedfailover adds
// once it may act. It applies to NotReady runs only (ok false otherwise):
// an Evidence run's (a) starts at the Machine evidence and includes the
// kubelet Lease's silence window.
func rcGoalMet(d v1alpha1.NodeLossDetection, runs []rcRun) (met, ok bool) {
	if d != v1alpha1.NodeLossDetectionNotReady {
		return false, false
	}
	_, p, _ := rcStats(runs, func(r rcRun) *float64 { return r.EvidenceToRunningSeconds })
	return p != nil && *p <= rcGoalP95, true
}

func (b *rcBench) report(runs []rcRun, base *rcBaseline) error {
	header, rows := rcTable(b.o.detections, runs, base)
	fmt.Fprintln(b.out)
	fmt.Fprintf(b.out, "node recovery benchmark: %d run(s) per detection, notReadyFor %s, fencing machineInfrastructureDeleted, method Auto; "+
		"node monitor grace period %s, kubelet Lease %ds (silence window %s); seconds, sampled every %s\n",
		b.o.runs, b.o.notReadyFor, b.o.grace, b.o.leaseSeconds, fencing.SilenceWindow(time.Duration(b.o.leaseSeconds)*time.Second), rcSamplePace)
	if err := Table(b.out, header, rows); err != nil {
		return err
	}
	results := map[string]any{}
	for i, g := range rcByDetection(b.o.detections, runs) {
		d := b.o.detections[i]
		results[string(d)] = rcResult(d, g, b.o.notReadyFor)
		if met, ok := rcGoalMet(d, g); ok {
			fmt.Fprintf(b.out, "goal: %s (a) p95 <= %.0f s: %s\n", d, rcGoalP95, map[bool]string{true: "met", false: "MISSED"}[met])
		}
	}
	var baseRecovered *bool
	var baseManual *float64
	if base != nil {
		baseRecovered, baseManual = ptr.To(base.Recovered), base.ManualTaintToRunning
	}
	return WriteJSON(b.out, map[string]any{
		"benchmark":                                "recovery",
		"detections":                               b.o.detections,
		"runs_per_detection":                       b.o.runs,
		"not_ready_for_seconds":                    b.o.notReadyFor.Seconds(),
		"node_monitor_grace_period_seconds":        b.o.grace.Seconds(),
		"node_lease_seconds":                       b.o.leaseSeconds,
		"lease_silence_window_seconds":             fencing.SilenceWindow(time.Duration(b.o.leaseSeconds) * time.Second).Seconds(),
		"bound_seconds":                            b.o.bound.Seconds(),
		"results":                                  results,
		"baseline_recovered":                       baseRecovered,
		"baseline":                                 base,
		"baseline_bound_seconds":                   b.o.baselineBound.Seconds(),
		"baseline_manual_taint_to_running_seconds": baseManual,
		"sample_interval_ms":                       rcSamplePace.Milliseconds(),
	})
}
