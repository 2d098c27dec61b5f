//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// isolatedManager is the real manager binary running as its own process in
// a network namespace (lab.Isolation). It reaches the host API server and
// every member only through the isolation's forwarders, so a test can cut
// fedfailover off a member while kubefed and the test keep their own
// connections. It runs with the manager's own defaults (probes, resync).
type isolatedManager struct {
	t   *testing.T
	iso *lab.Isolation
	cmd *exec.Cmd
	log string
	// addr is each cluster's API server address, as the manager dials it.
	addr map[string]string
	done chan error
}

var (
	managerBinOnce sync.Once
	managerBin     string
	managerBinErr  error
)

// buildManager builds cmd/manager once per test binary, outside bin/.
func buildManager() (string, error) {
	managerBinOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			managerBinErr = err
			return
		}
		dir, err := os.MkdirTemp("", "fedfailover-e2e-manager-")
		if err != nil {
			managerBinErr = err
			return
		}
		managerBin = filepath.Join(dir, "manager")
		cmd := exec.Command("go", "build", "-o", managerBin, "./cmd/manager")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			managerBinErr = fmt.Errorf("go build ./cmd/manager: %w\n%s", err, out)
		}
	})
	return managerBin, managerBinErr
}

// startIsolatedManager starts the manager in a fresh network namespace
// with every lab API server forwarded; it stops when the test ends.
func startIsolatedManager(t *testing.T) *isolatedManager {
	t.Helper()
	// Network namespaces need root; never skip: the partition tests are the
	// proof of the federation guard.
	if os.Geteuid() != 0 {
		t.Fatal("the fedfailover-only partition needs root (ip netns): run the e2e tests as root")
	}
	nrHost(t) // the FailoverPolicy CRD
	bin, err := buildManager()
	if err != nil {
		t.Fatal(err)
	}
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	iso, err := lab.NewIsolation("fedfailover-e2e")
	if err != nil {
		t.Fatal(err)
	}
	m := &isolatedManager{t: t, iso: iso, addr: map[string]string{}, done: make(chan error, 1),
		log: filepath.Join(t.TempDir(), "manager.log")}
	t.Cleanup(m.stop)
	for _, c := range st.Clusters {
		m.addr[c.Name] = fmt.Sprintf("127.0.0.1:%d", c.APIPort)
		if err := iso.Forward(m.addr[c.Name]); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(m.log)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = iso.Command(bin, "--kubeconfig="+st.Cluster(lab.HostName).Kubeconfig,
		"--kubefed-namespace="+lab.KubefedNS, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	// Its own process group, so stop reaches it and anything it started;
	// it dies with the test binary.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatal(err)
	}
	go func() {
		m.done <- m.cmd.Wait()
		_ = logf.Close()
	}()
	return m
}

// cut makes cluster unreachable for the manager only.
func (m *isolatedManager) cut(cluster string) {
	m.t.Helper()
	m.iso.Cut(m.addr[cluster])
	m.t.Logf("cut fedfailover off %s (%s)", cluster, m.addr[cluster])
}

// running fails the test if the manager exited.
func (m *isolatedManager) running() (bool, string) {
	select {
	case err := <-m.done:
		m.done <- err
		return false, fmt.Sprintf("the manager exited: %v", err)
	default:
		return true, ""
	}
}

// stop sends SIGTERM to the manager's process group, SIGKILL after 20 s,
// deletes the namespace and shows the log tail when the test failed.
func (m *isolatedManager) stop() {
	t := m.t
	if m.cmd != nil && m.cmd.Process != nil {
		pgid := m.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case err := <-m.done:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			t.Errorf("manager did not stop within 20s of SIGTERM (killed: %v)", <-m.done)
		}
		m.cmd = nil
	}
	if err := m.iso.Close(); err != nil {
		t.Errorf("isolation: %v", err)
	}
	if t.Failed() {
		if out, err := os.ReadFile(m.log); err == nil {
			if len(out) > 30000 {
				out = out[len(out)-30000:]
			}
			t.Logf("manager logs (tail):\n%s", out)
		}
	}
}

// waitMembersConnected waits until the policy's status shows every member
// connected by the isolated manager.
func (m *isolatedManager) waitMembersConnected(policy string, members ...string) {
	m.t.Helper()
	eventually(m.t, 90*time.Second, "the isolated manager connected to "+fmt.Sprint(members), func(ctx context.Context) (bool, string) {
		if ok, why := m.running(); !ok {
			return false, why
		}
		p, err := getPolicy(ctx, policy)
		if err != nil {
			return false, err.Error()
		}
		connected := map[string]bool{}
		for _, s := range p.Status.Members {
			connected[s.Name] = s.Connected
		}
		for _, n := range members {
			if !connected[n] {
				return false, fmt.Sprintf("members %+v", p.Status.Members)
			}
		}
		return true, ""
	})
}
