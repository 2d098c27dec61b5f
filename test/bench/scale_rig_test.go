package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

func TestPlanChurnRates(t *testing.T) {
	// The goal size: 6,000 bulk nodes, 60,000 pods.
	p := planChurn(churnRates{NodeStatusEvery: 5 * time.Minute, PodPercentPerMin: 1, ScalePerMin: 2}, 6000, 60000)
	if math.Abs(p.NodeStatusPerSecond-20) > 1e-9 || p.NodeInterval != 50*time.Millisecond {
		t.Errorf("node status: %.3f/s every %s, want 20/s every 50ms (6,000 nodes once per 5 min)", p.NodeStatusPerSecond, p.NodeInterval)
	}
	if math.Abs(p.PodReplacedPerSec-10) > 1e-9 || p.PodInterval != 100*time.Millisecond {
		t.Errorf("pods: %.3f/s every %s, want 10/s every 100ms (1 %% of 60,000 per minute)", p.PodReplacedPerSec, p.PodInterval)
	}
	if p.ScaleInterval != 30*time.Second {
		t.Errorf("scale events every %s, want 30s", p.ScaleInterval)
	}
	off := planChurn(churnRates{}, 6000, 60000)
	if off.NodeInterval != 0 || off.PodInterval != 0 || off.ScaleInterval != 0 {
		t.Errorf("zero rates must turn the streams off: %+v", off)
	}
	if intervalFor(math.Inf(1)) != 0 || intervalFor(-1) != 0 {
		t.Error("an impossible rate must turn a stream off")
	}
}

// Over one period every node reports exactly once, and each member's share
// is spread over the period rather than sent in one burst.
func TestChurnSpreadsNodeStatusEvenly(t *testing.T) {
	const members, nodes = 3, 4
	var lists [][]string
	for m := 0; m < members; m++ {
		var l []string
		for i := 0; i < nodes; i++ {
			l = append(l, lab.MemberName(m+1)+"-"+string(rune('a'+i)))
		}
		lists = append(lists, l)
	}
	order := interleave(lists)
	if len(order) != members*nodes {
		t.Fatalf("%d in the order, want %d", len(order), members*nodes)
	}
	seen := map[string]bool{}
	for i, n := range order {
		if seen[n] {
			t.Errorf("%s twice in one period", n)
		}
		seen[n] = true
		if want := lab.MemberName(i%members + 1); !strings.HasPrefix(n, want+"-") {
			t.Errorf("position %d is %s, want a node of %s (members take turns)", i, n, want)
		}
	}
	p := planChurn(churnRates{NodeStatusEvery: 5 * time.Minute}, members*nodes, 0)
	start := time.Unix(0, 0)
	if got := opAt(start, p.NodeInterval, len(order)).Sub(start); got != 5*time.Minute {
		t.Errorf("the period's last report is due %s after the first, want 5m", got)
	}
	if uneven := interleave([][]int{{1, 2, 3}, {4}}); len(uneven) != 4 || uneven[1] != 4 {
		t.Errorf("lists of unequal length: %v", uneven)
	}
}

func TestJudgeValidity(t *testing.T) {
	ok := []scHealthSample{{Offset: 0, Load1: 1.2}, {Offset: 5 * time.Second, Load1: 1.5}}
	if v := judgeValidity(ok, 1.5, time.Second, scMaxChurnLag); !v.Valid || v.MaxLoad1 != 1.5 || len(v.Reasons) != 0 {
		t.Errorf("load at the limit, probes fine: %+v, want valid", v)
	}
	loaded := []scHealthSample{{Offset: 0, Load1: 1.2}, {Offset: 10 * time.Second, Load1: 1.8}, {Offset: 15 * time.Second, Load1: 2.4}}
	v := judgeValidity(loaded, 1.5, 0, scMaxChurnLag)
	if v.Valid || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], "2.40 above 1.50 (first 10s") {
		t.Errorf("over the load limit: %+v", v)
	}
	slow := []scHealthSample{
		{Offset: 0, Load1: 0.5, Slow: map[string]string{"member2": "answered after 1.2s"}},
		{Offset: 5 * time.Second, Load1: 0.5, Slow: map[string]string{"member2": "timeout", "member1": "timeout"}},
	}
	v = judgeValidity(slow, 1.5, 0, scMaxChurnLag)
	if v.Valid || v.SlowProbes != 3 || len(v.Reasons) != 2 ||
		!strings.HasPrefix(v.Reasons[0], "member1 ") || !strings.Contains(v.Reasons[1], "member2 did not answer a probe within 1s in 2 of 2 samples (first 0s into the window: answered after 1.2s)") {
		t.Errorf("slow members: %+v", v)
	}
	if v := judgeValidity(nil, 1.5, 0, scMaxChurnLag); v.Valid {
		t.Error("a window without a health sample is valid")
	}
	if v := judgeValidity(ok, 1.5, 11*time.Second, scMaxChurnLag); v.Valid || !strings.Contains(v.Reasons[0], "churn driver fell 11.0s behind") {
		t.Errorf("churn lag: %+v", v)
	}
}

