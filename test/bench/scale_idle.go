package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// What one member does at rest. The idle lab's cost per member is the
// figure that decides whether a size can be measured on this machine at
// all, and its parts say what to cut: during the idle window the bench
// takes a CPU profile of each control-plane component of the first member
// and reads its API server's request counters at both ends (who calls it,
// and what it asks etcd, with nothing but the lab running).

// scIdleProfileMax bounds the idle profiles' length.
const scIdleProfileMax = 30 * time.Second

// scRate is one counter's rate over a window.
type scRate struct {
	What      string  `json:"what"`
	PerSecond float64 `json:"per_second"`
}

// scIdleMember is the first member at rest.
type scIdleMember struct {
	Cluster string  `json:"cluster"`
	Seconds float64 `json:"seconds"`
	// Requests are its API server's requests per second by verb and
	// resource (apiserver_request_total), highest first; Etcd its
	// requests to etcd by operation and type (etcd_requests_total).
	Requests []scRate `json:"apiserver_requests"`
	Etcd     []scRate `json:"etcd_requests"`
	// Profiles are the CPU profiles saved, per component.
	Profiles map[string]string `json:"cpu_profiles,omitempty"`
}

// idleComponents are the components profiled (kwok runs only the lab
// nodes, and the static bulk has no kwok at all).
var idleComponents = []string{lab.CompAPIServer, lab.CompEtcd, lab.CompKCM, lab.CompScheduler}

// idleDiagnostics runs during the idle window: started, then finished
// once the window has passed.
type idleDiagnostics struct {
	b        *scBench
	cluster  string
	at       time.Time
	metrics0 string
	wg       sync.WaitGroup
	mu       sync.Mutex
	profiles map[string][]byte
	errs     []string
}

func (b *scBench) startIdleDiagnostics(ctx context.Context) *idleDiagnostics {
	d := &idleDiagnostics{b: b, cluster: lab.MemberName(1), at: time.Now(), profiles: map[string][]byte{}}
	var err error
	if d.metrics0, err = b.l.APIServerMetrics(ctx, d.cluster); err != nil {
		d.errs = append(d.errs, "metrics: "+err.Error())
	}
	secs := int(min(b.o.memberIdle, scIdleProfileMax) / time.Second)
	if secs < 1 {
		return d
	}
	for _, comp := range idleComponents {
		d.wg.Go(func() {
			data, err := b.l.ComponentProfile(ctx, d.cluster, comp, secs)
			d.mu.Lock()
			defer d.mu.Unlock()
			if err != nil {
				d.errs = append(d.errs, comp+": "+err.Error())
				return
			}
			d.profiles[comp] = data
		})
	}
	return d
}

// finish reads the counters again, saves the profiles and prints what the
// member did.
func (d *idleDiagnostics) finish(ctx context.Context) *scIdleMember {
	d.wg.Wait()
	out := &scIdleMember{Cluster: d.cluster, Seconds: round1(time.Since(d.at).Seconds())}
	metrics1, err := d.b.l.APIServerMetrics(ctx, d.cluster)
	if err != nil {
		d.errs = append(d.errs, "metrics: "+err.Error())
	} else if d.metrics0 != "" {
		out.Requests = counterRates(d.metrics0, metrics1, "apiserver_request_total", out.Seconds, "verb", "resource", "subresource")
		out.Etcd = counterRates(d.metrics0, metrics1, "etcd_requests_total", out.Seconds, "operation", "type")
	}
	d.b.progress("%s at rest over %.0fs: API server requests %s; etcd requests %s", d.cluster, out.Seconds,
		ratesLine(out.Requests, 12), ratesLine(out.Etcd, 12))
	if len(d.profiles) > 0 {
		out.Profiles = map[string]string{}
	}
	for _, comp := range idleComponents {
		data, ok := d.profiles[comp]
		if !ok {
			continue
		}
		path, top, err := d.b.saveLabProfile(ctx, fmt.Sprintf("idle-%s-%s-cpu", d.cluster, comp), comp, data)
		if err != nil {
			d.errs = append(d.errs, comp+": "+err.Error())
			continue
		}
		out.Profiles[comp] = path
		d.b.progress("%s's %s at rest, CPU profile %s; top:\n%s", d.cluster, comp, path, top)
	}
	for _, e := range d.errs {
		d.b.progress("idle diagnostics: %s", e)
	}
	return out
}

// saveLabProfile writes a lab component's profile to the profile folder
// and returns its path and `go tool pprof -top -cum` (the call paths).
func (b *scBench) saveLabProfile(ctx context.Context, tag, component string, data []byte) (string, string, error) {
	dir, err := filepath.Abs(b.o.profileDir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.pb.gz", b.o.size, tag))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", "", err
	}
	bin := filepath.Join(b.l.Options().BinDir, component)
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", bin, path).CombinedOutput()
	if err != nil {
		return path, "", fmt.Errorf("go tool pprof %s: %w: %s", path, err, top)
	}
	return path, string(top), nil
}

// counterRates is, per distinct value of keys, how fast counter name grew
// from text0 to text1 over secs, highest first, zero rates left out.
func counterRates(text0, text1, name string, secs float64, keys ...string) []scRate {
	sums := func(text string) map[string]float64 {
		series, err := ParseMetric(text, name)
		if err != nil {
			return nil
		}
		out := map[string]float64{}
		for _, s := range series {
			var parts []string
			for _, k := range keys {
				if v := s.Labels[k]; v != "" {
					parts = append(parts, v)
				}
			}
			out[strings.Join(parts, " ")] += s.Value
		}
		return out
	}
	before, after := sums(text0), sums(text1)
	var out []scRate
	for what, v := range after {
		if d := v - before[what]; d > 0 && secs > 0 {
			out = append(out, scRate{What: what, PerSecond: round3(d / secs)})
		}
	}
	slices.SortFunc(out, func(a, b scRate) int {
		if a.PerSecond != b.PerSecond {
			if a.PerSecond > b.PerSecond {
				return -1
			}
			return 1
		}
		return strings.Compare(a.What, b.What)
	})
	return out
}

// ratesLine prints the first n rates on one line.
func ratesLine(rates []scRate, n int) string {
	if len(rates) == 0 {
		return "none"
	}
	var parts []string
	for _, r := range rates[:min(n, len(rates))] {
		parts = append(parts, fmt.Sprintf("%s %.2f/s", r.What, r.PerSecond))
	}
	return strings.Join(parts, ", ")
}
