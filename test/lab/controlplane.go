package lab

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fedfailover/fedfailover/test/poll"
)

func (l *Lab) bin(name string) string { return filepath.Join(l.opts.BinDir, name) }

func (l *Lab) etcdProc(c *ClusterState) *Proc {
	client := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPeerPort)
	return &Proc{
		Component: CompEtcd, Cluster: c.Name, Binary: l.bin(CompEtcd), Port: c.EtcdPort,
		Log: filepath.Join(c.Dir, "logs", "etcd.log"),
		Args: []string{
			"--name=etcd", "--data-dir=" + filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=etcd=" + peer,
			// A lab loses nothing worth an fsync; it halves write latency.
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=4294967296", "--log-level=warn",
			"--enable-pprof=" + strconv.FormatBool(l.opts.Profiling),
		},
	}
}

func (l *Lab) apiserverProc(c *ClusterState) *Proc {
	f := func(name string) string { return filepath.Join(c.Dir, name) }
	tol := strconv.Itoa(l.opts.TolerationSeconds)
	p := &Proc{
		Component: CompAPIServer, Cluster: c.Name, Binary: l.bin(CompAPIServer), Port: c.APIPort,
		Log: filepath.Join(c.Dir, "logs", "kube-apiserver.log"),
		Args: []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.EtcdPort),
			"--etcd-prefix=" + etcdPrefix(l.opts.SharedEtcd, c.Name),
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(c.APIPort),
			"--tls-cert-file=" + f(fileServingCert), "--tls-private-key-file=" + f(fileServingKey),
			"--client-ca-file=" + f(fileCA),
			"--service-account-key-file=" + f(fileSAPub),
			"--service-account-signing-key-file=" + f(fileSAKey),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=10.96.0.0/16",
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			// Loopback addresses are invalid in Endpoints; nothing needs them.
			"--endpoint-reconciler-type=none",
			// Short lab timings: pods on a dead node are evicted after tol seconds.
			"--default-not-ready-toleration-seconds=" + tol,
			"--default-unreachable-toleration-seconds=" + tol,
			"--enable-priority-and-fairness=false",
			profilingFlag(l.opts.Profiling),
		},
	}
	if l.opts.AuditLog {
		p.Args = append(p.Args, "--audit-policy-file="+f(fileAuditPolicy), "--audit-log-path="+AuditLogPath(c),
			"--audit-log-format=json", "--audit-log-maxbackup=0", "--audit-log-maxsize=0")
	}
	return p
}

// etcdPrefix is where a cluster's API server keeps its objects: the
// default /registry, or a prefix of its own when clusters share one etcd.
func etcdPrefix(shared bool, cluster string) string {
	if shared {
		return "/lab-" + cluster
	}
	return "/registry"
}

// kcmControllers is kube-controller-manager's --controllers: all of them,
// but the node-lifecycle controller with NoNodeLifecycle and the
// attach-detach controller with NoAttachDetach. The taint-eviction
// controller stays: it evicts the pods of a node the lab's node monitor
// taints unreachable, as with the real controller.
func kcmControllers(o Options) string {
	out := "--controllers=*"
	if o.NoNodeLifecycle {
		out += ",-node-lifecycle-controller"
	}
	if o.NoAttachDetach {
		out += ",-persistentvolume-attach-detach-controller"
	}
	return out
}

func (l *Lab) kcmProc(c *ClusterState) *Proc {
	f := func(name string) string { return filepath.Join(c.Dir, name) }
	return &Proc{
		Component: CompKCM, Cluster: c.Name, Binary: l.bin(CompKCM), Port: c.KCMPort,
		Log: filepath.Join(c.Dir, "logs", "kube-controller-manager.log"),
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.KCMPort),
			"--leader-elect=false",
			kcmControllers(l.opts),
			// Fills service-account token Secrets (kubefedctl join needs them).
			"--service-account-private-key-file=" + f(fileSAKey),
			"--root-ca-file=" + f(fileCA),
			"--cluster-signing-cert-file=" + f(fileCA), "--cluster-signing-key-file=" + f(fileCAKey),
			// Short lab timings so node loss is noticed in seconds.
			"--node-monitor-period=2s",
			"--node-monitor-grace-period=" + l.opts.NodeMonitorGracePeriod.String(),
			"--terminated-pod-gc-threshold=100",
			profilingFlag(l.opts.Profiling),
		},
	}
}

