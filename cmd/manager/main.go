// Command manager runs the fedfailover operator on the kubefed host cluster.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	kubeconfig       string
	kubeContext      string
	shard            shardFlags
	zap              zap.Options
	hostQPS          float64
	hostBurst        int
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS with Kubernetes authentication and authorization.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics serving certificate (tls.crt, tls.key; reloaded when they change), e.g. a mounted Secret. Empty: a self-signed certificate is generated at start.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics server (off by default: HTTP/2 rapid-reset and stream-cancel CVEs).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address the Go profiler (/debug/pprof/) binds to, unauthenticated: keep it on loopback. Empty or \"0\": off.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Enable leader election so only one replica acts at a time.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.StringVar(&o.kubefedNamespace, "kubefed-namespace", "kube-federation-system", "Namespace holding KubeFedCluster objects and their Secrets.")
	fs.BoolVar(&o.allowHTTPMembers, "allow-insecure-member-endpoints", false, "Accept http:// member API endpoints, which send the member's bearer token in clear (never in production).")
	fs.DurationVar(&o.memberSyncStall, "member-sync-stall-timeout", time.Minute, "Tear down a member connection whose first cache sync has read nothing for this long (a slow sync that keeps reading is never cut short); reconnects back off.")
	fs.DurationVar(&o.memberWriteTO, "member-write-timeout", 0, "Cancel a write to a member that has not returned after this long; must be shorter than --shard-lease-duration minus --shard-renew-deadline (unsharded: than the leader election's 15s minus 10s), so no write lands after another replica took the member over. 0: four fifths of that gap.")
	fs.BoolVar(&o.machineDeletion, "enable-machine-deletion", false, "Let policies with fencing.requestMachineDeletion delete Cluster API Machines (needs the separate Machine deletion role of the installation).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the host cluster (default: in-cluster config, or $KUBECONFIG).")
	fs.StringVar(&o.kubeContext, "context", "", "Kubeconfig context of the host cluster.")
	fs.Float64Var(&o.hostQPS, "kube-api-qps", 50, "Requests per second to the host API server (client-side limit), however its config is loaded.")
	fs.IntVar(&o.hostBurst, "kube-api-burst", 100, "Burst of requests to the host API server above --kube-api-qps.")
	o.shard.bind(fs)
	o.zap = zap.Options{Development: false}
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.hostQPS <= 0 || o.hostBurst < 1 {
		return o, fmt.Errorf("--kube-api-qps must be > 0 and --kube-api-burst >= 1, got %v and %d", o.hostQPS, o.hostBurst)
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		return o, errors.New("--metrics-cert-dir needs --metrics-secure")
	}
	if err := o.shard.checkWriteTimeout(o.memberWriteTO); err != nil {
		return o, err
	}
	return o, nil
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

// operatorOptions is the controller configuration the flags ask for.
func operatorOptions(o options) controllers.Options {
	return controllers.Options{
		KubefedNamespace: o.kubefedNamespace,
		Members: member.Options{AllowInsecureEndpoints: o.allowHTTPMembers, SyncStallTimeout: o.memberSyncStall,
			WriteTimeout: o.memberWriteTO},
		NodeRecovery: noderecovery.Options{EnableMachineDeletion: o.machineDeletion},
	}
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(2)
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
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
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
