package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/managerproc"
)

// What the rig itself costs, and whether a window had headroom. A figure of
// the manager means something only when the machine had room to spare
// while it was taken: otherwise the lab's lag is measured, not the
// manager.

// Validity limits (issue 30): the 1-minute load average may not exceed
// scMaxLoadPerCore per core, and every member must answer a probe within
// scProbeLimit, at every health sample of the window; the churn driver may
// not fall further behind its schedule than scMaxChurnLag.
const (
	scMaxLoadPerCore = 0.75 // 1.5 on this 2-core machine
	scProbeLimit     = time.Second
	scHealthEvery    = 5 * time.Second
	scMaxChurnLag    = 10 * time.Second
)

// scProcCost is CPU (% of one core over the window) and RSS at its end.
type scProcCost struct {
	CPUPercent float64 `json:"cpu_percent_of_one_core"`
	RSSMB      float64 `json:"rss_mb"`
}

func (c *scProcCost) add(o scProcCost) { c.CPUPercent += o.CPUPercent; c.RSSMB += o.RSSMB }

// scRigCost is what the lab's processes and the bench process cost over a
// window, by part.
type scRigCost struct {
	Seconds float64 `json:"seconds"`
	// Rig is every lab process plus the bench process (its churn driver
	// and watches).
	Rig   scProcCost `json:"rig_total"`
	Bench scProcCost `json:"bench_process"`
	// Host is the host cluster's processes (kubefed included), without a
	// shared etcd.
	Host       scProcCost  `json:"host"`
	SharedEtcd *scProcCost `json:"shared_etcd,omitempty"`
	// MemberMean and MemberMax are over the members: each member's own
	// processes (etcd unless shared, API server, controller-manager,
	// scheduler, the kwok processes of its lab nodes).
	MemberMean scProcCost            `json:"member_mean"`
	MemberMax  scProcCost            `json:"member_max"`
	Members    map[string]scProcCost `json:"members"`
	// Components splits MemberMean by component (etcd, kube-apiserver,
	// ...): what one member's parts cost, on average over the members.
	Components map[string]scProcCost `json:"member_components_mean,omitempty"`
}

// procSample is one process over a window.
type procSample struct {
	cluster, component string
	cpu0, cpu1         time.Duration
	rss                int64
}

// rigCost sums samples by part: bench is the bench process's own sample;
// sharedEtcd says the host's etcd serves every cluster.
func rigCost(samples []procSample, bench procSample, secs float64, sharedEtcd bool) scRigCost {
	cost := func(s procSample) scProcCost {
		return scProcCost{CPUPercent: CPUPercent(s.cpu0.Seconds(), s.cpu1.Seconds(), secs), RSSMB: mb(float64(s.rss))}
	}
	r := scRigCost{Seconds: round1(secs), Bench: cost(bench), Members: map[string]scProcCost{}, Components: map[string]scProcCost{}}
	r.Rig = r.Bench
	for _, s := range samples {
		c := cost(s)
		r.Rig.add(c)
		switch {
		case s.cluster == lab.HostName && s.component == lab.CompEtcd && sharedEtcd:
			if r.SharedEtcd == nil {
				r.SharedEtcd = &scProcCost{}
			}
			r.SharedEtcd.add(c)
		case s.cluster == lab.HostName:
			r.Host.add(c)
		default:
			m := r.Members[s.cluster]
			m.add(c)
			r.Members[s.cluster] = m
			p := r.Components[s.component]
			p.add(c)
			r.Components[s.component] = p
		}
	}
	for _, m := range r.Members {
		r.MemberMean.add(m)
		r.MemberMax.CPUPercent = math.Max(r.MemberMax.CPUPercent, m.CPUPercent)
		r.MemberMax.RSSMB = math.Max(r.MemberMax.RSSMB, m.RSSMB)
	}
	if n := float64(len(r.Members)); n > 0 {
		r.MemberMean.CPUPercent /= n
		r.MemberMean.RSSMB /= n
		for k, p := range r.Components {
			p.CPUPercent /= n
			p.RSSMB /= n
			r.Components[k] = p
		}
	}
	roundCost(&r.Rig)
	roundCost(&r.Bench)
	roundCost(&r.Host)
	roundCost(&r.MemberMean)
	roundCost(&r.MemberMax)
	if r.SharedEtcd != nil {
		roundCost(r.SharedEtcd)
	}
	for k, m := range r.Members {
		roundCost(&m)
		r.Members[k] = m
	}
	for k, p := range r.Components {
		roundCost(&p)
		r.Components[k] = p
	}
	return r
}

// componentsLine prints a member's cost by component, costliest first.
func componentsLine(comps map[string]scProcCost) string {
	names := slices.Collect(maps.Keys(comps))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(comps[b].CPUPercent, comps[a].CPUPercent) })
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f%% / %.0f MB", n, comps[n].CPUPercent, comps[n].RSSMB))
	}
	return strings.Join(parts, ", ")
}

func roundCost(c *scProcCost) { c.CPUPercent, c.RSSMB = round3(c.CPUPercent), round1(c.RSSMB) }

// procWindow samples the lab's processes and the bench process at the
// start of a window; end samples them again and sums.
type procWindow struct {
	at    time.Time
	procs []*lab.Proc
	cpu0  map[int]time.Duration
	bench time.Duration
}

func (b *scBench) startProcWindow() (*procWindow, error) {
	st, err := b.l.State()
	if err != nil {
		return nil, err
	}
	w := &procWindow{at: time.Now(), procs: st.Procs, cpu0: map[int]time.Duration{}}
	for _, p := range st.Procs {
		if u, err := managerproc.SamplePID(p.PID); err == nil {
			w.cpu0[p.PID] = u.CPU
		}
	}
	u, err := managerproc.SamplePID(os.Getpid())
	if err != nil {
		return nil, err
	}
	w.bench = u.CPU
	return w, nil
}

