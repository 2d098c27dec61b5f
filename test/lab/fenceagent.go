package lab

import (
	"context"
	"fmt"

	"github.com/fedfailover/fedfailover/test/lab/fenceagent"
)

// FenceAgent returns the lab's fence agent (test/lab/fenceagent) working on
// the host: a remediation naming a member and node powers that node off
// (SIGKILL of its kwok process, no Machine evidence: the infrastructure
// says nothing, as for a node fenced by an out-of-band agent). The caller
// runs it (Agent.Run) for as long as it needs it.
func (l *Lab) FenceAgent(opts fenceagent.Options) (*fenceagent.Agent, error) {
	cl, err := l.Client(HostName)
	if err != nil {
		return nil, err
	}
	opts.PowerOff = func(ctx context.Context, cluster, node string) error {
		_, c, _, _, err := l.findNode(node)
		if err != nil {
			return err
		}
		if c.Name != cluster {
			return fmt.Errorf("node %s is in member %s, not %s", node, c.Name, cluster)
		}
		return l.PowerOff(ctx, node, EvidenceNone)
	}
	return fenceagent.New(cl, opts), nil
}

// NodeProcessGone is the lab's ground truth about a node's power: true once
// its kwok process no longer exists (powered off, not merely partitioned).
func (l *Lab) NodeProcessGone(node string) (bool, error) {
	_, _, _, p, err := l.findNode(node)
	if err != nil {
		return false, err
	}
	return p == nil || procState(p.PID) == ProcGone, nil
}
