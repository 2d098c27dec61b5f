package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
)

// memberRow is one line of the members benchmark, as written to BENCH_JSON.
type memberRow struct {
	Nodes int `json:"nodes"`
	Pods  int `json:"pods"`
	// PodsRunning is how many had kwok's Running status when measured.
	PodsRunning int `json:"pods_running"`
	Runs        int `json:"runs"`
	// fedfailover's member cache (transformed objects), median of runs.
	CacheRSSMB     float64 `json:"cache_rss_mb"`
	CacheRSSMBP95  float64 `json:"cache_rss_mb_p95"`
	SyncSeconds    float64 `json:"sync_seconds"`
	SyncSecondsP95 float64 `json:"sync_seconds_p95"`
	MBPer10kPods   float64 `json:"cache_mb_per_10k_pods"`
	// Baseline: a plain controller-runtime cache of the same kinds.
	BaselineRSSMB       float64 `json:"baseline_cache_rss_mb"`
	BaselineSyncSeconds float64 `json:"baseline_sync_seconds"`
}

func membersCmd() *cobra.Command {
	var (
		nodes       []int
		podsPerNode int
		runs        int
		dir         string
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "Member cache memory and sync time at scale",
		Long: `Starts a host and one member, grows the member to each --nodes count of kwok
nodes with --pods-per-node pods each, and for each size measures, in a fresh
process per run, the time from manager start until the member is connected
(cache synced) and the resident memory the connection added. The baseline is
a plain controller-runtime cache of the same kinds without fedfailover's
transforms. Targets: <= 50 MB per 10,000 cached pods, sync <= 10 s at 2,000 nodes.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runMembersBench(ctx, cmd, nodes, podsPerNode, runs, dir)
		},
	}
	cmd.Flags().IntSliceVar(&nodes, "nodes", []int{1000, 2000}, "node counts to measure, ascending")
	cmd.Flags().IntVar(&podsPerNode, "pods-per-node", 10, "pods bound to each node")
	cmd.Flags().IntVar(&runs, "runs", 3, "measurements per size (each in a fresh process)")
	cmd.Flags().StringVar(&dir, "dir", "", "lab directory (default: a temporary directory)")
	return cmd
}

func runMembersBench(ctx context.Context, cmd *cobra.Command, sizes []int, podsPerNode, runs int, dir string) (err error) {
	out := cmd.OutOrStdout()
	progress := func(format string, args ...any) { progress(out, format, args...) }
	progress("starting the lab (host + 1 member)")
	l, down, err := upLab(ctx, dir, lab.Options{Members: 1, Nodes: 1}, progress)
	if err != nil {
		return err
	}
	defer downWith(&err, down)
	const memberName = "member1"
	self, err := os.Executable()
	if err != nil {
		return err
	}

	var rows []memberRow
	have := 0
	for _, size := range sizes {
		if size <= have {
			return fmt.Errorf("--nodes must be ascending, got %v", sizes)
		}
		progress("growing %s to %d bulk nodes with %d pods each", memberName, size, podsPerNode)
		start := time.Now()
		names, err := l.AddBulkNodes(ctx, memberName, size-have)
		if err != nil {
			return err
		}
		if err := l.CreateBulkPods(ctx, memberName, "bench", names[have:], podsPerNode); err != nil {
			return err
		}
		running, err := waitPodsRunning(ctx, l, memberName, "bench", size*podsPerNode)
		if err != nil {
			return err
		}
		progress("created in %s; %d of %d pods Running in kwok", time.Since(start).Round(time.Second), running, size*podsPerNode)
		have = size

		row := memberRow{Nodes: size, Pods: size * podsPerNode, PodsRunning: running, Runs: runs}
		var rss, sync, baseRSS, baseSync []float64
		for i := 0; i < runs; i++ {
			for _, plain := range []bool{false, true} {
				m, err := measureInChild(ctx, self, l.Kubeconfig(), memberName, plain)
				if err != nil {
					return err
				}
				if m.Nodes < size {
					return fmt.Errorf("cache held %d nodes, want at least %d", m.Nodes, size)
				}
				if plain {
					baseRSS, baseSync = append(baseRSS, m.RSSMB), append(baseSync, m.SyncSeconds)
				} else {
					rss, sync = append(rss, m.RSSMB), append(sync, m.SyncSeconds)
				}
			}
			progress("size %d run %d/%d: fedfailover %.1f MB %.2fs, plain cache %.1f MB %.2fs",
				size, i+1, runs, rss[i], sync[i], baseRSS[i], baseSync[i])
		}
		row.CacheRSSMB, row.CacheRSSMBP95 = Median(rss), P95(rss)
		row.SyncSeconds, row.SyncSecondsP95 = Median(sync), P95(sync)
		row.MBPer10kPods = row.CacheRSSMB / float64(row.Pods) * 10000
		row.BaselineRSSMB, row.BaselineSyncSeconds = Median(baseRSS), Median(baseSync)
		rows = append(rows, row)
	}

	fmt.Fprintln(out)
	var table [][]string
	for _, r := range rows {
		table = append(table, []string{
			strconv.Itoa(r.Nodes), strconv.Itoa(r.Pods),
			fmt.Sprintf("%.1f", r.CacheRSSMB), fmt.Sprintf("%.1f", r.CacheRSSMBP95), fmt.Sprintf("%.1f", r.MBPer10kPods),
			fmt.Sprintf("%.1f", r.BaselineRSSMB),
			fmt.Sprintf("%.2f", r.SyncSeconds), fmt.Sprintf("%.2f", r.SyncSecondsP95), fmt.Sprintf("%.2f", r.BaselineSyncSeconds),
		})
	}
	if err := Table(out, []string{"NODES", "PODS", "CACHE MB (MEDIAN)", "P95", "MB/10K PODS", "PLAIN CACHE MB",
		"SYNC S (MEDIAN)", "P95", "PLAIN SYNC S"}, table); err != nil {
		return err
	}
	fmt.Fprintln(out, "targets: <= 50 MB per 10,000 pods cached; sync <= 10 s at 2,000 nodes")
	return WriteJSON(out, map[string]any{"benchmark": "members", "runs": runs, "rows": rows})
}

// measurement is what one child process reports.
type measurement struct {
	SyncSeconds float64 `json:"syncSeconds"`
	RSSMB       float64 `json:"rssMB"`
	Nodes       int     `json:"nodes"`
	Pods        int     `json:"pods"`
}

// measureInChild runs one measurement in a fresh process so memory figures
// are not polluted by earlier runs or by the lab's own clients.
func measureInChild(ctx context.Context, self, kubeconfig, memberName string, plain bool) (measurement, error) {
	args := []string{"measure-member", "--kubeconfig", kubeconfig, "--member", memberName}
	if plain {
		args = append(args, "--plain")
	}
	c := exec.CommandContext(ctx, self, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	outb, err := c.Output()
	if err != nil {
		return measurement{}, fmt.Errorf("measure-member: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var m measurement
	if err := json.Unmarshal(outb, &m); err != nil {
		return measurement{}, fmt.Errorf("measure-member output %q: %w", outb, err)
	}
	return m, nil
}

func measureMemberCmd() *cobra.Command {
	var kubeconfig, memberName string
	var plain bool
	cmd := &cobra.Command{
		Use:    "measure-member",
		Short:  "One measurement of the members benchmark (internal)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			var m measurement
			var err error
			if plain {
				m, err = measurePlain(ctx, kubeconfig, memberName)
			} else {
				m, err = measureFedfailover(ctx, kubeconfig, memberName)
			}
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(m)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "lab kubeconfig")
	cmd.Flags().StringVar(&memberName, "member", "member1", "member to connect to")
	cmd.Flags().BoolVar(&plain, "plain", false, "measure a plain controller-runtime cache (the baseline)")
	return cmd
}

// rssMB returns the resident set size after a full GC that returns freed
// memory to the OS, so the difference of two readings is live data.
func rssMB() (float64, error) {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

func measureFedfailover(ctx context.Context, kubeconfig, memberName string) (measurement, error) {
	hostCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: lab.HostName}).ClientConfig()
	if err != nil {
		return measurement{}, err
	}
	s, err := scheme.New()
	if err != nil {
		return measurement{}, err
	}
	mgr, err := ctrl.NewManager(hostCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return measurement{}, err
	}
	members, err := member.SetupWithManager(ctx, mgr, member.Options{Namespace: lab.KubefedNS, DisablePolicyStatus: true})
	if err != nil {
		return measurement{}, err
	}
	before, err := rssMB()
	if err != nil {
		return measurement{}, err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(mctx) }()
	for !members.Connected(memberName) {
		select {
		case err := <-errc:
			return measurement{}, fmt.Errorf("manager stopped: %w", err)
		case <-ctx.Done():
			return measurement{}, fmt.Errorf("member %s not connected: %w", memberName, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	m := measurement{SyncSeconds: time.Since(start).Seconds()}
	reader, err := members.GetReader(ctx, memberName)
	if err != nil {
		return measurement{}, err
	}
	after, err := rssMB()
	if err != nil {
		return measurement{}, err
	}
	m.RSSMB = after - before
	m.Nodes, m.Pods, err = countMemberCached(ctx, reader)
	return m, err
}

// measurePlain is the baseline: an untransformed controller-runtime cache of
// the kinds fedfailover caches per member.
func measurePlain(ctx context.Context, kubeconfig, memberName string) (measurement, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: memberName}).ClientConfig()
	if err != nil {
		return measurement{}, err
	}
	s, err := scheme.New()
	if err != nil {
		return measurement{}, err
	}
	before, err := rssMB()
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	c, err := cache.New(cfg, cache.Options{Scheme: s})
	if err != nil {
		return measurement{}, err
	}
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Pod{}, &storagev1.VolumeAttachment{}, &storagev1.CSIDriver{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return measurement{}, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(ctx) {
		return measurement{}, fmt.Errorf("plain cache did not sync")
	}
	m := measurement{SyncSeconds: time.Since(start).Seconds()}
	after, err := rssMB()
	if err != nil {
		return measurement{}, err
	}
	m.RSSMB = after - before
	m.Nodes, m.Pods, err = countCached(ctx, c)
	return m, err
}

// countCached counts the Nodes and Pods a plain controller-runtime cache
// holds.
func countCached(ctx context.Context, r client.Reader) (nodes, pods int, err error) {
	var nl corev1.NodeList
	if err := r.List(ctx, &nl); err != nil {
		return 0, 0, err
	}
	var pl corev1.PodList
	if err := r.List(ctx, &pl); err != nil {
		return 0, 0, err
	}
	return len(nl.Items), len(pl.Items), nil
}

// countMemberCached counts the Nodes and Pods a member cache holds (its
// pods are cachedpod.Pods, which only VisitCached reads).
func countMemberCached(ctx context.Context, r client.Reader) (nodes, pods int, err error) {
	if err := member.VisitCached(ctx, r, "", func(*corev1.Node) { nodes++ }); err != nil {
		return 0, 0, err
	}
	if err := member.VisitCached(ctx, r, "", func(*cachedpod.Pod) { pods++ }); err != nil {
		return 0, 0, err
	}
	return nodes, pods, nil
}

// waitPodsRunning waits (at most 5 minutes) until kwok reports want pods
// Running in ns, so the cache holds objects with the status a kubelet would
// write, and returns how many are Running. On a busy machine kwok may lag;
// the benchmark then measures what is there and reports the count.
func waitPodsRunning(ctx context.Context, l *lab.Lab, cluster, ns string, want int) (int, error) {
	cl, err := l.Client(cluster)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		running := 0
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running >= want || time.Now().After(deadline) {
			return running, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}
