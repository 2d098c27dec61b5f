package main

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
	"github.com/fedfailover/fedfailover/internal/lab"
)

// scBench is one scale benchmark session on one lab.
type scBench struct {
	out     io.Writer
	o       scOptions
	l       *lab.Lab
	started time.Time
	hostCfg *rest.Config
	host    client.Client
}

func (b *scBench) progress(format string, args ...any) {
	fmt.Fprintf(b.out, "==> [%s] "+format+"\n", append([]any{time.Since(b.started).Round(time.Second)}, args...)...)
}

// populate fills every member (in parallel: one API server each), creates
// the federated Deployments and the policy, and waits until the pods run.
func (b *scBench) populate(ctx context.Context) (err error) {
	if b.hostCfg, b.host, err = labHost(b.l); err != nil {
		return err
	}
	start := time.Now()
	b.progress("adding %d bulk nodes x %d pods (1 in %d with an RWO volume) to each member", b.o.nodes, b.o.podsPerNode, scVolumeEvery)
	var wg sync.WaitGroup
	errs := make([]error, b.o.members)
	for i, m := range b.l.Members() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.populateMember(ctx, m)
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	b.progress("bulk objects created in %s", time.Since(start).Round(time.Second))

	start = time.Now()
	doc := lab.FederatedDeploymentsYAML(scNamespace, scWorkload, b.o.rsps, b.o.members, b.l.Members())
	if err := b.l.CreateObjectsYAML(ctx, lab.HostName, doc, 16); err != nil {
		return err
	}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: scPolicy}, Spec: scPolicySpec(b.o.notReadyFor)}
	if err := b.host.Create(ctx, pol); err != nil {
		return fmt.Errorf("creating the policy: %w", err)
	}
	for _, m := range b.l.Members() {
		if err := b.waitRunning(ctx, m, scNamespace, b.o.rsps, 10*time.Minute); err != nil {
			return err
		}
	}
	b.progress("%d federated Deployments with RSPs Running on every member in %s", b.o.rsps, time.Since(start).Round(time.Second))
	for _, m := range b.l.Members() {
		if err := b.waitNotRunningBelow(ctx, m, scBulkNS, 0, 10*time.Minute); err != nil {
			return err
		}
	}
	b.progress("every bulk pod Running")
	return nil
}

func (b *scBench) populateMember(ctx context.Context, m string) error {
	names, err := b.l.AddScaleNodes(ctx, m, lab.ScaleNodes{
		Count: b.o.nodes, KwokProcs: b.o.kwokPerMember, LeaseSeconds: scBulkLease,
		HeartbeatMillis: scHeartbeatMs, Unschedulable: true,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	if err := b.l.CreateScalePods(ctx, m, scBulkNS, names, b.o.podsPerNode, scVolumeEvery); err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	return nil
}

// waitRunning waits until ns of cluster has at least want Running pods.
func (b *scBench) waitRunning(ctx context.Context, cluster, ns string, want int, timeout time.Duration) error {
	cl, err := b.l.Client(cluster)
	if err != nil {
		return err
	}
	return pollEvery(ctx, timeout, 2*time.Second, fmt.Sprintf("%d pods Running in %s/%s", want, cluster, ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{"status.phase": string(corev1.PodRunning)}); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		return len(pods.Items) >= want, fmt.Sprintf("%d Running", len(pods.Items)), nil
	})
}

// waitNotRunningBelow waits until at most max pods of ns are not Running:
// the server filters, so the list stays small however many pods run.
func (b *scBench) waitNotRunningBelow(ctx context.Context, cluster, ns string, most int, timeout time.Duration) error {
	cl, err := b.l.Client(cluster)
	if err != nil {
		return err
	}
	sel := fields.OneTermNotEqualSelector("status.phase", string(corev1.PodRunning))
	return pollEvery(ctx, timeout, 5*time.Second, fmt.Sprintf("every pod Running in %s/%s", cluster, ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		return len(pods.Items) <= most, fmt.Sprintf("%d not Running", len(pods.Items)), nil
	})
}
