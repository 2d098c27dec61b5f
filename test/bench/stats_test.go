package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedianAndP95(t *testing.T) {
	cases := []struct {
		in          []float64
		median, p95 float64
	}{
		{[]float64{3}, 3, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 4},
		{[]float64{5, 1, 4, 2, 3}, 3, 5},
		{[]float64{20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 10.5, 19},
	}
	for _, c := range cases {
		if got := Median(c.in); got != c.median {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.median)
		}
		if got := P95(c.in); got != c.p95 {
			t.Errorf("P95(%v) = %v, want %v", c.in, got, c.p95)
		}
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(P95(nil)) {
		t.Error("empty input must give NaN")
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Median reordered its input")
	}
}

func TestTableAndJSON(t *testing.T) {
	var out bytes.Buffer
	if err := Table(&out, []string{"NODES", "SYNC"}, [][]string{{"1000", Seconds(2.345)}, {"2000", Seconds(math.NaN())}}); err != nil {
		t.Fatal(err)
	}
	want := "NODES   SYNC\n1000    2.3\n2000    -\n"
	if out.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", out.String(), want)
	}

	path := filepath.Join(t.TempDir(), "b.json")
	t.Setenv("BENCH_JSON", path)
	out.Reset()
	if err := WriteJSON(&out, map[string]int{"runs": 5}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"runs": 5`) || !strings.Contains(out.String(), path) {
		t.Errorf("JSON %q, output %q", data, out.String())
	}
}
