package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
)

// watchStatus prints the status, then again whenever an object it shows
// changes, until Ctrl-C. It reads once directly first, so missing CRDs or
// permissions fail with the same messages as without --watch. Then an
// informer per kind the status reads lists once and follows the watch API
// (no polling); every change re-renders from the informers' cache, and
// prints only when an object's resourceVersion changed: the tables under a
// time line, any other -o as the next document of a stream, and only when
// the document differs from the last one printed (apart from its time).
func (o *statusOptions) watchStatus(cmd *cobra.Command) error {
	ctx := cmd.Context()
	src, err := o.source(cmd)
	if err != nil {
		return err
	}
	s, err := cli.Gather(ctx, src, o.now())
	if err != nil {
		return err
	}
	var stream *cli.Stream
	if !o.output.Table() {
		stream = o.output.NewStream(o.streams.Out)
	}
	if err := o.printWatched(stream, s, true); err != nil {
		return err
	}
	w, err := o.startWatch(ctx, src)
	if err != nil {
		return err
	}
	defer w.stop()
	last, synced, syncedCh := s.Fingerprint(), false, w.synced
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C
		case failure := <-w.failed:
			if ctx.Err() != nil || benignWatchError(failure) {
				continue
			}
			if err := o.lostAccess(ctx, src); err != nil {
				return err
			}
			_, _ = fmt.Fprintln(o.streams.ErrOut, "error: watching the host cluster (retrying):", failure)
			continue
		case <-syncedCh:
			synced, syncedCh = true, nil // a nil channel is never ready again
		case <-w.changed:
			if !synced {
				continue // the first full view comes with synced
			}
		}
		watched := src
		watched.Reader = w.reader
		s, err := cli.Gather(ctx, watched, o.now())
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			_, _ = fmt.Fprintln(o.streams.ErrOut, "error:", err)
		case s.Fingerprint() != last:
			last = s.Fingerprint()
			if err := o.printWatched(stream, s, false); err != nil {
				return err
			}
		}
	}
}

// printWatched prints the status as --watch does: the first tables as
// without it, the next ones under a time line; with another -o, the next
// document of the stream.
func (o *statusOptions) printWatched(stream *cli.Stream, s *cli.Snapshot, first bool) error {
	if stream != nil {
		_, err := stream.Print(cli.NewStatusReport(cli.BuildStatus(s)))
		return err
	}
	if !first {
		if _, err := fmt.Fprintf(o.streams.Out, "\n--- %s ---\n", s.Now.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return o.print(o.streams.Out, s)
}

// lostAccess reads the host directly after a failed list or watch: a CRD
// gone or a permission withdrawn ends the watch with the message of a
// direct read; any other failure is the informer's to retry.
func (o *statusOptions) lostAccess(ctx context.Context, src cli.Source) error {
	_, err := cli.Gather(ctx, src, o.now())
	if errors.Is(err, cli.ErrCRDMissing) || errors.Is(err, cli.ErrForbidden) {
		return err
	}
	return nil
}

// benignWatchError: an expired resourceVersion or a closed connection
// makes the informer list again; nothing to report.
func benignWatchError(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// hostWatch is a cache of the kinds the status reads, fed by informers.
type hostWatch struct {
	// reader reads the watched kinds from the cache and namespaces (only
	// their labels, for namespaceSelector policies) live.
	reader client.Reader
	// changed has room for one signal: a burst of events is one redraw.
	changed chan struct{}
	failed  chan error
	synced  chan struct{}
	stop    func()
}

func (w *hostWatch) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *hostWatch) fail(err error) {
	select {
	case w.failed <- err:
	default: // one pending failure is enough to act on
	}
}

// watchedKinds are the objects cli.Gather lists.
func watchedKinds() []client.Object {
	return []client.Object{&v1alpha1.FailoverPolicy{}, &v1alpha1.NodeRecovery{}, &v1alpha1.RecoveryGuard{},
		&kubefedv1beta1.KubeFedCluster{}, &fedschedv1a1.ReplicaSchedulingPreference{}, &v1alpha1.RebalanceRecord{}}
}

// startWatch starts an informer per watched kind, scoped like the direct
// reads: KubeFedClusters in the kubefed namespace, RSPs and their
// RebalanceRecords in -n or all.
func (o *statusOptions) startWatch(ctx context.Context, src cli.Source) (*hostWatch, error) {
	cfg, s, err := o.hostConfig()
	if err != nil {
		return nil, err
	}
	w := &hostWatch{changed: make(chan struct{}, 1), failed: make(chan error, 1), synced: make(chan struct{})}
	rsps := cache.ByObject{}
	if src.Namespace != "" {
		rsps.Namespaces = map[string]cache.Config{src.Namespace: {}}
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme: s,
		ByObject: map[client.Object]cache.ByObject{
			&kubefedv1beta1.KubeFedCluster{}:            {Namespaces: map[string]cache.Config{src.KubefedNamespace: {}}},
			&fedschedv1a1.ReplicaSchedulingPreference{}: rsps,
			&v1alpha1.RebalanceRecord{}:                 rsps,
		},
		// A read of a kind nobody watches would never redraw: fail instead.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler:    func(_ context.Context, _ *toolscache.Reflector, err error) { w.fail(err) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching the host cluster: %w", err)
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.signal() },
		UpdateFunc: func(any, any) { w.signal() },
		DeleteFunc: func(any) { w.signal() },
	}
	for _, obj := range watchedKinds() {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("watching the host cluster: %w", err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, fmt.Errorf("watching the host cluster: %w", err)
		}
	}
	if w.reader, err = client.New(cfg, client.Options{Scheme: s,
		Cache: &client.CacheOptions{Reader: c, DisableFor: []client.Object{&corev1.Namespace{}}}}); err != nil {
		return nil, fmt.Errorf("watching the host cluster: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(ctx); err != nil {
			w.fail(err)
		}
	}()
	go func() {
		if c.WaitForCacheSync(ctx) {
			close(w.synced)
		}
	}()
	w.stop = func() {
		cancel()
		<-done
	}
	return w, nil
}
