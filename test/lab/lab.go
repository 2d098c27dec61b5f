// Package lab runs a local federation of real Kubernetes control planes with
// kwok nodes, kubefed and Cluster API objects, and injects faults into it.
// See docs/lab.md.
package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configures a lab. The zero value of a field means its default.
type Options struct {
	// Dir holds certificates, data, logs, kubeconfig and state (default .lab).
	Dir string `json:"dir"`
	// BinDir holds the binaries from `make tools` (default <repo>/bin).
	BinDir string `json:"binDir"`
	// Members is the number of member clusters (default 2).
	Members int `json:"members"`
	// Nodes is the number of kwok nodes per member (default 3).
	Nodes int `json:"nodes"`
	// BasePort, when set, fixes the API server ports: host=BasePort,
	// memberN=BasePort+N. Other ports are always picked free.
	BasePort int `json:"basePort,omitempty"`
	// Node allocatable resources.
	NodeCPU    string `json:"nodeCPU"`
	NodeMemory string `json:"nodeMemory"`
	NodePods   string `json:"nodePods"`
	// NodeLeaseSeconds is the kwok node lease duration (renewed every 1/4).
	NodeLeaseSeconds int `json:"nodeLeaseSeconds"`
	// NodeMonitorGracePeriod is how long kube-controller-manager waits for a
	// lease renewal before marking a node NotReady (Kubernetes default 50s).
	NodeMonitorGracePeriod time.Duration `json:"nodeMonitorGracePeriod"`
	// TolerationSeconds are the API server's default not-ready/unreachable
	// NoExecute toleration seconds (Kubernetes default 300).
	TolerationSeconds int `json:"tolerationSeconds"`
	// PowerOffCondition is the Machine condition the powered-off-condition
	// evidence sets (default type PowerOn, reason PoweredOff).
	PowerOffConditionType   string `json:"powerOffConditionType"`
	PowerOffConditionReason string `json:"powerOffConditionReason"`
	// MachineNamespace holds the CAPI Cluster and Machine objects (in the
	// host, or in the management cluster).
	MachineNamespace string `json:"machineNamespace"`
	// ManagementCluster starts one more control plane, ManagementName, as
	// the Cluster API management cluster: the members' Clusters and
	// Machines live there instead of in the host, each KubeFedCluster names
	// it (annotation failover.fedfailover.io/capi-management-cluster) and
	// its kubeconfig is the Secret ManagementSecret in the kubefed
	// namespace. Its API server port is BasePort+Members+1 with BasePort.
	ManagementCluster bool `json:"managementCluster,omitempty"`
	// StartTimeout bounds each component's start (default 60s).
	StartTimeout time.Duration `json:"startTimeout"`
	// KubefedTimings picks kubefed's cluster health check and controller
	// delays: KubefedTimingsDefault (the kubefed chart's defaults, what users
	// run) unless set, or from $FEDFAILOVER_LAB_KUBEFED_TIMINGS when empty.
	KubefedTimings string `json:"kubefedTimings"`
	// AuditLog makes every API server write an audit log of the writes to
	// its cluster's logs/audit.log (AuditLogPath): what a checker that must
	// not trust the operator under test reads.
	AuditLog bool `json:"auditLog,omitempty"`
	// NoNodeLifecycle runs kube-controller-manager without its
	// node-lifecycle controller (scale labs: that controller's node
	// monitor is the lab's largest steady cost with thousands of nodes).
	// The lab's own node monitor (nodemonitor.go) then marks its own
	// nodes unreachable when their kwok stops renewing the lease, as that
	// controller would; static bulk nodes (AddStaticNodes) need it, since
	// nothing renews their leases. The default lab keeps the real
	// controller.
	NoNodeLifecycle bool `json:"noNodeLifecycle,omitempty"`
	// NoAttachDetach runs kube-controller-manager without its
	// attach-detach controller (scale labs whose static VolumeAttachments
	// the rig writes attached, BulkViaEtcd: that controller's reconciler
	// walks every attached volume ten times a second, 8 % of a core per
	// member at 2,000 volumes, and writes nothing once they are attached).
	// No VolumeAttachment is created for a pod scheduled later.
	NoAttachDetach bool `json:"noAttachDetach,omitempty"`
	// SharedEtcd runs one etcd (the host's) for every cluster of the lab;
	// each API server keeps its objects under its own --etcd-prefix.
	SharedEtcd bool `json:"sharedEtcd,omitempty"`
	// AttachEvery is how often the lab's attacher lists a member's
	// VolumeAttachments (default: every pass of the lab's controllers,
	// 500 ms). The API server cannot filter them by node, so a scale lab
	// with thousands of static ones (attached once, AttachStaticVolumes)
	// lists them less often: each list sends every one of them.
	AttachEvery time.Duration `json:"attachEvery,omitempty"`
	// BulkViaEtcd has AddStaticNodes and CreateStaticPods write the static
	// bulk straight into each member's etcd, as its API server stores it
	// (etcdbulk.go), instead of through the API server: minutes instead
	// of an hour for hundreds of thousands of pods.
	BulkViaEtcd bool `json:"bulkViaEtcd,omitempty"`
	// KwokSingleNode runs each lab node's kwok with --manage-single-node:
	// its pod watch then carries the node's name and the API server sends
	// it that node's pods only. Without it (the default, what the e2e
	// tests and the fault campaign have run on) each kwok process selects
	// its node by label and watches every scheduled pod of the member:
	// with tens of thousands of static pods, each lab node's kwok holds
	// and follows all of them.
	KwokSingleNode bool `json:"kwokSingleNode,omitempty"`
	// Profiling has every control-plane component serve its pprof
	// endpoints (ComponentProfile): the scale benchmark's look at what a
	// member costs at rest.
	Profiling bool `json:"profiling,omitempty"`
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any) `json:"-"`
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		o.Dir = ".lab"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = dir
	if o.BinDir == "" {
		o.BinDir = DefaultBinDir()
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	if o.Members == 0 {
		o.Members = 2
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Members < 1 || o.Members > 20 {
		return fmt.Errorf("members must be between 1 and 20, got %d", o.Members)
	}
	if o.Nodes < 1 || o.Nodes > 200 {
		return fmt.Errorf("nodes must be between 1 and 200, got %d", o.Nodes)
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "4"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "16Gi"
	}
	if o.NodePods == "" {
		o.NodePods = "110"
	}
	if o.NodeLeaseSeconds == 0 {
		o.NodeLeaseSeconds = 8
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 16 * time.Second
	}
	if o.TolerationSeconds == 0 {
		o.TolerationSeconds = 30
	}
	if o.PowerOffConditionType == "" {
		o.PowerOffConditionType = "PowerOn"
	}
	if o.PowerOffConditionReason == "" {
		o.PowerOffConditionReason = "PoweredOff"
	}
	if o.MachineNamespace == "" {
		o.MachineNamespace = "default"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.KubefedTimings == "" {
		o.KubefedTimings = os.Getenv(KubefedTimingsEnv)
	}
	if o.KubefedTimings == "" {
		o.KubefedTimings = KubefedTimingsDefault
	}
	if _, err := kubefedTimingsFor(o.KubefedTimings); err != nil {
		return err
	}
	return nil
}

// Lab is a handle on a running lab. The process that started it (Up) also
// runs the lab's own controllers (attacher, Machine status); handles from
// Open only read the state and inject faults.
type Lab struct {
	Dir  string
	opts Options
	logf func(string, ...any)
	// owned is true in the process that started the lab: its children die
	// with it.
	owned bool

	mu      sync.Mutex
	clients map[string]client.Client
	// leases are the node monitor's sightings (NoNodeLifecycle), by
	// <cluster>/<node>.
	leases      map[string]leaseSighting
	lastMonitor time.Time
	// lastAttach is when the attacher last listed each member's
	// VolumeAttachments (AttachEvery).
	lastAttach map[string]time.Time

	bgCancel context.CancelFunc
	bgDone   sync.WaitGroup
}

// Scheme knows every type the lab writes.
var Scheme = runtime.NewScheme()

func init() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(clientgoscheme.AddToScheme(Scheme))
	must(apiextensionsv1.AddToScheme(Scheme))
	must(clusterv1.AddToScheme(Scheme))
}

// Open returns a handle on the lab running in dir.
func Open(dir string) (*Lab, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, StateFile)); err != nil {
		return nil, ErrNoLab
	}
	st, err := LoadState(abs)
	if err != nil {
		return nil, err
	}
	l := &Lab{Dir: abs, opts: st.Options, clients: map[string]client.Client{}, logf: func(string, ...any) {}}
	return l, nil
}

