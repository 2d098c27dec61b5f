// Package demo plays fedfailover's story on the local federation: a node with
// a stateful pod powers off and is recovered; a member runs out of capacity
// and its replicas move; it recovers and they move back. Every step is
// printed with the time since the start. `make demo` runs it through
// cmd/fedfailover-demo.
package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// Options say where the lab lives, where the binaries are and whether to
// leave everything running at the end.
type Options struct {
	Dir    string
	BinDir string
	Keep   bool
}

// demo carries what every step needs.
type demo struct {
	start   time.Time
	lab     *lab.Lab
	o       Options
	manager *exec.Cmd
}

func (d *demo) say(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// Run plays the demo on a new local federation and tears it down unless
// o.Keep is set.
func Run(ctx context.Context, o Options) (err error) {
	d := &demo{start: time.Now(), o: o}
	for _, b := range []string{"manager", "kubectl-failover"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make build`", b, o.BinDir)
		}
	}
	d.say("starting the local federation: host + 2 members x 3 kwok nodes (real kube-apiserver, controller-manager, scheduler, kubefed)")
	d.lab, err = lab.Up(ctx, lab.Options{Dir: o.Dir, BinDir: o.BinDir, Members: 2, Nodes: 3})
	if err != nil {
		return err
	}
	defer func() {
		if o.Keep && err == nil {
			d.printKeep()
			return
		}
		d.say("tearing down (KEEP=1 leaves everything running)")
		d.stopManager()
		if derr := d.lab.Down(context.Background()); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	d.say("federation up; members joined with kubefedctl join")

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"install", d.install},
		{"workloads", d.workloads},
		{"status", d.status},
		{"node power-off", d.nodePowerOff},
		{"capacity exhaustion", d.exhaustion},
		{"failback", d.failback},
		{"status", d.status},
	}
	for _, s := range steps {
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	d.say("done: a stateful pod recovered from a dead node, and a federated workload moved away from a full member and back")
	return nil
}

func (d *demo) printKeep() {
	fmt.Printf(`
The federation and the manager keep running. Try:
  export KUBECONFIG=%s
  %s status
  kubectl --context member1 get nodes,pods -A
  go run ./cmd/fedfailover-lab poweroff member1-node-1 --evidence machine-deleted
Stop everything with:
  kill %d; go run ./cmd/fedfailover-lab down --dir %s
`, d.lab.Kubeconfig(), filepath.Join(d.o.BinDir, "kubectl-failover"), d.manager.Process.Pid, d.o.Dir)
}