func TestRigCostByPart(t *testing.T) {
	s := func(cluster, comp string, cpuSec float64, rssMB int64) procSample {
		return procSample{cluster: cluster, component: comp, cpu1: time.Duration(cpuSec * float64(time.Second)), rss: rssMB << 20}
	}
	samples := []procSample{
		s(lab.HostName, lab.CompEtcd, 10, 100),
		s(lab.HostName, lab.CompAPIServer, 5, 300),
		s("member1", lab.CompAPIServer, 2, 200), s("member1", lab.CompKCM, 1, 50),
		s("member2", lab.CompAPIServer, 4, 300), s("member2", lab.CompKCM, 1, 50),
	}
	bench := s("", "", 3, 40)
	c := rigCost(samples, bench, 100, true)
	if c.SharedEtcd == nil || c.SharedEtcd.CPUPercent != 10 || c.Host.CPUPercent != 5 || c.Host.RSSMB != 300 {
		t.Errorf("host %+v, shared etcd %+v: the shared etcd is its own part", c.Host, c.SharedEtcd)
	}
	if c.MemberMean.CPUPercent != 4 || c.MemberMean.RSSMB != 300 || c.MemberMax.CPUPercent != 5 || c.MemberMax.RSSMB != 350 {
		t.Errorf("members mean %+v max %+v, want 4 %% / 300 MB and 5 %% / 350 MB", c.MemberMean, c.MemberMax)
	}
	if c.Rig.CPUPercent != 26 || c.Bench.CPUPercent != 3 {
		t.Errorf("rig %+v bench %+v: the rig is every lab process plus the bench", c.Rig, c.Bench)
	}
	if api, kcm := c.Components[lab.CompAPIServer], c.Components[lab.CompKCM]; api.CPUPercent != 3 || api.RSSMB != 250 || kcm.CPUPercent != 1 || len(c.Components) != 2 {
		t.Errorf("components %+v: want the members' API servers at 3 %% / 250 MB and controller-managers at 1 %% on average, the host's left out", c.Components)
	}
	own := rigCost(samples, bench, 100, false)
	if own.SharedEtcd != nil || own.Host.CPUPercent != 15 {
		t.Errorf("without a shared etcd the host's etcd is the host's: %+v", own.Host)
	}
}

// An INVALID run's JSON has no figure of the manager's, and every target
// says INVALID.
func TestInvalidRunHasNoFigures(t *testing.T) {
	r := &scResult{PodsTotal: 60000, RSSAfterSyncMB: 250, CPUPercent: 1, SyncSeconds: 10, Taint: latency([]float64{0.1}, 0),
		Validity: scValidity{Reasons: []string{"load average 3.00 above 1.50"}}}
	for k, v := range scTargets(r) {
		if v != scInvalid {
			t.Errorf("target %s: %s, want %s", k, v, scInvalid)
		}
	}
	res, err := scJSONResult(r)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res)
	for _, k := range []string{"rss_after_sync_mb", "idle_cpu_percent_of_one_core", "sync_seconds", "evidence_to_taint", "member_writes_per_second"} {
		if strings.Contains(string(data), `"`+k+`"`) {
			t.Errorf("INVALID result carries %s: %s", k, data)
		}
	}
	if !strings.Contains(string(data), `"invalid_reasons":["load average 3.00 above 1.50"]`) {
		t.Errorf("INVALID result without its reason: %s", data)
	}
	r.Validity = scValidity{Valid: true}
	res, _ = scJSONResult(r)
	data, _ = json.Marshal(res)
	if !strings.Contains(string(data), `"rss_after_sync_mb":250`) {
		t.Errorf("a valid result lost its figures: %s", data)
	}
}

