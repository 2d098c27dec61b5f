package bench

import (
	"math"
	"testing"
)

func TestPercentileNearestRank(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {10, 1}, {100, 10}, {91, 10}, {90, 9}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Percentile(xs, 0)) {
		t.Error("no samples or p=0 must be NaN")
	}
}

const exposition = `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 100
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 10
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 2
rest_client_requests_total{code="200",host="127.0.0.1:6444",method="GET"} 50
rest_client_requests_total_other 7
go_memstats_heap_inuse_bytes 1.2345e+07
`

func TestParseMetric(t *testing.T) {
	s, err := ParseMetric(exposition, "rest_client_requests_total")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 4 {
		t.Fatalf("%d series, want 4 (a metric sharing the prefix is another metric): %v", len(s), s)
	}
	if got := Sum(s, map[string]string{"method": "PUT"}); got != 12 {
		t.Errorf("PUT total %v, want 12", got)
	}
	h, err := ParseMetric(exposition, "go_memstats_heap_inuse_bytes")
	if err != nil || len(h) != 1 || h[0].Value != 12345000 {
		t.Errorf("heap %v %v, want one sample 12345000", h, err)
	}
	if _, err := ParseMetric("m{a=\"x\" 1", "m"); err == nil {
		t.Error("unclosed labels accepted")
	}
}

func TestRequestRatesSplitsReadsAndWritesByHost(t *testing.T) {
	before, _ := ParseMetric(exposition, "rest_client_requests_total")
	after := []Series{
		{Labels: map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "GET"}, Value: 160},
		{Labels: map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "PUT"}, Value: 20},
		{Labels: map[string]string{"code": "409", "host": "127.0.0.1:6443", "method": "PUT"}, Value: 2},
		{Labels: map[string]string{"code": "200", "host": "127.0.0.1:6444", "method": "GET"}, Value: 50},
		{Labels: map[string]string{"code": "201", "host": "127.0.0.1:6444", "method": "POST"}, Value: 4},
	}
	r := RequestRates(before, after, 20)
	if got := r["127.0.0.1:6443"]; got.Reads != 3 || got.Writes != 0.5 {
		t.Errorf("host rates %+v, want 3 reads/s and 0.5 writes/s", got)
	}
	if got := r["127.0.0.1:6444"]; got.Reads != 0 || got.Writes != 0.2 {
		t.Errorf("member rates %+v, want 0 reads/s and 0.2 writes/s (a new series counts from zero)", got)
	}
	// A restarted process's counters start again from zero.
	r = RequestRates(after, before[:1], 10)
	if got := r["127.0.0.1:6443"]; got.Reads != 10 {
		t.Errorf("after a reset %+v, want 10 reads/s", got)
	}
}

func TestCPUPercent(t *testing.T) {
	if got := CPUPercent(10, 13, 120); got != 2.5 {
		t.Errorf("3 s of CPU over 120 s = %v%%, want 2.5", got)
	}
	if !math.IsNaN(CPUPercent(0, 1, 0)) {
		t.Error("zero window must be NaN")
	}
}

func TestFitCostsRecoversTheModel(t *testing.T) {
	want := CostModel{BaseMB: 40, PerMemberMB: 3, PerPodMB: 0.002}
	at := func(m, p int) CostPoint { return CostPoint{Members: m, Pods: p, MB: want.Predict(m, p)} }
	got, err := FitCosts(40, at(3, 60000), at(20, 20000))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.PerMemberMB-3) > 1e-9 || math.Abs(got.PerPodMB-0.002) > 1e-12 {
		t.Errorf("fit %+v, want %+v", got, want)
	}
	if p := got.Predict(10, 500000); math.Abs(p-(40+30+1000)) > 1e-6 {
		t.Errorf("10 members × 500k pods predicted %v MB, want 1070", p)
	}
	if n := got.MembersPerReplica(1070, 50000); n != 10 {
		t.Errorf("members of 50k pods in 1070 MB = %d, want 10", n)
	}
	if _, err := FitCosts(40, at(1, 1000), at(2, 2000)); err == nil {
		t.Error("proportional sizes accepted: the model is not determined by them")
	}
}