// State returns the current persisted state.
func (l *Lab) State() (*State, error) { return LoadState(l.Dir) }

// Kubeconfig is the path of the merged kubeconfig (contexts host, member1...).
func (l *Lab) Kubeconfig() string { return filepath.Join(l.Dir, "kubeconfig") }

// Options returns the options the lab runs with.
func (l *Lab) Options() Options { return l.opts }

// Members lists the member cluster names.
func (l *Lab) Members() []string {
	var out []string
	for i := 1; i <= l.opts.Members; i++ {
		out = append(out, MemberName(i))
	}
	return out
}

// MemberName is the name (and kubeconfig context) of member i (1-based).
func MemberName(i int) string { return fmt.Sprintf("member%d", i) }

// NodeName is the name of node j (1-based) of a member.
func NodeName(member string, j int) string { return fmt.Sprintf("%s-node-%d", member, j) }

// Client returns a controller-runtime client for the named cluster.
func (l *Lab) Client(cluster string) (client.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.clients[cluster]; ok {
		return c, nil
	}
	cs, err := l.clusterState(cluster)
	if err != nil {
		return nil, err
	}
	rc, err := restConfig(cs)
	if err != nil {
		return nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cluster, err)
	}
	l.clients[cluster] = c
	return c, nil
}

// MustClient is Client for callers that already know the cluster exists.
func (l *Lab) MustClient(cluster string) client.Client {
	c, err := l.Client(cluster)
	if err != nil {
		panic(err)
	}
	return c
}