func (l *Lab) schedulerProc(c *ClusterState) *Proc {
	return &Proc{
		Component: CompScheduler, Cluster: c.Name, Binary: l.bin(CompScheduler), Port: c.SchedulerPort,
		Log: filepath.Join(c.Dir, "logs", "kube-scheduler.log"),
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.SchedulerPort),
			"--leader-elect=false",
			profilingFlag(l.opts.Profiling),
		},
	}
}

// launch starts p, records it in the state and waits for check.
func (l *Lab) launch(ctx context.Context, p *Proc, check func(context.Context) error) error {
	if err := startProc(p, l.owned); err != nil {
		return err
	}
	if err := UpdateState(l.Dir, func(s *State) error { s.SetProc(p); return nil }); err != nil {
		return err
	}
	if check == nil {
		return nil
	}
	return waitReady(ctx, p, l.opts.StartTimeout, check)
}

func (l *Lab) startControlPlane(ctx context.Context, st *State, c *ClusterState) error {
	// A shared etcd is started once, before every control plane (bringUp).
	if !l.opts.SharedEtcd {
		if err := l.launch(ctx, l.etcdProc(c), etcdHealthy(c.EtcdPort)); err != nil {
			return err
		}
	}
	if err := l.startAPIServer(ctx, c); err != nil {
		return err
	}
	// The controller-manager and scheduler start together; both only need
	// the API server.
	kcm, sched := l.kcmProc(c), l.schedulerProc(c)
	if err := l.launch(ctx, kcm, nil); err != nil {
		return err
	}
	if err := l.launch(ctx, sched, nil); err != nil {
		return err
	}
	if err := waitReady(ctx, kcm, l.opts.StartTimeout, httpsHealthy(c.KCMPort)); err != nil {
		return err
	}
	return waitReady(ctx, sched, l.opts.StartTimeout, httpsHealthy(c.SchedulerPort))
}

func (l *Lab) startAPIServer(ctx context.Context, c *ClusterState) error {
	if l.opts.AuditLog {
		if err := os.WriteFile(filepath.Join(c.Dir, fileAuditPolicy), []byte(auditPolicy), 0o644); err != nil {
			return err
		}
	}
	cs, err := l.clientset(c)
	if err != nil {
		return err
	}
	return l.launch(ctx, l.apiserverProc(c), func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(body)) != "ok" {
			return fmt.Errorf("readyz: %s", body)
		}
		return nil
	})
}

func (l *Lab) clientset(c *ClusterState) (*kubernetes.Clientset, error) {
	rc, err := restConfig(c)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func etcdHealthy(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		return httpGetOK(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/health", port), `"health":"true"`)
	}
}

// insecureClient probes the self-signed health endpoints of the
// controller-manager and scheduler.
var insecureClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a lab component
}}

func httpsHealthy(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		return httpGetOK(ctx, insecureClient, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), "ok")
	}
}

func httpGetOK(ctx context.Context, hc *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return nil
}

func signalPID(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// restartProc starts the recorded process key again with its recorded
// command line and records the new pid.
func (l *Lab) restartProc(ctx context.Context, key string, check func(context.Context) error) (*Proc, error) {
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	old := st.Proc(key)
	if old == nil {
		return nil, fmt.Errorf("no process %s in the lab", key)
	}
	if procState(old.PID) != ProcGone {
		return nil, fmt.Errorf("%s is still running (pid %d)", key, old.PID)
	}
	p := *old
	p.PID = 0
	if err := l.launch(ctx, &p, check); err != nil {
		return nil, err
	}
	return &p, nil
}

// pollUntil calls cond every `every` until it is true or the timeout (or
// ctx) ends; the error then carries cond's last error.
func pollUntil(ctx context.Context, timeout, every time.Duration, cond func(context.Context) (bool, error)) error {
	_, err := poll.Until(ctx, timeout, every, "the condition", poll.Retrying(cond))
	return err
}
