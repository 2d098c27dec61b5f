package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The scale benchmark's fixed parts.
const (
	scNamespace   = "scale" // the federated Deployments and their RSPs
	scBulkNS      = "bench" // the bulk pods of every member
	scPolicy      = "bench-scale"
	scWorkload    = "web"            // federated Deployments are web-0, web-1, ...
	scVolumeEvery = 10               // one pod in ten mounts an RWO claim
	scNodeCPU     = "64"             // room for every RSP's replica on the lab's own nodes
	scNodePods    = "1000"           // idem
	scGrace       = 50 * time.Second // kube-controller-manager's default node monitor grace period
	scAttachEvery = 10 * time.Second // the lab attacher's list of every VolumeAttachment (lab.Options.AttachEvery)
)

// Default churn rates: a kubelet's nodeStatusReportFrequency, 1 % of pods
// replaced per minute, and two RSP scale events per minute (one RSP up by
// one replica and back).
const (
	scNodeStatusEvery  = 5 * time.Minute
	scPodChurnPercent  = 1.0
	scScaleEventsPerMn = 2.0
)

// Targets (issues 15 and 30).
const (
	scTargetSyncS = 60.0
	scTargetRSSMB = 300.0
	// scTargetReplicaRSSMB is each sharded replica's, at 10 x 5,000 x 10.
	scTargetReplicaRSSMB = 1024.0
	scTargetCPUPercent   = 2.0
	scTargetDecisionS    = 1.0
)

type scOptions struct {
	size         string
	members      int
	nodes        int
	podsPerNode  int
	rsps         int
	steady       time.Duration
	memberIdle   time.Duration
	replicas     int
	sharedEtcd   bool
	bulkViaEtcd  bool
	churn        churnRates
	maxLoad      float64
	quietWait    time.Duration
	settle       time.Duration
	powerOffs    int
	exhaustRSPs  int
	syncTimeout  time.Duration
	populateWait time.Duration
	notReadyFor  time.Duration
	profileDir   string
	dir          string
}

// scSizes are the --size shortcuts: members × nodes × pods per node, RSPs.
var scSizes = map[string]scOptions{
	"goal":    {members: 3, nodes: 2000, podsPerNode: 10, rsps: 500, replicas: 1, steady: 120 * time.Second, powerOffs: 10, exhaustRSPs: 50},
	"members": {members: 20, nodes: 100, podsPerNode: 10, rsps: 500, replicas: 1, steady: 120 * time.Second, powerOffs: 10, exhaustRSPs: 50},
	"sharded": {members: 10, nodes: 5000, podsPerNode: 10, rsps: 500, replicas: 3, steady: 120 * time.Second, powerOffs: 10, exhaustRSPs: 50},
	"small":   {members: 2, nodes: 50, podsPerNode: 10, rsps: 20, replicas: 1, steady: 30 * time.Second, powerOffs: 2, exhaustRSPs: 5},
}

