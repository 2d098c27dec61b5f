package member

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberconfig"
	"github.com/fedfailover/fedfailover/internal/metrics"
)

// The member controller reads KubeFedClusters and their Secrets in the
// kubefed namespace only (a Role, not a ClusterRole; adjust the namespace if
// --kubefed-namespace differs).
// +kubebuilder:rbac:groups=core.kubefed.io,resources=kubefedclusters,verbs=get;list;watch,namespace=kube-federation-system
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch,namespace=kube-federation-system

// reconciler connects to, probes and disconnects from one member per
// KubeFedCluster. Connection state lives in the Cache.
type reconciler struct {
	host     client.Reader // the kubefed namespace
	cache    *Cache
	recorder events.EventRecorder
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.Name)
	ctx = ctrl.LoggerInto(ctx, log)

	kfc := &kubefedv1beta1.KubeFedCluster{}
	if err := r.host.Get(ctx, req.NamespacedName, kfc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting KubeFedCluster: %w", err)
	}
	if !kfc.DeletionTimestamp.IsZero() {
		r.forget(ctx, req.NamespacedName)
		return ctrl.Result{}, nil
	}

	if !r.cache.keepsConnection(kfc.Name) {
		r.notOwned(ctx, kfc)
		return ctrl.Result{}, nil
	}

	in, reason, err := r.restConfig(ctx, kfc)
	if err != nil {
		// Waits for the KubeFedCluster or its Secret to change: both are watched.
		r.disconnect(ctx, kfc, reason, err.Error())
		return ctrl.Result{}, nil
	}

	m := r.cache.state(kfc.Name)
	if m.conn != nil && m.fingerprint != in.fingerprint {
		r.disconnect(ctx, kfc, ReasonCredentialsChanged, "endpoint, CA, TLS options, proxy or token changed; reconnecting")
		m = r.cache.state(kfc.Name)
	}
	if m.conn == nil {
		return r.connect(ctx, kfc, in), nil
	}
	if m.syncing() {
		if res, done := r.watchSync(ctx, kfc, m); done {
			return res, nil
		}
	}
	return r.probe(ctx, kfc, m, in), nil
}

// connectInput is what a connection is built from.
type connectInput struct {
	cfg         *rest.Config
	fingerprint string
	token       string // only to redact messages
	// credentials names the Secret of the token when the KubeFedCluster's
	// annotation chose it (empty: kubefed's spec.secretRef).
	credentials string
}

// restConfig reads the credentials Secret and builds the member's REST
// config. The Secret is kubefed's (spec.secretRef), or the one the
// failover.fedfailover.io/credentials-secret annotation names, which must
// be labelled for this member (memberconfig.CheckCredentialsSecret); both
// are read from the kubefed namespace only, and the endpoint, CA and TLS
// options are the KubeFedCluster's either way. On error it returns the
// reason to report.
func (r *reconciler) restConfig(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster) (connectInput, string, error) {
	name, own, err := memberconfig.CredentialsSecret(kfc)
	if err != nil {
		return connectInput{}, reasonFor(err), err
	}
	what := "secret"
	if own {
		what = "secret named by annotation " + contract.AnnotationCredentialsSecret
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: kfc.Namespace, Name: name}
	if err := r.host.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return connectInput{}, ReasonSecretNotFound, fmt.Errorf("%s %s not found", what, key)
		}
		return connectInput{}, ReasonConnectFailed, fmt.Errorf("getting %s %s: %w", what, key, err)
	}
	if own {
		if err := memberconfig.CheckCredentialsSecret(kfc, secret); err != nil {
			return connectInput{}, reasonFor(err), err
		}
	}
	o := r.cache.opts
	cfg, err := memberconfig.RESTConfig(kfc, secret, memberconfig.Options{
		QPS: o.QPS, Burst: o.Burst, UserAgent: r.cache.memberUserAgent(), DialTimeout: o.ConnectTimeout, AllowHTTP: o.AllowInsecureEndpoints})
	if err != nil {
		return connectInput{}, reasonFor(err), err
	}
	in := connectInput{cfg: cfg, fingerprint: memberconfig.Fingerprint(kfc, secret), token: string(secret.Data[memberconfig.TokenKey])}
	if own {
		in.credentials = name
	}
	return in, "", nil
}

