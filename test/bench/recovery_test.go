package bench

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

const (
	ev = v1alpha1.NodeLossDetectionEvidence
	nr = v1alpha1.NodeLossDetectionNotReady
)

func TestRecoveryParseDetection(t *testing.T) {
	for in, want := range map[string][]v1alpha1.NodeLossDetection{
		"": {ev, nr}, "both": {ev, nr}, "Both": {ev, nr},
		"Evidence": {ev}, "evidence": {ev}, "NotReady": {nr}, "notready": {nr},
	} {
		got, err := rcParseDetection(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("rcParseDetection(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := rcParseDetection("Ready"); err == nil || !strings.Contains(err.Error(), "Evidence, NotReady or both") {
		t.Errorf("an unknown detection: %v", err)
	}
}

func TestRecoveryOptionsValidate(t *testing.T) {
	good := func() rcOptions {
		return rcOptions{runs: 5, nodes: 3, grace: rcDefaultGrace, leaseSeconds: rcDefaultLeaseSeconds, detection: rcBoth}
	}
	o := good()
	if err := o.validate(); err != nil || !reflect.DeepEqual(o.detections, []v1alpha1.NodeLossDetection{ev, nr}) {
		t.Fatalf("defaults: %v, detections %v", err, o.detections)
	}
	for name, c := range map[string]struct {
		mutate func(*rcOptions)
		want   string
	}{
		"no runs":            {func(o *rcOptions) { o.runs = 0 }, "--runs"},
		"two nodes":          {func(o *rcOptions) { o.nodes = 2 }, "--nodes"},
		"short lease":        {func(o *rcOptions) { o.leaseSeconds = 3 }, "--node-lease-seconds"},
		"grace within renew": {func(o *rcOptions) { o.grace = 10 * time.Second }, "must exceed the Lease renew interval 10s"},
		"unknown detection":  {func(o *rcOptions) { o.detection = "Lease" }, "--detection"},
	} {
		o := good()
		c.mutate(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, c.want)
		}
	}
	// The lab's own timings stay possible.
	o = good()
	o.grace, o.leaseSeconds = 16*time.Second, 8
	if err := o.validate(); err != nil {
		t.Errorf("lab timings: %v", err)
	}
}

func TestRecoveryScheduleAlternates(t *testing.T) {
	got := rcSchedule([]v1alpha1.NodeLossDetection{ev, nr}, 2)
	want := []rcSlot{{ev, 1}, {nr, 1}, {ev, 2}, {nr, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("both: %v, want %v", got, want)
	}
	if got := rcSchedule([]v1alpha1.NodeLossDetection{nr}, 3); !reflect.DeepEqual(got, []rcSlot{{nr, 1}, {nr, 2}, {nr, 3}}) {
		t.Errorf("NotReady only: %v", got)
	}
}

func TestRecoveryFigureStart(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	evidence, lost := t0.Add(time.Second), t0.Add(60*time.Second)
	for _, c := range []struct {
		name           string
		d              v1alpha1.NodeLossDetection
		evidence, lost time.Time
		want           time.Time
	}{
		{"Evidence starts at the Machine evidence", ev, evidence, lost, evidence},
		{"Evidence needs no NotReady", ev, evidence, time.Time{}, evidence},
		{"NotReady starts when the node is lost", nr, evidence, lost, lost},
		{"NotReady, evidence written after the loss", nr, lost.Add(time.Second), lost, lost.Add(time.Second)},
		{"NotReady never seen: no start", nr, evidence, time.Time{}, time.Time{}},
	} {
		if got := rcFigureStart(c.d, c.evidence, c.lost); !got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// Two Evidence runs tainted while Ready, over before NotReady; two NotReady
// runs, one not recovered within the bound.
func recoveryRuns() []rcRun {
	f := func(v float64) *float64 { return ptr.To(v) }
	return []rcRun{
		{Run: 1, Detection: ev, TaintSeconds: f(15.2), TaintedWhileReady: ptr.To(true), EvidenceToTaintSeconds: f(15.0),
			EvidenceToRunningSeconds: f(16.5), PoweroffToRunningSeconds: f(16.7), OldPodGoneSeconds: f(15.1),
			OldAttachmentGoneSeconds: f(15.4), AttachedSeconds: f(16.0)},
		{Run: 1, Detection: nr, NotReadySeconds: f(52.0), TaintSeconds: f(62.5), TaintedWhileReady: ptr.To(false),
			EvidenceToTaintSeconds: f(0.2), EvidenceToRunningSeconds: f(1.4), PoweroffToRunningSeconds: f(63.7),
			OldPodGoneSeconds: f(0.3), OldAttachmentGoneSeconds: f(0.5), AttachedSeconds: f(1.0)},
		{Run: 2, Detection: ev, TaintSeconds: f(17.0), TaintedWhileReady: ptr.To(true), EvidenceToTaintSeconds: f(16.8),
			EvidenceToRunningSeconds: f(18.1), PoweroffToRunningSeconds: f(18.3), OldPodGoneSeconds: f(16.9),
			OldAttachmentGoneSeconds: f(17.2), AttachedSeconds: f(17.6)},
		{Run: 2, Detection: nr, NotReadySeconds: f(55.0)},
	}
}

func TestRecoveryTable(t *testing.T) {
	base := &rcBaseline{Recovered: false, ObservedStuckSeconds: 120.2, ManualTaintToRunning: ptr.To(13.4)}
	header, rows := rcTable([]v1alpha1.NodeLossDetection{ev, nr}, recoveryRuns(), base)
	wantHeader := []string{"FIGURE", "EVIDENCE S (MEDIAN)", "P95", "NOTREADY S (MEDIAN)", "P95", "NO OPERATOR (BASELINE)"}
	if !reflect.DeepEqual(header, wantHeader) {
		t.Fatalf("header %v, want %v", header, wantHeader)
	}
	notRecovered := "not recovered (1/2 runs)"
	want := map[string][]string{
		"(a) evidence -> replacement Running":  {"17.3", "18.1", notRecovered, notRecovered, "13.4 (taint by hand)"},
		"(b) power-off -> replacement Running": {"17.5", "18.3", notRecovered, notRecovered, "not recovered (stuck 120s)"},
		"    power-off -> taint":               {"16.1", "17.0", notRecovered, notRecovered, "-"},
		"    evidence -> taint":                {"15.9", "16.8", notRecovered, notRecovered, "-"},
		"    power-off -> NotReady (lab)":      {"-", "-", "53.5", "55.0", "-"},
		"    tainted while Ready=True (runs)":  {"2/2", "-", "0/1", "-", "-"},
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) != len(header) {
			t.Errorf("row %v has %d cells, want %d", r, len(r), len(header))
		}
		if w, ok := want[r[0]]; ok {
			seen[r[0]] = true
			if !reflect.DeepEqual(r[1:], w) {
				t.Errorf("%q: %v, want %v", r[0], r[1:], w)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("rows %v lack some of %v", rows, want)
	}

	// One detection, no baseline: a median and p95 column, then "-".
	header, rows = rcTable([]v1alpha1.NodeLossDetection{nr}, recoveryRuns()[1:2], nil)
	if len(header) != 4 || header[1] != "NOTREADY S (MEDIAN)" || rows[0][1] != "1.4" || rows[0][3] != "-" {
		t.Errorf("NotReady only: %v %v", header, rows[0])
	}
}

func TestRecoveryObservedFigure(t *testing.T) {
	nrRow := rcFigures[len(rcFigures)-1]
	if !nrRow.Observed {
		t.Fatal("power-off -> NotReady must be an observed figure")
	}
	runs := recoveryRuns()[:1]
	runs = append(runs, rcRun{Detection: ev, NotReadySeconds: ptr.To(50.0)})
	if med, p := rcCells(nrRow, runs); med != "seen in 1/2 runs" || p != "-" {
		t.Errorf("partly seen: %q %q", med, p)
	}
	if med, p := rcCells(nrRow, nil); med != "-" || p != "-" {
		t.Errorf("no runs: %q %q", med, p)
	}
}

func TestRecoveryResultJSON(t *testing.T) {
	runs := recoveryRuns()
	groups := rcByDetection([]v1alpha1.NodeLossDetection{ev, nr}, runs)
	if len(groups[0]) != 2 || len(groups[1]) != 2 || groups[0][1].Run != 2 {
		t.Fatalf("groups %v", groups)
	}
	e := rcResult(ev, groups[0], 10*time.Second)
	if *e["evidence_to_running_median_seconds"].(*float64) != 17.3 || *e["poweroff_to_taint_p95_seconds"].(*float64) != 17.0 ||
		e["tainted_while_ready_runs"] != 2 || e["recovered_runs"] != 2 {
		t.Errorf("Evidence result: %v", e)
	}
	if _, ok := e["goal_met"]; ok {
		t.Errorf("the goal judged on Evidence runs: %v", e)
	}
	if p := e["policy"].(*v1alpha1.NodeRecoverySpec); p.Detection != ev || p.NotReadyFor != "10s" {
		t.Errorf("Evidence policy %+v", p)
	}
	n := rcResult(nr, groups[1], 10*time.Second)
	if n["goal_met"] != false || n["evidence_to_running_median_seconds"].(*float64) != nil || n["recovered_runs"] != 1 {
		t.Errorf("NotReady result: %v", n)
	}
	if met, ok := rcGoalMet(nr, groups[1][:1]); !ok || !met {
		t.Errorf("NotReady run of 1.4 s: goal met %v ok %v", met, ok)
	}
	data, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"evidence_to_running_p95_seconds":null`, `"detection":"NotReady"`, `"tainted_while_ready":false`,
		`"poweroff_to_not_ready_median_seconds":53.5`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("JSON lacks %s: %s", key, data)
		}
	}
}