func scaleCmd() *cobra.Command {
	var o scOptions
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "The real manager process at federation scale: sync time, memory, idle CPU, API requests, decision latency",
		Long: `Starts a scale lab of --members members (kube-controller-manager without the
node-lifecycle controller; the lab's node monitor marks its own nodes
unreachable instead; --shared-etcd: one etcd for every API server), each with
--nodes static bulk nodes (cordoned, status written once: Ready, no kwok, no
lease) and --pods-per-node static pods bound to each (status written once:
Running, Ready; one in ten with a ReadWriteOnce PV/PVC, its VolumeAttachment
marked attached once), a few lab nodes per member with kwok and Machines
(where the federated replicas run and nodes are powered off), --rsps
FederatedDeployments with RSPs spread over every member, and one
FailoverPolicy with both jobs. Nothing writes to the bulk objects but the
churn driver.

Before the manager starts, the lab's processes are measured idle over
--member-idle (CPU and RSS per member, host, shared etcd). During the settle
and steady windows the churn driver replays a member's traffic at stated
rates: a status report per bulk node every --node-status-every, --pod-churn
% of the bulk pods replaced per minute, --scale-events RSP scale events per
minute.

A run is INVALID (no figures, the reasons instead, in the table and the
JSON) when in its steady window the 1-minute load average exceeded
--max-load (default 0.75 per core: 1.5 on 2 cores), a member did not answer
/readyz within 1 s, or the churn driver fell more than 10 s behind. The
decision steps (taint, RSP shift) run after it, the churn stopped, once the
load is down again, and are judged the same way over their own window:
their latencies are figures only from a window with headroom, whatever the
steady window's verdict.

Then runs the manager binary (cmd/manager, --leader-elect, metrics on a
loopback port) as its own process and measures:
  sync          seconds from its start until fedfailover_member_connected is 1
                for every member
  memory        RSS (/proc) and Go heap in use (go_memstats_heap_inuse_bytes)
                after sync and after the steady window
  CPU           % of one core over --steady (/proc utime+stime), at the churn
                rates; next to it the rig's CPU (lab processes + bench)
                and the load average
  API requests  per second over --steady, reads (GET: get, list, watch
                starts) and writes, per API server, from the manager's own
                client-go counter rest_client_requests_total (by host): the
                API servers' apiserver_request_total cannot tell clients
                apart. The manager's host writes are also broken down by
                request from the host's audit log (its user agent) and
                counted without its own leader election Lease's renewals.
  taint         --power-offs lab nodes powered off one after another
                (Machine deleted as evidence): seconds from the loss rule
                turning true (the later of the Machine evidence and the node
                first seen not Ready + notReadyFor, as fedfailover counts it:
                from its own sighting, host clock) to the out-of-service taint
  RSP shift     one member's lab nodes cordoned and --exhaust-rsps RSPs
                scaled up: seconds from the exhaustion rule turning true (the
                new replica's Unschedulable lastTransitionTime +
                capacityExhaustedAfter, as fedfailover reads it) to
                fedfailover's change of the RSP's clusters
                Both are timed from watches, each object stamped when it is
                delivered (a few ms after the API server wrote it); the node's
                own lastTransitionTime is not used (whole seconds, truncated:
                it over-stated the taint latency by up to 1 s)
Targets: all members connected <= 60 s; RSS <= 300 MB at 3 x 2,000 x 10; CPU at
the churn rate <= 2 % of a core; 0 writes at steady state; decision p99 <= 1 s. Heap and CPU profiles of the manager (the CPU
profile over the last minute of the steady window, the churn running) are
saved to --profile-dir and their top entries printed; the manager's log is kept
there too (<size>-manager.log).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.resolve(cmd); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runScaleBench(ctx, cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.size, "size", "small", "goal (3 x 2,000 x 10, 500 RSPs), members (20 x 100 x 10), sharded (10 x 5,000 x 10, 3 replicas) or small (2 x 50 x 10); other flags override it")
	f.IntVar(&o.replicas, "replicas", 0, "manager replicas; above 1 they run sharded (--shard --sharded-rebalance) and the memory figures are the largest replica's, CPU and requests the replicas' sums (default: the size's)")
	f.IntVar(&o.members, "members", 0, "member clusters")
	f.IntVar(&o.nodes, "nodes", 0, "static bulk nodes per member")
	f.IntVar(&o.podsPerNode, "pods-per-node", 0, "static pods bound to each bulk node")
	f.IntVar(&o.rsps, "rsps", 0, "federated Deployments with RSPs")
	f.BoolVar(&o.sharedEtcd, "shared-etcd", false, "one etcd for every cluster of the lab (an --etcd-prefix per API server)")
	f.BoolVar(&o.bulkViaEtcd, "bulk-via-etcd", true, "write the static bulk straight into each member's etcd, as its API server stores it, instead of through the API server (two API writes a pod: 10 minutes at 60,000 pods)")
	f.DurationVar(&o.memberIdle, "member-idle", 30*time.Second, "window measuring the idle lab (per-member cost) before the manager starts; 0 skips it")
	f.DurationVar(&o.churn.NodeStatusEvery, "node-status-every", scNodeStatusEvery, "churn: each bulk node's status report period (the kubelet's nodeStatusReportFrequency); 0 turns it off")
	f.Float64Var(&o.churn.PodPercentPerMin, "pod-churn", scPodChurnPercent, "churn: % of the bulk pods replaced per minute; 0 turns it off")
	f.Float64Var(&o.churn.ScalePerMin, "scale-events", scScaleEventsPerMn, "churn: RSP scale events per minute (an RSP up by one replica, the next event back); 0 turns it off")
	f.Float64Var(&o.maxLoad, "max-load", 0, "a steady window whose 1-minute load average exceeds this is INVALID (default 0.75 per core)")
	f.DurationVar(&o.steady, "steady", 0, "steady window for CPU and request rates (goal 120s, small 30s)")
	f.DurationVar(&o.settle, "settle", 30*time.Second, "wait after sync before the steady window")
	f.DurationVar(&o.quietWait, "quiet-wait", 3*time.Minute, "after --settle, wait up to this long for the 1-minute load average to fall to --max-load (it carries the population's burst for minutes) before the steady window opens; the window is judged all the same")
	f.IntVar(&o.powerOffs, "power-offs", 0, "lab nodes powered off for the taint latency")
	f.IntVar(&o.exhaustRSPs, "exhaust-rsps", 0, "RSPs scaled up on the exhausted member for the shift latency")
	f.DurationVar(&o.populateWait, "populate-wait", 5*time.Minute, "how long to wait for the RSP pods Running and the bulk VolumeAttachments after creating them; then the lab is measured as it is")
	f.DurationVar(&o.syncTimeout, "sync-timeout", 10*time.Minute, "give up waiting for every member connected after this long")
	f.DurationVar(&o.notReadyFor, "not-ready-for", 5*time.Second, "the policy's nodeRecovery.notReadyFor")
	f.StringVar(&o.profileDir, "profile-dir", "bench-scale-profiles", "where the manager's heap and CPU profiles are saved")
	f.StringVar(&o.dir, "dir", "", "lab directory (default: a temporary directory)")
	return cmd
}

// resolve fills the flags not given from the --size shortcut.
func (o *scOptions) resolve(cmd *cobra.Command) error {
	def, ok := scSizes[o.size]
	if !ok {
		return fmt.Errorf("--size must be goal, members, sharded or small, got %q", o.size)
	}
	set := func(name string, v *int, d int) {
		if !cmd.Flags().Changed(name) {
			*v = d
		}
	}
	set("members", &o.members, def.members)
	set("nodes", &o.nodes, def.nodes)
	set("pods-per-node", &o.podsPerNode, def.podsPerNode)
	set("rsps", &o.rsps, def.rsps)
	set("power-offs", &o.powerOffs, def.powerOffs)
	set("exhaust-rsps", &o.exhaustRSPs, def.exhaustRSPs)
	set("replicas", &o.replicas, def.replicas)
	if !cmd.Flags().Changed("steady") {
		o.steady = def.steady
	}
	if o.maxLoad <= 0 {
		o.maxLoad = scMaxLoadPerCore * float64(runtime.NumCPU())
	}
	switch {
	case o.members < 1 || o.nodes < 1 || o.podsPerNode < 0 || o.rsps < 1:
		return fmt.Errorf("members, nodes and rsps must be positive")
	case o.replicas < 1 || o.replicas > o.members:
		return fmt.Errorf("--replicas must be from 1 to --members (%d), got %d", o.members, o.replicas)
	case o.churn.NodeStatusEvery < 0 || o.churn.PodPercentPerMin < 0 || o.churn.ScalePerMin < 0 || o.memberIdle < 0 || o.quietWait < 0:
		return fmt.Errorf("churn rates, --member-idle and --quiet-wait must not be negative")
	case o.exhaustRSPs > o.rsps:
		return fmt.Errorf("--exhaust-rsps %d exceeds --rsps %d", o.exhaustRSPs, o.rsps)
	case o.steady < 10*time.Second:
		return fmt.Errorf("--steady must be at least 10s")
	}
	return nil
}

// labNodesPerMember is how many lab nodes (own kwok, Machine) each member
// gets: the powered-off ones spread round-robin, plus one that stays on.
func labNodesPerMember(powerOffs, members int) int {
	return (powerOffs+members-1)/members + 1
}

// scPolicySpec is the benchmark's FailoverPolicy: both jobs, the RSPs of
// the benchmark's namespace.
func scPolicySpec(notReadyFor time.Duration) v1alpha1.FailoverPolicySpec {
	pct := intstr.FromString("40%")
	rb := rbBenchPolicy
	rb.ReplicaSchedulingPreferences = v1alpha1.PodScope{Namespaces: []string{scNamespace}}
	// The shift latency is timed from the exhaustion rule turning true
	// (Unschedulable + capacityExhaustedAfter); a predictive cap would come
	// before it. Both modes read the same figures per pass (bound replicas
	// and the estimate), so the idle cost measured is the same.
	rb.Placement = v1alpha1.PlacementReactive
	return v1alpha1.FailoverPolicySpec{
		NodeRecovery: &v1alpha1.NodeRecoverySpec{
			NotReadyFor: v1alpha1.Duration(notReadyFor.String()), Method: v1alpha1.RecoveryMethodAuto,
			MaxUnhealthy: &pct, StormCooldown: "5s",
			Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true},
		},
		Rebalance: &rb,
	}
}

func runScaleBench(ctx context.Context, out io.Writer, o scOptions) (err error) {
	if o.dir == "" {
		// The manager binary is built next to the lab: the folder is the run's.
		if o.dir, err = os.MkdirTemp("", "fedfailover-bench-scale-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(o.dir) }()
	}
	b := &scBench{out: out, o: o, started: time.Now()}
	labNodes := labNodesPerMember(o.powerOffs, o.members)
	b.progress("starting the scale lab (host + %d members, %d lab nodes each, kubefed; no node-lifecycle controller; shared etcd: %t)",
		o.members, labNodes, o.sharedEtcd)
	var down func() error
	b.l, down, err = upLab(ctx, o.dir, lab.Options{
		Members: o.members, Nodes: labNodes,
		NodeCPU: scNodeCPU, NodePods: scNodePods, NodeMonitorGracePeriod: scGrace,
		// Static bulk: nothing renews its leases, and the node-lifecycle
		// controller's monitor of thousands of nodes is the lab's cost,
		// not the manager's. The lab's node monitor takes over for its
		// own nodes (the power-offs below).
		NoNodeLifecycle: true, SharedEtcd: o.sharedEtcd, BulkViaEtcd: o.bulkViaEtcd,
		// The rig writes the static VolumeAttachments attached (via etcd),
		// and no pod with a claim is scheduled later: the attach-detach
		// controller's reconciler over them is the member's cost alone.
		NoAttachDetach: o.bulkViaEtcd,
		// The idle window profiles the first member (scale_idle.go).
		Profiling: true,
		// The static VolumeAttachments are attached once; the lab's
		// attacher then only serves the lab nodes, whose attach times
		// the benchmark does not measure.
		AttachEvery: scAttachEvery,
		// Each lab node's kwok follows its own pods, not the bulk.
		KwokSingleNode: true,
		// Many control planes share the machine's cores while they start.
		StartTimeout: 3 * time.Minute,
		// The manager's host writes are broken down from the host's audit
		// log (scale_audit.go).
		AuditLog: true,
	}, b.progress)
	if err != nil {
		return err
	}
	defer downWith(&err, down)
	r := b.newResult()
	if err := b.populate(ctx, r); err != nil {
		return err
	}
	if err := b.idleLab(ctx, r); err != nil {
		return err
	}
	if err := b.measure(ctx, r); err != nil {
		return err
	}
	return b.report(r)
}