// The decision steps are judged by their own window: their latencies are
// figures when that window had headroom, even if the steady window had
// none, and are not when it had none, whatever the steady window's verdict.
func TestDecisionsJudgedByTheirOwnWindow(t *testing.T) {
	r := &scResult{Members: 3, NodesPerMem: 2000, PodsPerNode: 10, PodsTotal: 60000, RSSAfterSyncMB: 250,
		Taint: latency([]float64{0.4, 0.5}, 0), Shift: latency([]float64{2}, 0),
		Validity:          judgeValidity([]scHealthSample{{Load1: 3}}, 1.5, 0, scMaxChurnLag),
		DecisionsValidity: &scValidity{Valid: true, MaxLoad: 1.5, MaxLoad1: 0.9, Samples: 40}}
	check := func(what string, wantTargets map[string]string, present, absent []string, printed ...string) {
		t.Helper()
		got := scTargets(r)
		for k, want := range wantTargets {
			if got[k] != want {
				t.Errorf("%s: target %s %s, want %s", what, k, got[k], want)
			}
		}
		res, err := scJSONResult(r)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res)
		for _, k := range present {
			if !strings.Contains(string(data), `"`+k+`"`) {
				t.Errorf("%s: JSON lacks %s: %s", what, k, data)
			}
		}
		for _, k := range absent {
			if strings.Contains(string(data), `"`+k+`"`) {
				t.Errorf("%s: JSON carries %s: %s", what, k, data)
			}
		}
		var out bytes.Buffer
		if err := (&scBench{out: &out, o: scOptions{size: "goal"}}).report(r); err != nil {
			t.Fatal(err)
		}
		for _, want := range printed {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: report lacks %q:\n%s", what, want, out.String())
			}
		}
	}
	check("steady INVALID, decisions VALID",
		map[string]string{"rss": scInvalid, "taint": "PASS", "shift": "MISS"},
		[]string{"evidence_to_taint", "exhaustion_to_rsp_shift"}, []string{"rss_after_sync_mb"},
		"run INVALID", "decision steps VALID", "0.400         0.500")
	r.Validity = scValidity{Valid: true, MaxLoad: 1.5, Samples: 40}
	r.DecisionsValidity = &scValidity{MaxLoad: 1.5, Reasons: []string{"load average 2.10 above 1.50"}}
	check("steady VALID, decisions INVALID",
		map[string]string{"rss": "PASS", "taint": scInvalid, "shift": scInvalid},
		[]string{"rss_after_sync_mb"}, []string{"evidence_to_taint", "exhaustion_to_rsp_shift"},
		"run VALID", "decision steps INVALID", "load average 2.10 above 1.50")
}

// scale-plan reads only valid runs' figures.
func TestScalePlanReadsValidRunsOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, doc map[string]any) string {
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	res := map[string]any{"members": 3, "pods_total": 60000, "rss_after_sync_mb": 280.0, "rss_before_first_member_mb": 50.0,
		"churn": map[string]any{"plan": map[string]any{"rates": map[string]any{"node_status_every_seconds": 300.0, "pod_replaced_percent_per_minute": 1.0}}}}
	good := write("good.json", map[string]any{"benchmark": "scale", "valid": true, "result": res})
	r, err := readScaleResult(good)
	if err != nil || r.RSSAfterSyncMB != 280 || r.Churn.Plan.Rates.NodeStatusEverySeconds != 300 {
		t.Fatalf("valid run: %+v, %v", r, err)
	}
	if !strings.Contains(churnWords(r.Churn), "every 300s, 1.00 % of pods") {
		t.Errorf("rates stated as %q", churnWords(r.Churn))
	}
	for name, doc := range map[string]map[string]any{
		"invalid.json": {"benchmark": "scale", "valid": false, "invalid_reasons": []string{"load average 3.00 above 1.50"}, "result": res},
		"old.json":     {"benchmark": "scale", "result": res},
		"empty.json":   {"benchmark": "scale", "valid": true, "result": map[string]any{"members": 3}},
		"other.json":   {"benchmark": "rebalance", "valid": true, "result": res},
	} {
		if _, err := readScaleResult(write(name, doc)); err == nil {
			t.Errorf("%s was read as a run to plan from", name)
		}
	}
}