// Up starts a lab. On any error everything it started is stopped again.
func Up(ctx context.Context, opts Options) (_ *Lab, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := CheckBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	if st, err := LoadState(opts.Dir); err == nil && procState(st.SupervisorPID) != ProcGone {
		return nil, fmt.Errorf("a lab is already running in %s (supervisor pid %d); run `fedfailover-lab down --dir %s`", opts.Dir, st.SupervisorPID, opts.Dir)
	}
	// A lab left behind by a killed supervisor: clean it up first.
	if _, err := os.Stat(filepath.Join(opts.Dir, StateFile)); err == nil {
		if old, err := Open(opts.Dir); err == nil {
			_ = old.Down(ctx)
		}
	}
	if err := cleanDir(opts.Dir); err != nil {
		return nil, err
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	l := &Lab{Dir: opts.Dir, opts: opts, logf: logf, owned: true, clients: map[string]client.Client{}}
	start := time.Now()
	st, err := l.plan()
	if err != nil {
		_ = os.RemoveAll(opts.Dir)
		return nil, err
	}
	if err := withStateLock(l.Dir, func() error { return writeState(l.Dir, st) }); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			logf("lab: start failed, tearing down: %v", err)
			_ = l.Down(context.Background())
		}
	}()
	if err := l.bringUp(ctx, st); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	if err := UpdateState(l.Dir, func(s *State) error { s.Ready, s.StartupSecs = true, secs; return nil }); err != nil {
		return nil, err
	}
	logf("lab: ready in %.1fs; kubeconfig %s", secs, l.Kubeconfig())
	return l, nil
}

