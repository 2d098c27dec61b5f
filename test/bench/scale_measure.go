package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/managerproc"
	"github.com/fedfailover/fedfailover/test/paths"
)

// scResult is everything the scale benchmark measured, as written to
// BENCH_JSON.
type scResult struct {
	Members     int `json:"members"`
	NodesPerMem int `json:"nodes_per_member"`
	PodsPerNode int `json:"pods_per_node"`
	PodsTotal   int `json:"pods_total"`
	VolumePods  int `json:"pods_with_volumes_total"`
	RSPs        int `json:"rsps"`
	// The rig: static bulk (always), one etcd for every cluster or not.
	StaticBulk bool `json:"static_bulk"`
	SharedEtcd bool `json:"shared_etcd"`
	// BulkViaEtcd: the static bulk was written into the members' etcd.
	BulkViaEtcd bool `json:"bulk_via_etcd"`
	// The lab as measured: seconds to create the bulk objects, RSP pods
	// Running, bulk pods not Running and bulk VolumeAttachments attached
	// when the measurement began.
	PopulateSeconds    float64 `json:"populate_seconds"`
	RSPPodsRunning     int     `json:"rsp_pods_running"`
	BulkPodsNotRunning int     `json:"bulk_pods_not_running"`
	VolumesAttached    int     `json:"bulk_volume_attachments_attached"`

	// IdleLab is the lab's cost before the manager started, without churn
	// (what an idle member costs); IdleLoad1 the load average then.
	IdleLab   *scRigCost `json:"idle_lab,omitempty"`
	IdleLoad1 float64    `json:"idle_load_average_1m"`
	// IdleMember is what the first member did at rest (scale_idle.go).
	IdleMember *scIdleMember `json:"idle_member,omitempty"`
	// SteadyLab is the lab's and the bench's cost over the steady window,
	// churn included; Churn what the churn driver did (from the settle to
	// the end of the steady window); Validity the verdict on the window.
	SteadyLab *scRigCost   `json:"steady_lab,omitempty"`
	Churn     *churnResult `json:"churn,omitempty"`
	Validity  scValidity   `json:"validity"`

	SyncSeconds      float64 `json:"sync_seconds"`
	BaseRSSMB        float64 `json:"rss_before_first_member_mb"`
	RSSAfterSyncMB   float64 `json:"rss_after_sync_mb"`
	HeapAfterSyncMB  float64 `json:"heap_inuse_after_sync_mb"`
	RSSAfterSteadyMB float64 `json:"rss_after_steady_mb"`
	HeapAfterSteady  float64 `json:"heap_inuse_after_steady_mb"`
	PeakRSSMB        float64 `json:"peak_rss_mb"`

	SteadySeconds float64 `json:"steady_seconds"`
	CPUPercent    float64 `json:"idle_cpu_percent_of_one_core"`
	// Requests per API server (cluster name) over the steady window.
	Requests map[string]ReadWrite `json:"requests_per_second"`
	// HostLeaseWrites are the host's Lease PUTs (updates) in the window (the
	// leader election renewals), per second.
	HostLeaseWrites float64 `json:"host_lease_writes_per_second"`
	MemberWrites    float64 `json:"member_writes_per_second"`
	HostOtherWrites float64 `json:"host_writes_without_leader_election_per_second"`
	// HostWrites are the manager's host writes in the window by request,
	// from the host's audit log (scale_audit.go); HostOtherWrites is then
	// their rate without the renewals of its leader election Lease.
	HostWrites []scHostWrite `json:"host_writes_by_request,omitempty"`
	LoadAvg1   float64       `json:"load_average_1m"`
	LoadAvg5   float64       `json:"load_average_5m"`
	// Pressure is how long tasks stalled on CPU and on I/O in the steady
	// window (nil where the kernel does not report it).
	Pressure *scPressure `json:"pressure_over_steady_window,omitempty"`

	// DecisionsValidity is the verdict on the decision steps' own window
	// (the power-offs and the exhaustion, after the steady window, churn
	// stopped): their latencies are figures only from a window with
	// headroom, whatever the steady window's verdict. Nil: they did not run.
	DecisionsValidity *scValidity `json:"decisions_validity,omitempty"`
	Taint             *scLatency  `json:"evidence_to_taint"`
	Shift             *scLatency  `json:"exhaustion_to_rsp_shift"`
	// Sharded (--replicas above 1): each replica's figures (the manager's
	// figures above are the largest replica's memory and the replicas'
	// summed CPU and requests), the taint latencies by the role of the
	// replica holding the node's member, and that role for the exhausted
	// member.
	Replicas      []scReplica           `json:"replicas,omitempty"`
	TaintByHolder map[string]*scLatency `json:"evidence_to_taint_by_holder,omitempty"`
	ShiftHolder   string                `json:"exhaustion_member_holder,omitempty"`

	Profiles []string `json:"profiles,omitempty"`
}