// Every operation of a stream runs once, in order of its due time, with no
// more than workers in flight; errors are counted, not fatal.
func TestRunStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[int]int{}
	inFlight, most := 0, 0
	const workers, stopAt = 3, 40
	s := runStream(ctx, time.Now(), time.Millisecond, workers, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i]++
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		if i == stopAt {
			cancel()
		}
		if i == 3 {
			return errors.New("boom")
		}
		return nil
	})
	for i := 0; i <= stopAt; i++ {
		if seen[i] != 1 {
			t.Errorf("operation %d ran %d times", i, seen[i])
		}
	}
	if most > workers {
		t.Errorf("%d operations in flight, want at most %d", most, workers)
	}
	if s.Errors != 1 || s.FirstError != "boom" || s.Done+s.Errors < stopAt {
		t.Errorf("stats %+v: want 1 error (boom) and the others done", s)
	}
	if off := runStream(context.Background(), time.Now(), 0, workers, func(context.Context, int) error {
		t.Error("a stream with no interval ran")
		return nil
	}); off.Done != 0 {
		t.Errorf("stream off: %+v", off)
	}
}

// The printed report of an INVALID run shows INVALID in place of the
// manager's figures, the reasons, and the rig's own figures.
func TestReportOfAnInvalidRun(t *testing.T) {
	var out bytes.Buffer
	b := &scBench{out: &out, o: scOptions{size: "small"}}
	rig := &scRigCost{Seconds: 60, Rig: scProcCost{CPUPercent: 87.5}, Bench: scProcCost{CPUPercent: 4.2},
		MemberMean: scProcCost{CPUPercent: 12.5, RSSMB: 410}}
	r := &scResult{Members: 2, NodesPerMem: 200, PodsPerNode: 10, PodsTotal: 4000, RSPs: 20, RSSAfterSyncMB: 123, CPUPercent: 1.25,
		SteadyLab: rig, IdleLab: rig, Churn: &churnResult{Plan: planChurn(churnRates{NodeStatusEvery: 5 * time.Minute, PodPercentPerMin: 1, ScalePerMin: 2}, 400, 4000)},
		Validity: judgeValidity([]scHealthSample{{Load1: 2.6}}, 1.5, 0, scMaxChurnLag)}
	if err := b.report(r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"run INVALID", "load average 2.60 above 1.50", "87.5", "12.50 % / 410 MB",
		"a status report per bulk node every 5m0s (1.33/s), 1.00 % of pods replaced per minute (0.67/s), 2.0 RSP scale events per minute"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "RSS after sync") && (strings.Contains(line, "123") || !strings.Contains(line, scInvalid)) {
			t.Errorf("an INVALID run printed the manager's RSS: %q", line)
		}
	}
	if testing.Verbose() {
		t.Log("\n" + text)
	}
}

// The idle diagnostics' rates: per label values, the growth over the
// window, highest first; counters that did not move are left out.
func TestCounterRatesByLabels(t *testing.T) {
	before := `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",subresource="",verb="LIST"} 10
apiserver_request_total{code="200",resource="leases",subresource="",verb="PUT"} 100
apiserver_request_total{code="409",resource="leases",subresource="",verb="PUT"} 1
apiserver_request_total{code="200",resource="nodes",subresource="status",verb="PATCH"} 5
`
	after := `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",subresource="",verb="LIST"} 10
apiserver_request_total{code="200",resource="leases",subresource="",verb="PUT"} 130
apiserver_request_total{code="409",resource="leases",subresource="",verb="PUT"} 11
apiserver_request_total{code="200",resource="nodes",subresource="status",verb="PATCH"} 25
apiserver_request_total{code="200",resource="events",subresource="",verb="POST"} 4
`
	got := counterRates(before, after, "apiserver_request_total", 10, "verb", "resource", "subresource")
	want := []scRate{{"PUT leases", 4}, {"PATCH nodes status", 2}, {"POST events", 0.4}}
	if !slices.Equal(got, want) {
		t.Fatalf("rates %v, want %v", got, want)
	}
	if line := ratesLine(got, 2); line != "PUT leases 4.00/s, PATCH nodes status 2.00/s" {
		t.Fatalf("line %q", line)
	}
}
