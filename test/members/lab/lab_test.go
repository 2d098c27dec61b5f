//go:build e2e

// Package lab tests member connections on the local federation: real
// kube-apiservers, kwok nodes, kubefed joined with the real kubefedctl and
// Cluster API Machines played by the lab.
package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	poller "github.com/fedfailover/fedfailover/test/poll"
)

func TestLabMembersConnectAndMapNodesToMachines(t *testing.T) {
	ctx := context.Background()
	const nodes = 3
	l := upLab(t, 2, nodes)

	members := startMembers(t, l, member.Options{})

	for _, m := range l.Members() {
		poll(t, 30*time.Second, m+" connected with its nodes cached", func() error {
			r, err := members.GetReader(ctx, m)
			if err != nil {
				return err
			}
			var list corev1.NodeList
			if err := r.List(ctx, &list); err != nil {
				return err
			}
			if len(list.Items) != nodes {
				return errors.New("nodes not all cached yet")
			}
			return nil
		})
		for j := 1; j <= nodes; j++ {
			node := lab.NodeName(m, j)
			want, err := l.Machine(ctx, node)
			if err != nil {
				t.Fatalf("lab Machine of %s: %v", node, err)
			}
			poll(t, 10*time.Second, "Machine of "+node, func() error {
				got, err := members.MachineForNode(ctx, m, node)
				if err != nil {
					return err
				}
				if got.Namespace != want.Namespace || got.Name != want.Name {
					return errors.New("got " + got.Namespace + "/" + got.Name + ", want " + want.Namespace + "/" + want.Name)
				}
				return nil
			})
		}
	}

	// kubefedctl unjoin tears the connection down.
	gone := l.Members()[1]
	if _, err := l.Kubefedctl(ctx, "unjoin", gone, "--cluster-context="+gone); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, gone+" torn down", func() error {
		if members.Connected(gone) {
			return errors.New("still connected")
		}
		return nil
	})
	if !members.Connected(l.Members()[0]) {
		t.Errorf("%s disconnected by the unjoin of %s", l.Members()[0], gone)
	}

	// The lab restarts a kubefed controller-manager that exits, as the
	// kubelet would, and kubefed then health-checks the members again.
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	old := st.Proc(lab.HostName + "/" + lab.CompKubefedCM)
	if old == nil {
		t.Fatal("no kubefed controller-manager in the lab state")
	}
	if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "kubefed controller-manager restarted", func() error {
		st, err := l.State()
		if err != nil {
			return err
		}
		p := st.Proc(lab.HostName + "/" + lab.CompKubefedCM)
		if p == nil || p.PID == old.PID {
			return errors.New("not restarted yet")
		}
		if s := lab.ProcessState(p.PID); s != lab.ProcRunning {
			return fmt.Errorf("new pid %d is %s", p.PID, s)
		}
		return nil
	})
	// kubefed works again: a FederatedDeployment reaches the kept member.
	kept := l.Members()[0]
	if err := l.ApplyYAML(ctx, lab.HostName, lab.FederatedDeploymentYAML("after-restart", "web", 2, []string{kept})); err != nil {
		t.Fatal(err)
	}
	keptClient, err := l.Client(kept)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 90*time.Second, "kubefed propagates a Deployment to "+kept+" after its restart", func() error {
		return keptClient.Get(ctx, client.ObjectKey{Namespace: "after-restart", Name: "web"}, &appsv1.Deployment{})
	})
}

// upLab starts a lab of the given size for the test; it goes with it.
func upLab(t *testing.T, members, nodes int) *lab.Lab {
	t.Helper()
	if err := lab.CheckBinaries(lab.DefaultBinDir()); err != nil {
		t.Fatalf("lab binaries missing (run `make tools`): %v", err)
	}
	l, err := lab.Up(context.Background(), lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Members: members, Nodes: nodes, Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("lab teardown: %v", err)
		}
	})
	return l
}

// startMembers runs the member cache, as the manager sets it up, against
// the lab's host until the test ends; o's zero fields get the test's
// short probe timings.
func startMembers(t *testing.T, l *lab.Lab, o member.Options) *member.Cache {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: l.Kubeconfig()},
		&clientcmd.ConfigOverrides{CurrentContext: lab.HostName}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Logger: zap.New(zap.UseDevMode(true)),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Each test runs its own manager, with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	o.Namespace = lab.KubefedNS
	if o.ProbePeriod == 0 {
		o.ProbePeriod = 2 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = time.Second
	}
	mctx, cancel := context.WithCancel(context.Background())
	members, err := member.SetupWithManager(mctx, mgr, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return members
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poller.T(t, timeout, 200*time.Millisecond, what, poller.NoError(cond))
}