// end sums the window; a process that was not running at both ends (a lab
// process restarted meanwhile) is left out.
func (w *procWindow) end(sharedEtcd bool) (scRigCost, error) {
	var samples []procSample
	for _, p := range w.procs {
		c0, ok := w.cpu0[p.PID]
		u, err := managerproc.SamplePID(p.PID)
		if !ok || err != nil {
			continue
		}
		samples = append(samples, procSample{cluster: p.Cluster, component: p.Component, cpu0: c0, cpu1: u.CPU, rss: u.RSS})
	}
	u, err := managerproc.SamplePID(os.Getpid())
	if err != nil {
		return scRigCost{}, err
	}
	bench := procSample{cpu0: w.bench, cpu1: u.CPU, rss: u.RSS}
	return rigCost(samples, bench, time.Since(w.at).Seconds(), sharedEtcd), nil
}

// scHealthSample is one look at the machine during a window.
type scHealthSample struct {
	Offset time.Duration
	Load1  float64
	// Slow are the members that did not answer /readyz within the probe
	// limit (or failed it), with what happened.
	Slow map[string]string
}

// scValidity is the verdict on a window.
type scValidity struct {
	Valid   bool     `json:"valid"`
	Reasons []string `json:"invalid_reasons,omitempty"`
	// MaxLoad1 is the highest 1-minute load average sampled, MaxLoad the
	// limit.
	MaxLoad1   float64 `json:"max_load_average_1m"`
	MaxLoad    float64 `json:"load_limit"`
	Samples    int     `json:"health_samples"`
	SlowProbes int     `json:"probes_over_limit"`
}

// judgeValidity says whether a window had headroom: every sample's load at
// most maxLoad, every member's probe within the limit, the churn driver at
// most maxLag behind. Reasons name each breach once, with when it was
// first seen.
func judgeValidity(samples []scHealthSample, maxLoad float64, churnLag, maxLag time.Duration) scValidity {
	v := scValidity{MaxLoad: maxLoad, Samples: len(samples)}
	if len(samples) == 0 {
		v.Reasons = append(v.Reasons, "no health sample taken in the window")
	}
	var overAt time.Duration = -1
	slow := map[string]int{}
	firstWhy := map[string]string{}
	firstAt := map[string]time.Duration{}
	for _, s := range samples {
		v.MaxLoad1 = math.Max(v.MaxLoad1, s.Load1)
		if s.Load1 > maxLoad && overAt < 0 {
			overAt = s.Offset
		}
		for m, why := range s.Slow {
			if slow[m] == 0 {
				firstWhy[m], firstAt[m] = why, s.Offset
			}
			slow[m]++
			v.SlowProbes++
		}
	}
	if overAt >= 0 {
		v.Reasons = append(v.Reasons, fmt.Sprintf("load average %.2f above %.2f (first %s into the window)", v.MaxLoad1, maxLoad, overAt.Round(time.Second)))
	}
	members := make([]string, 0, len(slow))
	for m := range slow {
		members = append(members, m)
	}
	sort.Strings(members)
	for _, m := range members {
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s did not answer a probe within %s in %d of %d samples (first %s into the window: %s)",
			m, scProbeLimit, slow[m], len(samples), firstAt[m].Round(time.Second), firstWhy[m]))
	}
	if churnLag > maxLag {
		v.Reasons = append(v.Reasons, fmt.Sprintf("the churn driver fell %.1fs behind its schedule (limit %s): the stated rates were not kept", churnLag.Seconds(), maxLag))
	}
	v.Valid = len(v.Reasons) == 0
	return v
}

// scHealth samples load and member probes every scHealthEvery until stop.
type scHealth struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []scHealthSample
}

func (b *scBench) startHealth(ctx context.Context) (*scHealth, error) {
	probes := map[string]*kubernetes.Clientset{}
	for _, m := range b.l.Members() {
		cfg, err := b.restConfig(m)
		if err != nil {
			return nil, err
		}
		cfg.Timeout = scProbeLimit
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		probes[m] = cs
	}
	hctx, stop := context.WithCancel(ctx)
	h := &scHealth{stop: stop, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(h.done)
		for {
			s := scHealthSample{Offset: time.Since(start), Slow: map[string]string{}}
			s.Load1, _ = loadAvg()
			var mu sync.Mutex
			var wg sync.WaitGroup
			for m, cs := range probes {
				wg.Go(func() {
					if why := probe(hctx, cs); why != "" {
						mu.Lock()
						s.Slow[m] = why
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if hctx.Err() != nil {
				return // a probe cut by the end of the window is no sample
			}
			h.mu.Lock()
			h.samples = append(h.samples, s)
			h.mu.Unlock()
			if sleepCtx(hctx, scHealthEvery) != nil {
				return
			}
		}
	}()
	return h, nil
}

// probe asks a member's /readyz and says what was wrong ("" when it
// answered ok within the limit).
func probe(ctx context.Context, cs *kubernetes.Clientset) string {
	ctx, cancel := context.WithTimeout(ctx, scProbeLimit)
	defer cancel()
	start := time.Now()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	took := time.Since(start)
	switch {
	case err != nil:
		return fmt.Sprintf("after %s: %v", took.Round(time.Millisecond), err)
	case took > scProbeLimit:
		return fmt.Sprintf("answered after %s", took.Round(time.Millisecond))
	case strings.TrimSpace(string(body)) != "ok":
		return "not ready: " + strings.TrimSpace(string(body))
	}
	return ""
}

// finish stops sampling and returns the samples.
func (h *scHealth) finish() []scHealthSample {
	h.stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.samples
}