// connect dials the member and leaves its cache syncing (watchSync), unless
// earlier attempts with the same inputs failed and the backoff has not
// passed yet.
func (r *reconciler) connect(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, in connectInput) ctrl.Result {
	o := r.cache.opts
	if wait := r.cache.retryWait(kfc.Name, in.fingerprint); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}
	}
	cluster := kfc.Name
	fence := newWriteFence(cluster, func() bool { return r.cache.HoldsMember(cluster) }, o.WriteTimeout)
	// A refused or granted permission brings this member's reconcile back.
	den := newDenials(r.cache.now, r.cache.onSynced(kfc))
	conn, err := dial(ctx, in.cfg, r.cache.scheme, o, fence, den, r.cache.onSynced(kfc))
	if err != nil {
		r.disconnect(ctx, kfc, reasonFor(err), redact(err.Error(), in.token))
		return ctrl.Result{RequeueAfter: r.cache.backOff(kfc.Name, in.fingerprint)}
	}
	conn.credentials = in.credentials
	prev, next, ok := r.cache.setConnected(kfc.Name, conn, in.fingerprint, in.token, syncingMessage(conn.syncStatus(), 0, ""))
	if !ok {
		conn.stop()
		if !r.cache.keepsConnection(kfc.Name) {
			r.notOwned(ctx, kfc)
		}
		return ctrl.Result{}
	}
	r.transition(ctx, kfc, prev, next)
	return ctrl.Result{RequeueAfter: o.ProbePeriod}
}

// watchSync looks at a connection whose cache is syncing: it makes the
// member connected once the cache has synced, and tears down a connection
// that read nothing for SyncStallTimeout. done is false while the sync goes
// on: the connection is then probed like any other.
func (r *reconciler) watchSync(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, m memberState) (_ ctrl.Result, done bool) {
	o := r.cache.opts
	now := r.cache.now()
	st := m.conn.syncStatus()
	if st.synced {
		prev, next, took, ok := r.cache.setSynced(kfc.Name, m.conn)
		if ok {
			metrics.MemberCacheSyncDuration.WithLabelValues(kfc.Name).Observe(took.Seconds())
			setCacheMetrics(kfc.Name, m.conn)
			r.transition(ctx, kfc, prev, next)
		}
		return ctrl.Result{RequeueAfter: o.ProbePeriod}, true
	}
	progress, stalled := m.progress.advance(st, now, o.SyncStallTimeout)
	msg := syncingMessage(st, now.Sub(m.syncStart), redact(m.conn.watchErr(), m.token))
	if stalled {
		reason, why := ReasonCacheSyncFailed, ""
		if ds := m.conn.denials.list(); len(ds) > 0 {
			reason, why = ReasonMemberPermissionDenied, deniedMessage(ds)+"; "
		}
		r.disconnect(ctx, kfc, reason,
			fmt.Sprintf("%scache sync made no progress for %s, torn down; %s", why, o.SyncStallTimeout, msg))
		return ctrl.Result{RequeueAfter: r.cache.backOff(kfc.Name, m.fingerprint)}, true
	}
	prev, next := r.cache.syncProgressed(kfc.Name, m.conn, progress, msg)
	r.transition(ctx, kfc, prev, next)
	return ctrl.Result{}, false
}

func connectedMessage(conn *connection) string {
	msg := fmt.Sprintf("connected to %s (Kubernetes %s)", conn.cfg.Host, conn.version.GitVersion)
	if conn.credentials != "" {
		msg += fmt.Sprintf(" with the token of Secret %s (annotation %s)", conn.credentials, contract.AnnotationCredentialsSecret)
	}
	return msg
}