// SupervisorLog is the log of a detached supervisor inside the lab dir.
const SupervisorLog = "supervisor.log"

// cleanDir empties dir except the detached supervisor's log, which is being
// written while the lab starts.
func cleanDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == SupervisorLog {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// plan allocates ports, generates certificates and kubeconfigs.
func (l *Lab) plan() (*State, error) {
	o := l.opts
	ports := NewPortAllocator()
	st := &State{
		Dir: l.Dir, BinDir: o.BinDir, Kubeconfig: l.Kubeconfig(),
		SupervisorPID: os.Getpid(), StartedAt: time.Now(), Options: o,
	}
	names := []string{HostName}
	names = append(names, l.Members()...)
	for i, name := range names {
		c := &ClusterState{Name: name, Role: RoleMember, Index: i, Dir: filepath.Join(l.Dir, name)}
		if i == 0 {
			c.Role = RoleHost
		}
		c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
		var err error
		if o.BasePort > 0 {
			c.APIPort = o.BasePort + i
			err = ports.Claim(c.APIPort)
		} else {
			c.APIPort, err = ports.Free()
		}
		if err != nil {
			return nil, fmt.Errorf("%s API server port: %w", name, err)
		}
		for _, p := range []*int{&c.EtcdPort, &c.EtcdPeerPort, &c.KCMPort, &c.SchedulerPort} {
			if *p, err = ports.Free(); err != nil {
				return nil, err
			}
		}
		if o.SharedEtcd && i > 0 {
			// Every API server talks to the host's etcd (its own prefix).
			c.EtcdPort, c.EtcdPeerPort = st.Clusters[0].EtcdPort, st.Clusters[0].EtcdPeerPort
		}
		if c.Role == RoleMember {
			for j := 1; j <= o.Nodes; j++ {
				c.Nodes = append(c.Nodes, NodeState{
					Name: NodeName(name, j),
					Zone: fmt.Sprintf("%s-zone-%c", name, 'a'+rune((j-1)%3)),
				})
			}
		}
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, err
		}
		pki, err := NewClusterPKI(name)
		if err != nil {
			return nil, fmt.Errorf("%s certificates: %w", name, err)
		}
		if err := pki.Write(c.Dir); err != nil {
			return nil, err
		}
		st.Clusters = append(st.Clusters, c)
	}
	if o.ManagementCluster {
		c := &ClusterState{Name: ManagementName, Role: RoleManagement, Index: len(names), Dir: filepath.Join(l.Dir, ManagementName)}
		c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
		var err error
		if o.BasePort > 0 {
			c.APIPort = o.BasePort + len(names)
			err = ports.Claim(c.APIPort)
		} else {
			c.APIPort, err = ports.Free()
		}
		if err != nil {
			return nil, fmt.Errorf("%s API server port: %w", c.Name, err)
		}
		for _, p := range []*int{&c.EtcdPort, &c.EtcdPeerPort, &c.KCMPort, &c.SchedulerPort} {
			if *p, err = ports.Free(); err != nil {
				return nil, err
			}
		}
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, err
		}
		pki, err := NewClusterPKI(c.Name)
		if err != nil {
			return nil, fmt.Errorf("%s certificates: %w", c.Name, err)
		}
		if err := pki.Write(c.Dir); err != nil {
			return nil, err
		}
		st.Management = c
	}
	if err := writeKubeconfigs(st); err != nil {
		return nil, err
	}
	return st, nil
}

