// Command manager runs the fedfailover operator on the kubefed host cluster.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/internal/version"
)

// Events go to cluster-scoped policies (namespace default), RSPs in any
// namespace and KubeFedClusters, so they are granted cluster-wide. The
// leader election Lease lives in the manager's own namespace only: that
// Role is written by hand (config/rbac/leader_election_role.yaml and the
// chart), because the namespace is the install's, not a fixed one.
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=failoverpolicies/status,verbs=get;update;patch

type options struct {
	metricsAddr      string
	metricsSecure    bool
	metricsCertDir   string
	enableHTTP2      bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionNS string
	kubefedNamespace string
	allowHTTPMembers bool
	memberSyncStall  time.Duration
	memberWriteTO    time.Duration
	machineDeletion  bool
	remediationKinds []schema.GroupVersionKind
	kubeconfig       string
	kubeContext      string
	shard            shardFlags
	zap              zap.Options
	hostQPS          float64
	hostBurst        int
	leaderElection   leaderElectionTimings
	showVersion      bool
}

// leaderElectionTimings are the leader election Lease's timings (client-go's
// LeaseDuration, RenewDeadline, RetryPeriod); the defaults are
// controller-runtime's.
type leaderElectionTimings struct {
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

// parseFlags parses and checks the command line. On a mistake it returns an
// error naming the flag, and flag.ErrHelp for -h/--help; it prints nothing
// (main does, see exitEarly).
func parseFlags(args []string) (options, error) {
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.showVersion {
		return o, nil
	}
	if o.hostQPS <= 0 || o.hostBurst < 1 {
		return o, fmt.Errorf("--kube-api-qps must be > 0 and --kube-api-burst >= 1, got %v and %d", o.hostQPS, o.hostBurst)
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		return o, errors.New("--metrics-cert-dir needs --metrics-secure")
	}
	if err := o.leaderElection.validate(); err != nil {
		return o, err
	}
	if err := o.shard.checkWriteTimeout(o.memberWriteTO, o.leaderElection); err != nil {
		return o, err
	}
	return o, nil
}

// leaderElectionJitter is client-go's leaderelection.JitterFactor: it
// refuses a renew deadline not above 1.2 retry periods.
const leaderElectionJitter = 1.2

// validate checks what client-go would refuse only once the manager runs
// (or, for fractional seconds, silently truncate: the Lease records whole
// seconds and the other replicas wait that long), naming the flags.
func (t leaderElectionTimings) validate() error {
	switch {
	case t.leaseDuration < time.Second || t.leaseDuration%time.Second != 0:
		return fmt.Errorf("--leader-elect-lease-duration must be a whole number of seconds, at least 1s (the Lease records seconds), got %s", t.leaseDuration)
	case t.renewDeadline <= 0 || t.renewDeadline >= t.leaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be positive and shorter than --leader-elect-lease-duration (%s)", t.renewDeadline, t.leaseDuration)
	case t.retryPeriod <= 0 || float64(t.renewDeadline) <= leaderElectionJitter*float64(t.retryPeriod):
		return fmt.Errorf("--leader-elect-retry-period (%s) must be positive and shorter than --leader-elect-renew-deadline (%s) by client-go's jitter: renew deadline > %.1f x retry period",
			t.retryPeriod, t.renewDeadline, leaderElectionJitter)
	}
	return nil
}

// newFlagSet binds every flag of the manager to o. Its output is
// discarded: main reports errors (one line, not the whole usage) and prints
// the usage for --help.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS with Kubernetes authentication and authorization.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics serving certificate (tls.crt, tls.key; reloaded when they change), e.g. a mounted Secret. Empty: a self-signed certificate is generated at start.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics server (off by default: HTTP/2 rapid-reset and stream-cancel CVEs).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address the Go profiler (/debug/pprof/) binds to, unauthenticated: keep it on loopback. Empty or \"0\": off.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Enable leader election so only one replica acts at a time.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.DurationVar(&o.leaderElection.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long the other replicas wait, after they last saw the leader renew its Lease, before taking over (whole seconds): the longest the operator goes without a leader when the leader dies.")
	fs.DurationVar(&o.leaderElection.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its Lease before it stops acting (and exits); shorter than --leader-elect-lease-duration.")
	fs.DurationVar(&o.leaderElection.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the leader renews its Lease and the other replicas try to take it; renew deadline > 1.2 x retry period.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version, source revision and Go version, and exit.")
	fs.StringVar(&o.kubefedNamespace, "kubefed-namespace", "kube-federation-system", "Namespace holding KubeFedCluster objects and their Secrets.")
	fs.BoolVar(&o.allowHTTPMembers, "allow-insecure-member-endpoints", false, "Accept http:// member API endpoints, which send the member's bearer token in clear (never in production).")
	fs.DurationVar(&o.memberSyncStall, "member-sync-stall-timeout", time.Minute, "Tear down a member connection whose first cache sync has read nothing for this long (a slow sync that keeps reading is never cut short); reconnects back off.")
	fs.DurationVar(&o.memberWriteTO, "member-write-timeout", 0, "Cancel a write to a member that has not returned after this long; must be shorter than --shard-lease-duration minus --shard-renew-deadline (unsharded: than the leader election's 15s minus 10s), so no write lands after another replica took the member over. 0: four fifths of that gap.")
	fs.BoolVar(&o.machineDeletion, "enable-machine-deletion", false, "Let policies with fencing.requestMachineDeletion delete Cluster API Machines (needs the separate Machine deletion role of the installation).")
	fs.Func("remediation-kind", "A remediation kind (Kind.version.group, e.g. FenceAgentsRemediation.v1alpha1.fence-agents-remediation.medik8s.io) that FailoverPolicies may name through nodeRecovery.remediation, watched so that a remediation's result is seen at once (needs the installation's remediation role for it); repeat for each kind.",
		func(s string) error {
			gvk, err := parseRemediationKind(s)
			if err != nil {
				return err
			}
			o.remediationKinds = append(o.remediationKinds, gvk)
			return nil
		})
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the host cluster (default: in-cluster config, or $KUBECONFIG).")
	fs.StringVar(&o.kubeContext, "context", "", "Kubeconfig context of the host cluster.")
	fs.Float64Var(&o.hostQPS, "kube-api-qps", 50, "Requests per second to the host API server (client-side limit), however its config is loaded.")
	fs.IntVar(&o.hostBurst, "kube-api-burst", 100, "Burst of requests to the host API server above --kube-api-qps.")
	o.shard.bind(fs)
	o.zap = zap.Options{Development: false}
	o.zap.BindFlags(fs)
	return fs
}

// exitEarly handles the command lines that do not run the manager: an
// error (exit 2, said on stderr: before, a checked flag failed silently),
// --help (usage on stdout, exit 0) and --version. exit says whether main
// stops with code.
func exitEarly(o options, err error, stdout, stderr io.Writer) (code int, exit bool) {
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = fmt.Fprintln(stdout, "Usage: manager [flags]\n\nThe fedfailover operator, on the kubefed host cluster.\n\nFlags:")
		fs := newFlagSet(&options{})
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, true
	case err != nil:
		_, _ = fmt.Fprintf(stderr, "error: %v\nRun 'manager --help' for the flags.\n", err)
		return 2, true
	case o.showVersion:
		_, _ = fmt.Fprintln(stdout, version.Line("fedfailover-manager"))
		return 0, true
	}
	return 0, false
}

// Names of the certificate and key in --metrics-cert-dir: those of a
// kubernetes.io/tls Secret (and of a cert-manager Certificate's Secret).
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

// metricsOptions is the metrics server configuration the flags ask for.
func metricsOptions(o options) metricsserver.Options {
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	m := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.metricsSecure,
		TLSOpts:       tlsOpts,
	}
	if o.metricsSecure {
		// Only callers allowed by a TokenReview + SubjectAccessReview on
		// nonResourceURL /metrics get the metrics.
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if o.metricsCertDir != "" {
		m.CertDir, m.CertName, m.KeyName = o.metricsCertDir, metricsCertName, metricsKeyName
	}
	return m
}

// checkMetricsCert fails when --metrics-cert-dir lacks the certificate or
// key: controller-runtime would silently serve a self-signed certificate
// instead, and scrapers that verify it would fail with no hint why.
func checkMetricsCert(o options) error {
	if o.metricsCertDir == "" {
		return nil
	}
	for _, name := range []string{metricsCertName, metricsKeyName} {
		if _, err := os.Stat(filepath.Join(o.metricsCertDir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}

// parseRemediationKind parses Kind.version.group; each part is required.
func parseRemediationKind(s string) (schema.GroupVersionKind, error) {
	gvk, _ := schema.ParseKindArg(s)
	if gvk == nil || gvk.Kind == "" || gvk.Version == "" || gvk.Group == "" || strings.Contains(s, "*") {
		return schema.GroupVersionKind{}, fmt.Errorf("--remediation-kind %q: want Kind.version.group, e.g. FenceAgentsRemediation.v1alpha1.fence-agents-remediation.medik8s.io", s)
	}
	return *gvk, nil
}

// operatorOptions is the controller configuration the flags ask for.
func operatorOptions(o options) controllers.Options {
	return controllers.Options{
		KubefedNamespace: o.kubefedNamespace,
		Members: member.Options{AllowInsecureEndpoints: o.allowHTTPMembers, SyncStallTimeout: o.memberSyncStall,
			WriteTimeout: o.memberWriteTO, LeaderElectionGap: o.leaderElection.leaseDuration - o.leaderElection.renewDeadline},
		NodeRecovery: noderecovery.Options{EnableMachineDeletion: o.machineDeletion, RemediationKinds: o.remediationKinds},
	}
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if code, exit := exitEarly(o, err, os.Stdout, os.Stderr); exit {
		os.Exit(code)
	}
	logger := zap.New(zap.UseFlagOptions(&o.zap))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	cfg, err := hostConfig(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error: loading kubeconfig:", err)
		os.Exit(1)
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// hostConfig loads the host cluster's REST config from --kubeconfig/--context,
// else the usual places (in-cluster, $KUBECONFIG, ~/.kube/config), with the
// rate limit of --kube-api-qps/--kube-api-burst. Without that the limit
// would depend on the way the config was found: none from ctrl.GetConfig,
// client-go's 5 requests per second from a kubeconfig file, which queued
// each RSP shift of a burst behind the others'.
func hostConfig(o options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig == "" && o.kubeContext == "" {
		cfg, err = ctrl.GetConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.kubeconfig
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.hostQPS), o.hostBurst
	return cfg, nil
}

// run builds the manager and blocks until ctx is done.
func run(ctx context.Context, cfg *rest.Config, o options) error {
	setupLog := ctrl.Log.WithName("setup")

	if err := checkMetricsCert(o); err != nil {
		return err
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "fedfailover.failover.fedfailover.io",
		LeaderElectionNamespace: o.leaderElectionNS,
		// Stepping down promptly lets the next replica take over fast.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaderElection.leaseDuration,
		RenewDeadline:                 &o.leaderElection.renewDeadline,
		RetryPeriod:                   &o.leaderElection.retryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("host-cache-sync", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}

	shardOpts, err := o.shard.options(o.leaderElectionNS)
	if err != nil {
		return err
	}
	if shardOpts.Namespace != "" && !o.leaderElect {
		// Rebalance and policy status keep one writer: the elected leader.
		return errors.New("--shard needs --leader-elect")
	}
	opOpts := operatorOptions(o)
	opOpts.Members.Shard = shardOpts
	if o.shard.rebalance && !shardOpts.Enabled() {
		return errors.New("--sharded-rebalance needs --shard")
	}
	opOpts.Rebalance.ShardedRebalance = o.shard.rebalance
	switch {
	case shardOpts.Enabled() && o.shard.rebalance:
		setupLog.Info("Sharded rebalance (experimental): each replica publishes what it sees of the members it holds; the leader plans on every member")
	case shardOpts.Enabled():
		setupLog.Info("Sharded: rebalance is not planned on one replica's partial view of the members; " +
			"every RSP a policy would rebalance is held (reason ShardedRebalanceUnsupported); --sharded-rebalance plans with every replica's summaries")
	}
	if _, err := controllers.Setup(ctx, mgr, opOpts); err != nil {
		return err
	}

	setupLog.Info("starting manager", "kubefedNamespace", o.kubefedNamespace, "leaderElect", o.leaderElect,
		"machineDeletion", o.machineDeletion, "insecureMemberEndpoints", o.allowHTTPMembers,
		"shardLeaseNamespace", shardOpts.Namespace)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// cacheSyncTimeout bounds a readiness check's wait for the caches: below
// the kubelet's default probe timeout (1s), so a replica still syncing
// answers "not ready" instead of timing out.
const cacheSyncTimeout = 500 * time.Millisecond

// cacheSynced is the readiness check: not ready until the manager's caches
// of the host cluster have started and synced (every informer registered so
// far has listed), so a rollout waits for a replica that can act.
func cacheSynced(c interface{ WaitForCacheSync(context.Context) bool }) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncTimeout)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the caches of the host cluster have not synced yet")
		}
		return nil
	}
}