// scLatency is one decision latency over its samples.
type scLatency struct {
	// Basis says from what and to what each sample is timed.
	Basis   string    `json:"basis,omitempty"`
	Samples []float64 `json:"samples_seconds"`
	Missing int       `json:"missing"`
	// P50 and P99 are null without samples (not a number to mistake for one).
	P50 *float64 `json:"p50_seconds"`
	P99 *float64 `json:"p99_seconds"`
}

func latency(xs []float64, missing int) *scLatency {
	l := &scLatency{Samples: xs, Missing: missing}
	if len(xs) > 0 {
		p50, p99 := round3(Percentile(xs, 50)), round3(Percentile(xs, 99))
		l.P50, l.P99 = &p50, &p99
	}
	return l
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// scManager is the manager process under measurement and how to reach it.
type scManager struct {
	name    string // manager, or replica-<i> when sharded
	p       *managerproc.Process
	metrics string // http://127.0.0.1:PORT/metrics
	pprof   string // http://127.0.0.1:PORT/debug/pprof
	bin     string
	peak    float64 // highest RSS sampled, MB
	// steadyCPU is the CPU profile taken over the end of the steady window,
	// while the churn ran (nil: none taken).
	steadyCPU []byte
}

// scStopGrace is how long a manager gets to stop.
const scStopGrace = 30 * time.Second

// startManagers builds the manager binary and starts --replicas of it.
func (b *scBench) startManagers() (scManagers, error) {
	root, err := paths.RepoRoot()
	if err != nil {
		return nil, err
	}
	b.progress("building the manager binary")
	bin, err := managerproc.Build(root, b.o.dir)
	if err != nil {
		return nil, err
	}
	ports := lab.NewPortAllocator()
	var ms scManagers
	for i := range b.o.replicas {
		m, err := b.startManager(bin, ports, i)
		if err != nil {
			ms.stop(b)
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// startManager starts replica i of the manager binary bin.
func (b *scBench) startManager(bin string, ports *lab.PortAllocator, i int) (*scManager, error) {
	var err error
	var pm [3]int
	for i := range pm {
		if pm[i], err = ports.Free(); err != nil {
			return nil, err
		}
	}
	st, err := b.l.State()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + st.Cluster(lab.HostName).Kubeconfig,
		"--kubefed-namespace=" + lab.KubefedNS,
		"--leader-elect", "--leader-election-namespace=" + lab.KubefedNS,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", pm[0]), "--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", pm[1]),
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pm[2]),
	}
	name := "manager"
	if b.o.replicas > 1 {
		name = fmt.Sprintf("replica-%d", i)
		args = append(args, "--shard", "--sharded-rebalance")
	}
	// The log goes next to the profiles: the lab's folder is deleted at the
	// end, and the log is what explains a figure.
	logDir, err := filepath.Abs(b.o.profileDir)
	if err == nil {
		err = os.MkdirAll(logDir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("the manager's log folder: %w", err)
	}
	logPath := filepath.Join(logDir, b.o.size+"-"+name+".log")
	p, err := managerproc.Start(managerproc.Options{Bin: bin, Args: args, Log: logPath})
	if err != nil {
		return nil, err
	}
	b.progress("%s log: %s", name, logPath)
	return &scManager{name: name, p: p, bin: bin,
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", pm[0]),
		pprof:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pm[2])}, nil
}

func httpGet(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (m *scManager) scrape(ctx context.Context) (string, error) {
	data, err := httpGet(ctx, m.metrics, 10*time.Second)
	return string(data), err
}

func metricValue(text, name string) float64 {
	s, err := ParseMetric(text, name)
	if err != nil || len(s) == 0 {
		return 0
	}
	return Sum(s, nil)
}

// connected counts the members the manager reports connected.
func connected(text string) int {
	s, err := ParseMetric(text, "fedfailover_member_connected")
	if err != nil {
		return 0
	}
	n := 0
	for _, x := range s {
		if x.Value == 1 {
			n++
		}
	}
	return n
}

func mb(bytes float64) float64 { return round1(bytes / (1 << 20)) }

func (b *scBench) newResult() *scResult {
	r := &scResult{Members: b.o.members, NodesPerMem: b.o.nodes, PodsPerNode: b.o.podsPerNode,
		PodsTotal: b.o.members * b.o.nodes * b.o.podsPerNode, RSPs: b.o.rsps, StaticBulk: true, SharedEtcd: b.o.sharedEtcd, BulkViaEtcd: b.o.bulkViaEtcd}
	r.VolumePods = (b.o.nodes*b.o.podsPerNode + scVolumeEvery - 1) / scVolumeEvery * b.o.members
	return r
}

// measure runs the manager and takes every figure.
func (b *scBench) measure(ctx context.Context, r *scResult) error {
	ms, err := b.startManagers()
	if err != nil {
		return err
	}
	defer ms.stop(b)
	start := time.Now()
	b.progress("%d manager process(es) started; waiting until all %d members are connected", len(ms), b.o.members)
	lastReport := time.Now()
	err = pollEvery(ctx, b.o.syncTimeout, 100*time.Millisecond, "every member connected", func(ctx context.Context) (bool, string, error) {
		if err := ms.exited(); err != nil {
			return false, "", err
		}
		rss := ms.sampleRSS()
		texts, err := ms.scrapeAll(ctx)
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // not serving yet
		}
		n, shardWhy := ms.connectedAll(texts)
		if r.BaseRSSMB == 0 && n == 0 {
			r.BaseRSSMB = rss
		}
		if time.Since(lastReport) > 30*time.Second {
			lastReport = time.Now()
			b.progress("  %d/%d members connected after %s, RSS %.0f MB (largest replica) %s", n, b.o.members, time.Since(start).Round(time.Second), rss, shardWhy)
		}
		return n == b.o.members && shardWhy == "", fmt.Sprintf("%d/%d connected, RSS %.0f MB %s", n, b.o.members, rss, shardWhy), nil
	})
	if err != nil {
		for _, m := range ms {
			b.saveProfiles(ctx, m, r, ms.tag(m, "not-synced"))
		}
		return err
	}
	r.SyncSeconds = round1(time.Since(start).Seconds())
	ms.replicaFigures(ctx, r, false)
	r.RSSAfterSyncMB = largest(r.Replicas, func(x scReplica) float64 { return x.RSSAfterSyncMB })
	r.HeapAfterSyncMB = largest(r.Replicas, func(x scReplica) float64 { return x.HeapAfterSyncMB })
	plan := planChurn(b.o.churn, b.o.members*b.o.nodes, r.PodsTotal)
	b.progress("all members connected in %.1fs: RSS %.0f MB, heap %.0f MB; churn on (%.2f node status/s, %.2f pods replaced/s, %.3f RSP scale events/s); settling %s",
		r.SyncSeconds, r.RSSAfterSyncMB, r.HeapAfterSyncMB, plan.NodeStatusPerSecond, plan.PodReplacedPerSec, plan.ScaleEventsPerSec, b.o.settle)
	churn, err := b.startChurn(ctx, plan)
	if err != nil {
		return err
	}
	err = sleepCtx(ctx, b.o.settle)
	if err == nil {
		err = b.waitQuiet(ctx, "steady window")
	}
	if err == nil {
		err = b.steady(ctx, ms, r)
	}
	res := churn.finish()
	r.Churn = &res
	if err != nil {
		return err
	}
	r.Validity = judgeValidity(b.health, b.o.maxLoad, time.Duration(res.maxLagSeconds()*float64(time.Second)), scMaxChurnLag)
	b.progress("churn: %d node status reports, %d pods replaced, %d RSP scale events (%d errors; max lag %.1fs)",
		res.Nodes.Done, res.Pods.Done, res.Scales.Done, res.Nodes.Errors+res.Pods.Errors+res.Scales.Errors, res.maxLagSeconds())
	if r.Validity.Valid {
		b.progress("steady window VALID: load at most %.2f (limit %.2f), every probe within %s", r.Validity.MaxLoad1, r.Validity.MaxLoad, scProbeLimit)
	} else {
		b.progress("steady window INVALID: %s", strings.Join(r.Validity.Reasons, "; "))
	}
	ms.replicaFigures(ctx, r, true)
	r.RSSAfterSteadyMB = largest(r.Replicas, func(x scReplica) float64 { return x.RSSAfterSteadyMB })
	r.HeapAfterSteady = largest(r.Replicas, func(x scReplica) float64 { return x.HeapAfterSteady })
	for _, m := range ms {
		b.saveProfiles(ctx, m, r, ms.tag(m, "steady"))
	}
	if err := b.decisions(ctx, ms, r); err != nil {
		return err
	}
	ms.peaks(r)
	r.PeakRSSMB = largest(r.Replicas, func(x scReplica) float64 { return x.PeakRSSMB })
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// apiHosts maps each lab API server's host:port to its cluster name.
func (b *scBench) apiHosts() (map[string]string, error) {
	st, err := b.l.State()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range st.Clusters {
		out["127.0.0.1:"+strconv.Itoa(c.APIPort)] = c.Name
	}
	return out, nil
}

// hostLeaseUpdates reads the host API server's count of Lease PUTs (updates).
func (b *scBench) hostLeaseUpdates(ctx context.Context) (float64, error) {
	cs, err := kubernetes.NewForConfig(b.hostCfg)
	if err != nil {
		return 0, err
	}
	data, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	s, err := ParseMetric(string(data), "apiserver_request_total")
	if err != nil {
		return 0, err
	}
	return Sum(s, map[string]string{"resource": "leases", "verb": "PUT"}), nil
}

// steady measures CPU and API requests over the steady window.
func (b *scBench) steady(ctx context.Context, ms scManagers, r *scResult) error {
	hosts, err := b.apiHosts()
	if err != nil {
		return err
	}
	// The host's Lease count is read before the manager's counters at the
	// start and after them at the end, so its window holds the manager's:
	// every renewal the manager counted is in it.
	// Every replica's counters together (RequestCounts sums equal label
	// sets), and each replica's CPU.
	read := func(leasesFirst bool) (s []Series, leases float64, cpu []time.Duration, at time.Time, err error) {
		if leasesFirst {
			if leases, err = b.hostLeaseUpdates(ctx); err != nil {
				return nil, 0, nil, at, err
			}
		}
		for _, m := range ms {
			text, err := m.scrape(ctx)
			if err != nil {
				return nil, 0, nil, at, err
			}
			u, err := m.p.Sample()
			if err != nil {
				return nil, 0, nil, at, err
			}
			series, err := ParseMetric(text, "rest_client_requests_total")
			if err != nil {
				return nil, 0, nil, at, err
			}
			s, cpu = append(s, series...), append(cpu, u.CPU)
		}
		at = time.Now()
		if !leasesFirst {
			if leases, err = b.hostLeaseUpdates(ctx); err != nil {
				return nil, 0, nil, at, err
			}
		}
		return s, leases, cpu, at, nil
	}
	b.progress("steady window: %s", b.o.steady)
	w, err := b.startProcWindow()
	if err != nil {
		return err
	}
	health, err := b.startHealth(ctx)
	if err != nil {
		return err
	}
	stall0, stallOK := readStallTotals()
	s0, l0, c0, t0, err := read(true)
	if err == nil {
		profiled := b.steadyCPUProfiles(ctx, ms, b.o.steady)
		err = sleepCtx(ctx, b.o.steady)
		profiled()
	}
	var s1 []Series
	var l1 float64
	var c1 []time.Duration
	var t1 time.Time
	if err == nil {
		s1, l1, c1, t1, err = read(false)
	}
	b.health = health.finish()
	if err != nil {
		return err
	}
	rig, err := w.end(b.o.sharedEtcd)
	if err != nil {
		return err
	}
	r.SteadyLab = &rig
	r.LoadAvg1, r.LoadAvg5 = loadAvg()
	if stall1, ok := readStallTotals(); ok && stallOK {
		r.Pressure = pressureOver(stall0, stall1, t1.Sub(t0))
	}
	secs := t1.Sub(t0).Seconds()
	r.SteadySeconds = round1(secs)
	cpu := 0.0
	for i := range c1 {
		c := round3(CPUPercent(c0[i].Seconds(), c1[i].Seconds(), secs))
		if i < len(r.Replicas) {
			r.Replicas[i].CPUPercent = c
		}
		cpu += c
	}
	r.CPUPercent = round3(cpu)
	r.Requests = map[string]ReadWrite{}
	for host, rw := range RequestRates(s0, s1, secs) {
		name, ok := hosts[host]
		if !ok {
			name = host
		}
		rw.Reads, rw.Writes = round3(rw.Reads), round3(rw.Writes)
		r.Requests[name] = rw
		if name != lab.HostName {
			r.MemberWrites += rw.Writes
		}
	}
	r.MemberWrites = round3(r.MemberWrites)
	r.HostLeaseWrites = round3((l1 - l0) / secs)
	hostWrites := 0.0
	for _, x := range RequestCounts(s0, s1) {
		if hosts[x.Host] == lab.HostName && !IsRead(x.Method) {
			hostWrites += x.Count
		}
	}
	r.HostOtherWrites = round3(max(hostWrites-(l1-l0), 0) / secs)
	if err := b.hostWriteBreakdown(ctx, r, t0, t1); err != nil {
		b.progress("the manager's host writes are not broken down: %v", err)
	}
	b.progress("steady: manager CPU %.2f%% of a core, member writes %.3f/s, host writes %.3f/s (%.3f/s leader election); rig CPU %.1f%% of a core, load %.2f",
		r.CPUPercent, r.MemberWrites, r.Requests[lab.HostName].Writes, r.HostLeaseWrites, r.SteadyLab.Rig.CPUPercent, r.LoadAvg1)
	b.progress("stalls over the steady window (/proc/pressure; the load average counts tasks waiting on I/O too): %s", r.Pressure)
	return nil
}

// hostWriteBreakdown reads the manager's host writes in [t0, t1) from the
// host's audit log, once the log has an entry received after t1 (the API
// server writes each when its request completes), and counts them without
// the leader election's renewals: only the manager's own writes, where the
// count of every host Lease PUT includes other clients' Leases.
func (b *scBench) hostWriteBreakdown(ctx context.Context, r *scResult, t0, t1 time.Time) error {
	st, err := b.l.State()
	if err != nil {
		return err
	}
	path := lab.AuditLogPath(st.Cluster(lab.HostName))
	var writes []scHostWrite
	var renewals int
	err = pollEvery(ctx, 15*time.Second, 500*time.Millisecond, "the host's audit log past the window", func(context.Context) (bool, string, error) {
		w, n, past, readErr := hostWritesFromAuditFile(path, t0, t1)
		writes, renewals = w, n
		return past, "no entry after the window yet", readErr
	})
	if err != nil {
		return err
	}
	total := 0
	for _, w := range writes {
		total += w.Count
	}
	r.HostWrites = writes
	r.HostOtherWrites = round3(float64(total-renewals) / t1.Sub(t0).Seconds())
	for _, w := range writes {
		b.progress("  host write %-60s %5d (%.3f/s)", w.Request, w.Count, w.PerSecond)
	}
	return nil
}

// waitQuiet waits, up to --quiet-wait, until the machine's 1-minute load
// average is at most --max-load, before the window named by what. The
// average decays over minutes, so right after the bulk objects were
// created it still carries that burst, and a window opened then is judged
// on the population, not on the steady state (the rig itself used a third
// of a core at steady state, the load average was still 2.1). Before the
// steady window the churn runs meanwhile; the window is judged as ever.
func (b *scBench) waitQuiet(ctx context.Context, what string) error {
	deadline := time.Now().Add(b.o.quietWait)
	for said := false; ; said = true {
		load, _ := loadAvg()
		switch {
		case load <= b.o.maxLoad:
			return nil
		case time.Now().After(deadline):
			b.progress("load average %.2f still above %.2f after %s: opening the %s anyway", load, b.o.maxLoad, b.o.quietWait, what)
			return nil
		case !said:
			b.progress("load average %.2f above %.2f: waiting up to %s for it to fall before the %s", load, b.o.maxLoad, b.o.quietWait, what)
		}
		if err := sleepCtx(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

// decisions times the decision steps (power-offs, then exhaustion) in a
// window of their own, judged like the steady window: with the churn
// stopped the machine often has the headroom the steady window lacked, and
// a steady window with headroom says nothing of the minutes after it.
func (b *scBench) decisions(ctx context.Context, ms scManagers, r *scResult) error {
	holder, leader, err := ms.heldBy(ctx)
	if err != nil {
		return fmt.Errorf("which replica holds which member: %w", err)
	}
	role := func(member string) string { return ms.role(holder, leader, member) }
	if err := b.waitQuiet(ctx, "decision steps"); err != nil {
		return err
	}
	health, err := b.startHealth(ctx)
	if err != nil {
		return err
	}
	if r.Taint, r.TaintByHolder, err = b.powerOffs(ctx, role); err != nil {
		health.finish()
		return fmt.Errorf("taint latency: %w", err)
	}
	r.Taint.Basis = scTaintBasis
	r.Shift, r.ShiftHolder, err = b.exhaustion(ctx, role)
	v := judgeValidity(health.finish(), b.o.maxLoad, 0, scMaxChurnLag)
	if err != nil {
		return fmt.Errorf("shift latency: %w", err)
	}
	r.Shift.Basis = scShiftBasis
	r.DecisionsValidity = &v
	if v.Valid {
		b.progress("decision steps VALID: load at most %.2f (limit %.2f), every probe within %s", v.MaxLoad1, v.MaxLoad, scProbeLimit)
	} else {
		b.progress("decision steps INVALID: %s", strings.Join(v.Reasons, "; "))
	}
	return nil
}

// loadAvg reads the machine's 1- and 5-minute load averages.
func loadAvg() (float64, float64) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, 0
	}
	l1, _ := strconv.ParseFloat(f[0], 64)
	l5, _ := strconv.ParseFloat(f[1], 64)
	return l1, l5
}

// scSteadyProfile is how much of the end of the steady window each
// manager's CPU profile covers.
const scSteadyProfile = 60 * time.Second

// steadyCPUProfiles takes each manager's CPU profile over the last
// scSteadyProfile of a window of length window that starts now, while the
// churn runs: a profile taken after the window shows the manager at rest,
// not what the churn costs it. The returned func waits for them.
func (b *scBench) steadyCPUProfiles(ctx context.Context, ms scManagers, window time.Duration) func() {
	secs := int(min(window, scSteadyProfile).Seconds())
	if secs < 1 {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			if sleepCtx(ctx, window-time.Duration(secs)*time.Second) != nil {
				return
			}
			url := fmt.Sprintf("%s/profile?seconds=%d", m.pprof, secs)
			data, err := httpGet(ctx, url, time.Duration(secs)*time.Second+time.Minute)
			if err != nil {
				b.progress("CPU profile of the steady window: %v", err)
				return
			}
			m.steadyCPU = data
		})
	}
	return wg.Wait
}

// saveProfiles saves a heap and a CPU profile of the manager (the steady
// window's when one was taken, else 20 s from now) and prints their top
// entries.
func (b *scBench) saveProfiles(ctx context.Context, m *scManager, r *scResult, tag string) {
	dir, err := filepath.Abs(b.o.profileDir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		b.progress("profiles: %v", err)
		return
	}
	for _, p := range []struct{ name, url string }{
		{"heap", m.pprof + "/heap"},
		{"cpu", m.pprof + "/profile?seconds=20"},
	} {
		var data []byte
		if p.name == "cpu" && m.steadyCPU != nil {
			data, m.steadyCPU = m.steadyCPU, nil
		} else {
			data, err = httpGet(ctx, p.url, 60*time.Second)
		}
		if err != nil {
			b.progress("profile %s: %v", p.name, err)
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pb.gz", b.o.size, tag, p.name))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.progress("profile %s: %v", p.name, err)
			continue
		}
		r.Profiles = append(r.Profiles, path)
		args := []string{"tool", "pprof", "-top", "-nodecount=12"}
		if p.name == "heap" {
			args = append(args, "-sample_index=inuse_space")
		}
		top, err := exec.CommandContext(ctx, "go", append(args, m.bin, path)...).CombinedOutput()
		if err != nil {
			b.progress("go tool pprof %s: %v", path, err)
			continue
		}
		b.progress("profile %s saved to %s; top:\n%s", p.name, path, top)
	}
}