// probe checks a connected member once per ProbePeriod; in is what to dial
// again with when its cache must be rebuilt.
func (r *reconciler) probe(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, m memberState, in connectInput) ctrl.Result {
	o := r.cache.opts
	now := r.cache.now()
	// A permission refused or granted since the last look.
	prev, next := r.cache.refreshPermissions(kfc.Name, m.conn)
	r.transition(ctx, kfc, prev, next)
	if due := m.lastProbe.Add(o.ProbePeriod); now.Before(due) {
		return ctrl.Result{RequeueAfter: due.Sub(now)}
	}
	if perms := m.conn.denials.dueForReview(); len(perms) > 0 {
		// Has the member granted a refused permission since? (Its own
		// budget: a slow review must not fail the probe.)
		rctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
		m.conn.denials.review(rctx, m.conn.reviewer, perms)
		cancel()
		now = r.cache.now()
	}
	pctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	err := probe(pctx, m.conn.uncached)
	cancel()
	elapsed := r.cache.now().Sub(now)

	if err == nil {
		metrics.MemberProbeDuration.WithLabelValues(kfc.Name, metrics.ProbeSuccess).Observe(elapsed.Seconds())
		broken := m.conn.brokenStreams()
		if msg, stale := staleAfterOutage(m, broken); stale {
			r.tearDown(ctx, kfc, ReasonStaleCache, msg, false)
			return r.connect(ctx, kfc, in)
		}
		if m.synced {
			setCacheMetrics(kfc.Name, m.conn)
		}
		prev, next := r.cache.probeSucceeded(kfc.Name, m.conn, now, broken)
		r.transition(ctx, kfc, prev, next)
		return ctrl.Result{RequeueAfter: o.ProbePeriod}
	}

	metrics.MemberProbeDuration.WithLabelValues(kfc.Name, metrics.ProbeFailure).Observe(elapsed.Seconds())
	reason, msg := reasonFor(err), redact(err.Error(), m.token)
	if !m.synced && !disconnectNow(reason) {
		// The first sync still reads (watchSync tears down one that read
		// nothing for SyncStallTimeout), so the server answers: a probe
		// queued behind that very list on a busy API server must not tear
		// the sync down and start it again from zero. Until it has synced
		// the member is unknown to both jobs.
		ctrl.LoggerFrom(ctx).Info("Member probe failed while the first cache sync is still reading; the sync's progress decides",
			"reason", reason, "error", msg)
		r.cache.probeFailed(kfc.Name, m.conn, now, m.failures)
		return ctrl.Result{RequeueAfter: o.ProbePeriod}
	}
	failures := m.failures + 1
	if disconnectNow(reason) {
		r.disconnect(ctx, kfc, reason, msg)
		return ctrl.Result{RequeueAfter: r.cache.backOff(kfc.Name, m.fingerprint)}
	}
	if failures >= o.FailureThreshold {
		msg = fmt.Sprintf("%d consecutive probes failed, last: %s", failures, msg)
		if r.keepUnanswered(ctx, kfc, m, msg, now, failures) {
			return ctrl.Result{RequeueAfter: o.ProbePeriod}
		}
		// Counted as a disconnect when it became unanswered.
		r.tearDown(ctx, kfc, ReasonProbeFailed,
			fmt.Sprintf("%s; its watches read nothing for %s, cache torn down", msg, o.SyncStallTimeout), false)
		return ctrl.Result{RequeueAfter: r.cache.backOff(kfc.Name, m.fingerprint)}
	}
	ctrl.LoggerFrom(ctx).Info("Member probe failed", "failures", failures, "threshold", o.FailureThreshold, "reason", reason, "error", msg)
	r.cache.probeFailed(kfc.Name, m.conn, now, failures)
	return ctrl.Result{RequeueAfter: o.ProbePeriod}
}

// staleAfterOutage decides whether a synced member whose probes answer
// again after failing may go on with the cache it kept: not when any of
// its informers' list or watch requests failed or broke off since the
// cache was last known current. Such an informer tries again only when
// its reflector's backoff ends (client-go: 800 ms doubling to 30 s, with
// as much jitter again), so for up to a minute after the member answers
// the cache would still show the member as it was before the outage:
// pods long deleted, Ready. A cache whose watches kept reading (a busy API
// server queueing the probe) is kept, without a relist.
func staleAfterOutage(m memberState, broken int64) (msg string, stale bool) {
	// failures > 0 covers unanswered too: it is set only after
	// FailureThreshold failures, and both are reset together.
	if !m.synced || m.failures == 0 || broken <= m.brokenSeen {
		return "", false
	}
	return fmt.Sprintf("answers again after %d failed probes, but %d list or watch requests of its cache failed meanwhile: "+
		"the cache is rebuilt rather than read while its informers back off", m.failures, broken-m.brokenSeen), true
}

