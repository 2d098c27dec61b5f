package bench

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method, NaN for no samples: with fewer than 100 samples p99
// is the maximum.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	s := sorted(xs)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Series is one sample of a Prometheus text exposition: its labels and value.
type Series struct {
	Labels map[string]string
	Value  float64
}

// ParseMetric returns the samples of metric name in a Prometheus text
// exposition (the format every Kubernetes component and controller-runtime
// serve on /metrics). Label values with escaped quotes are not expected.
func ParseMetric(text, name string) ([]Series, error) {
	var out []Series
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("metric line %q: no closing brace", line)
			}
			var err error
			if labels, err = parseLabels(rest[1:end]); err != nil {
				return nil, fmt.Errorf("metric line %q: %w", line, err)
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric with this prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metric line %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out = append(out, Series{Labels: labels, Value: v})
	}
	return out, nil
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, fmt.Errorf("bad labels %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		val := s[eq+2:]
		end := strings.IndexByte(val, '"')
		if end < 0 {
			return nil, fmt.Errorf("bad labels %q", s)
		}
		out[key] = val[:end]
		s = strings.TrimPrefix(strings.TrimSpace(val[end+1:]), ",")
	}
	return out, nil
}

// Sum adds the samples whose labels match every key of want.
func Sum(series []Series, want map[string]string) float64 {
	total := 0.0
	for _, s := range series {
		ok := true
		for k, v := range want {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// ReadWrite is a request rate split by kind.
type ReadWrite struct {
	Reads  float64 `json:"reads_per_second"`
	Writes float64 `json:"writes_per_second"`
}

// IsRead says whether an HTTP method (client-go's rest_client_requests_total
// method label) only reads: GET covers get, list and the start of a watch.
func IsRead(method string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// RequestCount is the number of requests of one host and method between
// two scrapes.
type RequestCount struct {
	Host, Method string
	Count        float64
}

// RequestCounts turns two scrapes of client-go's rest_client_requests_total
// (labels host, method, code) into the requests made between them, by host
// and method. A counter that went down (a restart) counts from zero.
func RequestCounts(before, after []Series) []RequestCount {
	type key struct{ host, method, code string }
	prev := map[key]float64{}
	for _, s := range before {
		prev[key{s.Labels["host"], s.Labels["method"], s.Labels["code"]}] += s.Value
	}
	sums := map[[2]string]float64{}
	for _, s := range after {
		k := key{s.Labels["host"], s.Labels["method"], s.Labels["code"]}
		d := s.Value - prev[k]
		if d < 0 {
			d = s.Value
		}
		sums[[2]string{k.host, k.method}] += d
	}
	out := make([]RequestCount, 0, len(sums))
	for k, n := range sums {
		out = append(out, RequestCount{Host: k[0], Method: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Host < out[j].Host || (out[i].Host == out[j].Host && out[i].Method < out[j].Method)
	})
	return out
}

// RequestRates is RequestCounts per second over a window, split into reads
// and writes by host.
func RequestRates(before, after []Series, seconds float64) map[string]ReadWrite {
	out := map[string]ReadWrite{}
	for _, c := range RequestCounts(before, after) {
		rw := out[c.Host]
		if IsRead(c.Method) {
			rw.Reads += c.Count / seconds
		} else {
			rw.Writes += c.Count / seconds
		}
		out[c.Host] = rw
	}
	return out
}

// CPUPercent is the share of one core used between two readings of a
// process's CPU time, wall seconds apart.
func CPUPercent(cpuBefore, cpuAfter, wallSeconds float64) float64 {
	if wallSeconds <= 0 {
		return math.NaN()
	}
	return (cpuAfter - cpuBefore) / wallSeconds * 100
}
