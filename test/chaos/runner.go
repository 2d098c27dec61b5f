package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/managerproc"
	"github.com/fedfailover/fedfailover/test/paths"
)

// Config is one campaign.
type Config struct {
	Runs int `json:"runs"`
	// Seed is the first run's seed; run i uses Seed+i-1.
	Seed uint64 `json:"seed"`
	// Members and Nodes size the lab.
	Members int `json:"members"`
	Nodes   int `json:"nodes"`
	// Window is each run's fault window; Faults are drawn into it.
	Window time.Duration `json:"window"`
	Faults int           `json:"faults"`
	// MinHold and MaxHold bound how long a fault stays.
	MinHold time.Duration `json:"minHold"`
	MaxHold time.Duration `json:"maxHold"`
	// LossMaxHold bounds power-offs and replacements (Params.LossMaxHold).
	LossMaxHold time.Duration `json:"lossMaxHold"`
	Bounds      Bounds        `json:"bounds"`
	// Dir is the lab's directory; KeepDir receives the logs of a run with
	// a violation.
	Dir     string `json:"-"`
	KeepDir string `json:"-"`
	BinDir  string `json:"-"`
	// KeepGoing runs the remaining runs after a violation.
	KeepGoing bool                             `json:"keepGoing"`
	Logf      func(format string, args ...any) `json:"-"`
}

// Campaign is a lab with fedfailover's manager under test.
type Campaign struct {
	cfg      Config
	root     string
	lab      *lab.Lab
	host     client.Client
	clients  map[string]client.Client
	members  []string
	topology Topology
	iso      *lab.Isolation
	addr     map[string]string // cluster → API server address, as the manager dials it

	managerBin, managerLog string
	mgrMu                  sync.Mutex
	mgr                    *managerproc.Process
	killed                 bool // the current process was killed on purpose
	restarts               int

	rspBaseline map[string]fedschedv1a1.ReplicaSchedulingPreferenceSpec
	// policyBaseline is each policy's spec as the API server stored it
	// (defaults applied): what a policy edit is undone to, and I4 checks.
	policyBaseline map[string]v1alpha1.FailoverPolicySpec
	baseline       map[string]map[string]int
	tails          []*auditTail
	// schedLogs are the members' kube-scheduler logs (controlplane.go).
	schedLogs map[string]*logTail
	// fence is the lab's fence agent the live policy's remediations go to.
	fence *fence
}

// logf prints a progress line stamped with the wall clock, the clock of
// the audit logs and the manager's log.
func (c *Campaign) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
}

// Run starts the lab, runs the campaign and tears the lab down.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	root, err := paths.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Campaign{cfg: cfg, root: root, clients: map[string]client.Client{}, addr: map[string]string{}}
	start := time.Now()
	c.logf("==> starting the lab: %d members x %d kwok nodes, audit logs on", cfg.Members, cfg.Nodes)
	c.lab, err = lab.Up(ctx, lab.Options{Dir: cfg.Dir, BinDir: cfg.BinDir, Members: cfg.Members, Nodes: cfg.Nodes, AuditLog: true})
	if err != nil {
		return nil, fmt.Errorf("starting the lab: %w", err)
	}
	defer func() {
		if c.iso != nil {
			c.stopManager()
			err = errors.Join(err, c.iso.Close())
		}
		err = errors.Join(err, c.lab.Down(context.WithoutCancel(ctx)))
	}()
	if err := c.prepare(ctx); err != nil {
		c.keepLogs("setup")
		return nil, err
	}
	c.logf("==> lab and fedfailover ready in %.0fs", time.Since(start).Seconds())
	rep = &Report{Config: cfg, Faults: map[Kind]int{}, Violations: map[string]int{}}
	for i := range cfg.Runs {
		seed := cfg.Seed + uint64(i)
		res, err := c.run(ctx, i+1, seed)
		if err != nil {
			c.keepLogs(fmt.Sprintf("seed-%d", seed))
			return rep, fmt.Errorf("run %d (seed %d): %w", i+1, seed, err)
		}
		rep.add(res)
		if len(res.Violations) > 0 {
			dir := c.keepLogs(fmt.Sprintf("seed-%d", seed))
			c.logf("run %d (seed %d) broke an invariant; logs kept in %s; replay: --seed %d --runs 1", i+1, seed, dir, seed)
			if !cfg.KeepGoing {
				break
			}
		}
	}
	rep.Restarts = c.restarts
	return rep, nil
}

