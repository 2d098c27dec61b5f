package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// scBench is one scale benchmark session on one lab.
type scBench struct {
	out     io.Writer
	o       scOptions
	l       *lab.Lab
	started time.Time
	hostCfg *rest.Config
	host    client.Client
	// health are the steady window's health samples.
	health []scHealthSample
}

func (b *scBench) progress(format string, args ...any) {
	fmt.Fprintf(b.out, "==> [%s] "+format+"\n", append([]any{time.Since(b.started).Round(time.Second)}, args...)...)
}

// populate creates the federated Deployments and the policy first (kubefed
// propagates them while the members fill), fills up to scFillAtOnce members
// in parallel (one API server each), and waits, within --populate-wait, until the pods
// run. A lab that lags is measured as it is: the counts are reported.
// scFillAtOnce members are filled at a time: the goal size's three all at
// once; twenty at once (32 writers each) overloaded the machine until member
// API servers timed creates out.
const scFillAtOnce = 3

func (b *scBench) populate(ctx context.Context, r *scResult) (err error) {
	if b.hostCfg, b.host, err = labHost(b.l); err != nil {
		return err
	}
	doc := lab.FederatedDeploymentsYAML(scNamespace, scWorkload, b.o.rsps, b.o.members, b.l.Members())
	if err := b.l.CreateObjectsYAML(ctx, lab.HostName, doc, 16); err != nil {
		return err
	}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: scPolicy}, Spec: scPolicySpec(b.o.notReadyFor)}
	if err := b.host.Create(ctx, pol); err != nil {
		return fmt.Errorf("creating the policy: %w", err)
	}
	b.progress("%d federated Deployments with RSPs and the policy created", b.o.rsps)

	start := time.Now()
	b.progress("adding %d static bulk nodes x %d static pods (1 in %d with an RWO volume) to each member", b.o.nodes, b.o.podsPerNode, scVolumeEvery)
	var wg sync.WaitGroup
	errs := make([]error, b.o.members)
	slots := make(chan struct{}, scFillAtOnce)
	for i, m := range b.l.Members() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = b.populateMember(ctx, m)
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	r.PopulateSeconds = round1(time.Since(start).Seconds())
	b.progress("bulk objects created in %s", time.Since(start).Round(time.Second))

	deadline := time.Now().Add(b.o.populateWait)
	for _, m := range b.l.Members() {
		n, err := b.waitRunning(ctx, m, scNamespace, b.o.rsps, time.Until(deadline))
		if err != nil {
			return err
		}
		r.RSPPodsRunning += n
		left, err := b.waitNotRunningBelow(ctx, m, scBulkNS, 0, time.Until(deadline))
		if err != nil {
			return err
		}
		r.BulkPodsNotRunning += left
		want := r.VolumePods / b.o.members
		n, err = b.l.AttachStaticVolumes(ctx, m, want, max(time.Until(deadline), time.Second))
		if err != nil && ctx.Err() != nil {
			return err
		}
		b.progress("  %s: %d of %d bulk VolumeAttachments attached", m, n, want)
		r.VolumesAttached += n
	}
	b.progress("RSP pods Running: %d of %d; bulk pods not Running: %d of %d; bulk VolumeAttachments attached: %d of %d",
		r.RSPPodsRunning, b.o.rsps*b.o.members, r.BulkPodsNotRunning, r.PodsTotal, r.VolumesAttached, r.VolumePods)
	return nil
}

// idleLab measures the lab's processes over --member-idle before the
// manager starts and the churn driver runs: what an idle member costs.
func (b *scBench) idleLab(ctx context.Context, r *scResult) error {
	if b.o.memberIdle == 0 {
		return nil
	}
	// The members' controllers catch up with the bulk for minutes after it
	// was written (kube-controller-manager's attach-detach controller
	// reports each static volume attached in its node's status and the
	// volume controller writes claim statuses, behind its client's 20
	// requests/s): an idle window then measures that, not an idle member.
	if err := b.waitQuiet(ctx, "idle window"); err != nil {
		return err
	}
	b.progress("measuring the idle lab for %s (no manager, no churn)", b.o.memberIdle)
	w, err := b.startProcWindow()
	if err != nil {
		return err
	}
	diag := b.startIdleDiagnostics(ctx)
	if err := sleepCtx(ctx, b.o.memberIdle); err != nil {
		return err
	}
	c, err := w.end(b.o.sharedEtcd)
	if err != nil {
		return err
	}
	r.IdleMember = diag.finish(ctx)
	r.IdleLab = &c
	r.IdleLoad1, _ = loadAvg()
	b.progress("idle lab: per member %.2f%% of a core, %.0f MB RSS (max %.2f%%, %.0f MB; by component %s); host %.2f%%, %.0f MB; load %.2f",
		c.MemberMean.CPUPercent, c.MemberMean.RSSMB, c.MemberMax.CPUPercent, c.MemberMax.RSSMB, componentsLine(c.Components),
		c.Host.CPUPercent, c.Host.RSSMB, r.IdleLoad1)
	return nil
}

func (b *scBench) populateMember(ctx context.Context, m string) error {
	names, err := b.l.AddStaticNodes(ctx, m, b.o.nodes, true)
	if err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	if err := b.l.CreateStaticPods(ctx, m, scBulkNS, names, b.o.podsPerNode, scVolumeEvery); err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	return nil
}

// waitRunning waits until ns of cluster has at least want Running pods or
// timeout passes, and returns how many run.
func (b *scBench) waitRunning(ctx context.Context, cluster, ns string, want int, timeout time.Duration) (int, error) {
	cl, err := b.l.Client(cluster)
	if err != nil {
		return 0, err
	}
	n := 0
	err = pollEvery(ctx, max(timeout, time.Second), 5*time.Second, fmt.Sprintf("%d pods Running in %s/%s", want, cluster, ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{"status.phase": string(corev1.PodRunning)}); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		n = len(pods.Items)
		return n >= want, fmt.Sprintf("%d Running", n), nil
	})
	return n, ignoreTimeout(ctx, err)
}

// waitNotRunningBelow waits until at most most pods of ns are not Running
// or timeout passes, and returns how many are not: the server filters, and
// the pace is slow, so the list stays cheap while kwok catches up.
func (b *scBench) waitNotRunningBelow(ctx context.Context, cluster, ns string, most int, timeout time.Duration) (int, error) {
	cl, err := b.l.Client(cluster)
	if err != nil {
		return 0, err
	}
	sel := fields.OneTermNotEqualSelector("status.phase", string(corev1.PodRunning))
	n := 0
	err = pollEvery(ctx, max(timeout, time.Second), 15*time.Second, fmt.Sprintf("every pod Running in %s/%s", cluster, ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		n = len(pods.Items)
		return n <= most, fmt.Sprintf("%d not Running", n), nil
	})
	return n, ignoreTimeout(ctx, err)
}

// ignoreTimeout drops a poll's own timeout: the caller measures what is
// there. The caller's cancellation stays an error.
func ignoreTimeout(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil {
		return nil
	}
	return err
}