// keepUnanswered handles a synced member whose probes failed
// FailureThreshold times: it is not connected from then on (both jobs see
// it as unreachable, as after a teardown), but its cache is kept as long as
// its watches read something within SyncStallTimeout. A busy API server
// queues a one-node probe behind its big lists while the watches still
// stream; tearing the cache down there meant a relist of every pod on the
// very server that was too busy to answer (seen at 3 x 2,000 x 10). It
// reports false when the watches too are silent: the caller tears down.
func (r *reconciler) keepUnanswered(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, m memberState, msg string, now time.Time, failures int) bool {
	if !m.synced {
		return false
	}
	progress := syncProgress{at: now, bytes: m.conn.bytesRead()}
	if m.unanswered {
		var stalled bool
		if progress, stalled = m.progress.advanceBytes(progress.bytes, now, r.cache.opts.SyncStallTimeout); stalled {
			return false
		}
	}
	prev, next, ok := r.cache.setUnanswered(kfc.Name, m.conn, ReasonProbeFailed,
		msg+"; cache kept while its watches read", now, failures, progress)
	if !ok {
		return true // replaced meanwhile: the next pass looks at the new one
	}
	if !m.unanswered {
		metrics.MemberDisconnects.WithLabelValues(kfc.Name, ReasonProbeFailed).Inc()
	}
	r.transition(ctx, kfc, prev, next)
	return true
}

// disconnect records a not-connected state, tears down the connection if
// any, and reports the transition.
func (r *reconciler) disconnect(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, reason, message string) {
	r.tearDown(ctx, kfc, reason, message, true)
}

// tearDown is disconnect; count says whether a stopped connection counts
// in MemberDisconnects.
func (r *reconciler) tearDown(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, reason, message string, count bool) {
	prev, next, stopped := r.cache.setDisconnected(kfc.Name, reason, message)
	if stopped {
		if count {
			metrics.MemberDisconnects.WithLabelValues(kfc.Name, reason).Inc()
		}
		metrics.MemberCacheObjects.DeletePartialMatch(map[string]string{metrics.ClusterLabel: kfc.Name})
	}
	r.transition(ctx, kfc, prev, next)
}

// notOwned records that another replica owns the member (sharding) and
// tears down any connection. It is routine, so it is logged, not an event.
func (r *reconciler) notOwned(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster) {
	prev, next, stopped, _, _ := r.cache.setNotOwned(kfc.Name, true)
	recordNotOwned(kfc.Name, stopped)
	if next.changed(prev) {
		ctrl.LoggerFrom(ctx).V(1).Info("Member cluster owned by another replica", "wasConnected", stopped)
		r.cache.notify(kfc.Name)
	}
}

// forget tears down a member that left the federation and drops its metrics.
func (r *reconciler) forget(ctx context.Context, key types.NamespacedName) {
	known, wasConnected := r.cache.forget(key.Name)
	if !known {
		return
	}
	metrics.DeleteCluster(key.Name)
	ctrl.LoggerFrom(ctx).Info("Member cluster unjoined: connection torn down", "wasConnected", wasConnected)
	kfc := &kubefedv1beta1.KubeFedCluster{}
	kfc.Namespace, kfc.Name = key.Namespace, key.Name
	r.recorder.Eventf(kfc, nil, corev1.EventTypeNormal, ReasonUnjoined, "Disconnect", "member cluster left the federation")
	r.cache.notify(key.Name)
}

// transition logs, records an event, sets the metric and notifies
// subscribers when the connection state or its reason changed.
func (r *reconciler) transition(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster, prev, next connState) {
	if next.connected {
		metrics.MemberConnected.WithLabelValues(kfc.Name).Set(1)
	} else {
		metrics.MemberConnected.WithLabelValues(kfc.Name).Set(0)
	}
	if !next.changed(prev) {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	switch {
	case next.reason == ReasonMemberPermissionDenied:
		log.Info("Member cluster refused requests fedfailover needs", "connected", next.connected, "message", next.message)
		r.recorder.Eventf(kfc, nil, corev1.EventTypeWarning, next.reason, "Request", "%s", next.message)
	case next.connected:
		log.Info("Member cluster connected", "reason", next.reason, "message", next.message)
		r.recorder.Eventf(kfc, nil, corev1.EventTypeNormal, next.reason, "Connect", "%s", next.message)
	case next.reason == ReasonSyncing:
		log.Info("Member cluster reachable, cache syncing: unknown until synced")
		r.recorder.Eventf(kfc, nil, corev1.EventTypeNormal, next.reason, "Connect",
			"API server reachable and credentials accepted; the member stays unknown until its cache has synced")
	default:
		log.Info("Member cluster not connected", "reason", next.reason, "message", next.message)
		r.recorder.Eventf(kfc, nil, corev1.EventTypeWarning, next.reason, "Disconnect", "%s", next.message)
	}
	r.cache.notify(kfc.Name)
}