// prepare installs fedfailover's CRDs, policies and workloads, starts the
// manager and records the baseline.
func (c *Campaign) prepare(ctx context.Context) error {
	st, err := c.lab.State()
	if err != nil {
		return err
	}
	kubeconfig := c.lab.Kubeconfig()
	if c.host, err = clientFor(kubeconfig, lab.HostName); err != nil {
		return err
	}
	c.topology = Topology{Nodes: map[string][]string{}}
	for _, cs := range st.Clusters {
		c.addr[cs.Name] = fmt.Sprintf("127.0.0.1:%d", cs.APIPort)
		agent := "fedfailover-member"
		if cs.Name == lab.HostName {
			agent = "fedfailover-manager"
		}
		c.tails = append(c.tails, &auditTail{cluster: cs.Name, path: lab.AuditLogPath(cs), agent: agent})
		if cs.Role != lab.RoleMember {
			continue
		}
		if c.schedLogs == nil {
			c.schedLogs = map[string]*logTail{}
		}
		c.schedLogs[cs.Name] = &logTail{path: lab.SchedulerLogPath(cs)}
		c.members = append(c.members, cs.Name)
		if c.clients[cs.Name], err = clientFor(kubeconfig, cs.Name); err != nil {
			return err
		}
		for _, n := range cs.Nodes {
			c.topology.Nodes[cs.Name] = append(c.topology.Nodes[cs.Name], n.Name)
		}
	}
	c.logf("==> installing fedfailover's CRDs, the policies %s and %s (dry run), and the workloads", livePolicy, dryPolicy)
	if err := c.install(ctx); err != nil {
		return err
	}
	c.logf("==> building and starting the manager (leader election on, in its own network namespace)")
	out := filepath.Join(c.cfg.Dir, "chaos")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	c.managerLog = filepath.Join(out, "manager.log")
	if c.managerBin, err = managerproc.Build(c.root, out); err != nil {
		return err
	}
	if c.iso, err = lab.NewIsolation("fedfailover-chaos"); err != nil {
		return err
	}
	for _, a := range c.addr {
		if err := c.iso.Forward(a); err != nil {
			return err
		}
	}
	if err := c.startManager(nil); err != nil {
		return err
	}
	return c.captureBaseline(ctx)
}

func (c *Campaign) managerArgs() []string {
	st, _ := c.lab.State()
	return []string{"--kubeconfig=" + st.Cluster(lab.HostName).Kubeconfig, "--kubefed-namespace=" + lab.KubefedNS,
		"--leader-elect", "--leader-election-namespace=" + managerNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", remediationKindFlag}
}

// startManager starts the manager binary; tr (when set) learns when.
func (c *Campaign) startManager(tr *Truth) error {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	if c.mgr != nil {
		if exited, _ := c.mgr.Exited(); !exited {
			return nil
		}
	}
	p, err := managerproc.Start(managerproc.Options{Bin: c.managerBin, Args: c.managerArgs(), Log: c.managerLog, Isolation: c.iso})
	if err != nil {
		return err
	}
	if c.mgr != nil {
		c.restarts++
	}
	c.mgr, c.killed = p, false
	if tr != nil {
		tr.Close(keyManagerDown, time.Now())
	}
	return nil
}

// killManager kill -9s the manager; tr learns it first.
func (c *Campaign) killManager(tr *Truth) error {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	tr.Open(keyManagerDown, time.Now())
	c.killed = true
	return c.mgr.Kill()
}

// crashed reports an exit of the manager nobody asked for.
func (c *Campaign) crashed() error {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	if exited, err := c.mgr.Exited(); exited && !c.killed {
		c.killed = true // reported once
		return fmt.Errorf("the manager exited on its own: %w", err)
	}
	return nil
}

func (c *Campaign) stopManager() {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	if c.mgr != nil {
		c.killed = true
		_ = c.mgr.Stop(20 * time.Second)
	}
}

// keepLogs copies the lab's logs and the manager's into KeepDir/name.
func (c *Campaign) keepLogs(name string) string {
	if c.cfg.KeepDir == "" {
		return ""
	}
	dst := filepath.Join(c.cfg.KeepDir, name)
	_ = os.MkdirAll(dst, 0o755)
	st, err := c.lab.State()
	if err != nil {
		return dst
	}
	for _, cs := range st.Clusters {
		_ = exec.Command("cp", "-r", filepath.Join(cs.Dir, "logs"), filepath.Join(dst, cs.Name)).Run()
	}
	_ = exec.Command("cp", c.managerLog, dst).Run()
	return dst
}