// bringUp starts all components and configures the federation.
func (l *Lab) bringUp(ctx context.Context, st *State) error {
	if l.opts.SharedEtcd {
		host := st.Clusters[0]
		if err := l.launch(ctx, l.etcdProc(host), etcdHealthy(host.EtcdPort)); err != nil {
			return err
		}
	}
	// Control planes start in parallel: they are independent.
	planes := st.Clusters
	if st.Management != nil {
		planes = append(slices.Clone(planes), st.Management)
	}
	if err := parallel(planes, func(c *ClusterState) error { return l.startControlPlane(ctx, st, c) }); err != nil {
		return err
	}
	l.logf("lab: control planes up (%s)", time.Since(st.StartedAt).Round(100*time.Millisecond))
	var wg sync.WaitGroup
	var hostErr error
	wg.Go(func() { hostErr = errors.Join(l.setupHost(ctx, st), l.setupManagement(ctx, st)) })
	memberErr := parallel(st.Clusters[1:], func(c *ClusterState) error { return l.setupMember(ctx, st, c) })
	wg.Wait()
	if err := errors.Join(hostErr, memberErr); err != nil {
		return err
	}
	l.logf("lab: nodes and host services up (%s)", time.Since(st.StartedAt).Round(100*time.Millisecond))
	if err := l.joinMembers(ctx, st); err != nil {
		return err
	}
	if err := l.pointMembersAtManagement(ctx, st); err != nil {
		return err
	}
	if err := l.createMachines(ctx, st); err != nil {
		return err
	}
	if err := l.waitNodesReady(ctx, st, l.opts.StartTimeout); err != nil {
		return err
	}
	l.startControllers()
	return nil
}

// maxParallelStarts bounds how many clusters start or are set up at once.
// An API server's start is CPU-bound: twenty of them at once on two cores
// (the 20-member scale lab) left every one short of its start timeout.
// Labs of up to three members are not slowed by it.
const maxParallelStarts = 4

// parallel runs fn for every cluster, at most maxParallelStarts at a time,
// and joins the errors.
func parallel(cs []*ClusterState, fn func(*ClusterState) error) error {
	errs := make([]error, len(cs))
	slots := make(chan struct{}, maxParallelStarts)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = fn(c)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Down stops every lab process (kwok first, etcd last; SIGTERM, then SIGKILL)
// and removes the lab directory. It works from any process.
func (l *Lab) Down(ctx context.Context) error {
	if l.bgCancel != nil {
		l.bgCancel()
		l.bgDone.Wait()
		l.bgCancel = nil
	}
	st, err := LoadState(l.Dir)
	if errors.Is(err, ErrNoLab) {
		return os.RemoveAll(l.Dir)
	}
	if err != nil {
		return err
	}
	// A supervisor in another process tears down itself; give it the chance
	// so it stops its controllers first, then make sure of the rest.
	if st.SupervisorPID != os.Getpid() && procState(st.SupervisorPID) != ProcGone {
		_ = signalPID(st.SupervisorPID)
		waitGone(st.SupervisorPID, 30*time.Second)
		if st2, err := LoadState(l.Dir); err == nil {
			st = st2
		} else if errors.Is(err, ErrNoLab) {
			return os.RemoveAll(l.Dir)
		}
	}
	stopAll(st.Procs, 5*time.Second)
	for _, p := range st.Procs {
		if procState(p.PID) != ProcGone {
			return fmt.Errorf("process %s (pid %d) survived SIGKILL", p.Key(), p.PID)
		}
	}
	return os.RemoveAll(l.Dir)
}

// clusterState is the recorded state of one cluster of the lab.
func (l *Lab) clusterState(name string) (*ClusterState, error) {
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	c := st.Cluster(name)
	if c == nil {
		return nil, fmt.Errorf("no cluster %q in the lab", name)
	}
	return c, nil
}

// memberState is clusterState for a member cluster only.
func (l *Lab) memberState(name string) (*ClusterState, error) {
	c, err := l.clusterState(name)
	if err != nil {
		return nil, err
	}
	if c.Role != RoleMember {
		return nil, fmt.Errorf("%q is not a member of the lab", name)
	}
	return c, nil
}
