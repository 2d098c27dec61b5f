//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fedfailover/fedfailover/internal/lab"
)

// Shard Lease timings of the lab test: a dead replica's members move after
// about 6s.
const (
	e2eShardLease = 6 * time.Second
	e2eShardRenew = 4 * time.Second
	e2eShardRetry = 1 * time.Second
)

// managerProc is one manager process of the lab test.
type managerProc struct {
	name    string
	cmd     *exec.Cmd
	metrics string // host:port of its plain-HTTP metrics
	log     string
	exited  chan struct{}
}

// TestShardingAcrossManagerProcesses runs three real manager processes with
// --shard against the lab host: every member is connected by exactly one of
// them, and after kill -9 of the one holding most, the survivors take its
// members over within the lease duration (plus retry periods and a cache
// sync), never two at once.
func TestShardingAcrossManagerProcesses(t *testing.T) {
	nrHost(t)
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := st.Cluster(lab.HostName).Kubeconfig
	var members []string
	for _, c := range st.Clusters {
		if c.Name != lab.HostName {
			members = append(members, c.Name)
		}
	}
	if len(members) == 0 {
		t.Fatal("the lab has no members")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fedfailover-shard-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })

	bin, err := buildManager()
	if err != nil {
		t.Fatal(err)
	}
	var procs []*managerProc
	for i := range 3 {
		procs = append(procs, startManagerProc(t, bin, kubeconfig, ns.Name, fmt.Sprintf("replica-%d", i)))
	}
	inv := watchConnections(procs, members)
	defer inv.stop(t)

	eventually(t, 2*time.Minute, "each member connected by exactly one replica", func(context.Context) (bool, string) {
		return connectedOnce(procs, members)
	})
	victim, most := procs[0], -1
	for _, p := range procs {
		if n := len(p.connected(members)); n > most {
			victim, most = p, n
		}
	}
	moved := victim.connected(members)
	holder := leaseHolder(t, cs, ns.Name, moved[0])
	t.Logf("killing %s (holder %s of %v)", victim.name, holder, moved)
	victim.kill(t)
	killed := time.Now()
	survivors := []*managerProc{}
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, p)
		}
	}
	// Lease handover: within the lease duration plus the peers' and the
	// acquisition's retry periods (and slack for a loaded lab).
	handover := e2eShardLease + 3*e2eShardRetry + 5*time.Second
	eventually(t, handover, "the killed replica's member Leases taken over", func(context.Context) (bool, string) {
		for _, m := range moved {
			if h := leaseHolder(t, cs, ns.Name, m); h == holder || h == "" {
				return false, fmt.Sprintf("%s still held by %q", m, h)
			}
		}
		return true, ""
	})
	t.Logf("Leases taken over %s after kill -9", time.Since(killed).Round(100*time.Millisecond))
	eventually(t, time.Minute, "each member connected by exactly one survivor", func(context.Context) (bool, string) {
		return connectedOnce(survivors, members)
	})
	t.Logf("members connected again %s after kill -9", time.Since(killed).Round(100*time.Millisecond))
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// startManagerProc starts the manager in its own process group; it is
// stopped (and its log shown on failure) when the test ends.
func startManagerProc(t *testing.T, bin, kubeconfig, ns, name string) *managerProc {
	t.Helper()
	p := &managerProc{name: name, metrics: freePort(t), log: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "--kubeconfig", kubeconfig,
		"--leader-elect", "--leader-election-namespace", ns,
		"--shard", "--shard-lease-namespace", ns,
		"--shard-lease-duration", e2eShardLease.String(), "--shard-renew-deadline", e2eShardRenew.String(),
		"--shard-retry-period", e2eShardRetry.String(),
		"--metrics-bind-address", p.metrics, "--metrics-secure=false",
		"--health-probe-bind-address", freePort(t))
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("--- %s log (last 60 lines) ---\n%s", p.name, tail(string(b), 60))
			}
		}
	})
	return p
}

func (p *managerProc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

var connectedLine = regexp.MustCompile(`^fedfailover_member_connected\{cluster="([^"]+)"\} (\S+)$`)

// connected lists the members the process reports connected; nil when its
// metrics cannot be read (it is gone or not started yet).
func (p *managerProc) connected(members []string) []string {
	select {
	case <-p.exited:
		return nil
	default:
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := connectedLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if v, err := strconv.ParseFloat(m[2], 64); err == nil && v == 1 {
			out = append(out, m[1])
		}
	}
	return out
}

// connectedOnce is true when every member is connected by exactly one of
// procs.
func connectedOnce(procs []*managerProc, members []string) (bool, string) {
	by := map[string][]string{}
	for _, p := range procs {
		for _, m := range p.connected(members) {
			by[m] = append(by[m], p.name)
		}
	}
	var bad []string
	for _, m := range members {
		if len(by[m]) != 1 {
			bad = append(bad, fmt.Sprintf("%s: %v", m, by[m]))
		}
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}

func leaseHolder(t *testing.T, cs kubernetes.Interface, ns, member string) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), "fedfailover-member-"+member, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// connectionWatch samples every process's connected members and records
// the first moment two processes reported the same member connected.
type connectionWatch struct {
	mu        sync.Mutex
	violation string
	done      chan struct{}
	stopped   chan struct{}
}

func watchConnections(procs []*managerProc, members []string) *connectionWatch {
	w := &connectionWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for {
			select {
			case <-w.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			by := map[string][]string{}
			for _, p := range procs {
				for _, m := range p.connected(members) {
					by[m] = append(by[m], p.name)
				}
			}
			for m, ps := range by {
				if len(ps) > 1 {
					w.mu.Lock()
					if w.violation == "" {
						w.violation = fmt.Sprintf("%s connected by %v at %s", m, ps, time.Now().Format(time.RFC3339Nano))
					}
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

func (w *connectionWatch) stop(t *testing.T) {
	t.Helper()
	close(w.done)
	<-w.stopped
	if w.violation != "" {
		t.Error(w.violation)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
