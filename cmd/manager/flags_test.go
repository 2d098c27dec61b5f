package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsDefaultToTheSafeChoice(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	op := operatorOptions(o)
	if op.NodeRecovery.EnableMachineDeletion {
		t.Error("Machine deletion enabled by default")
	}
	if op.Members.AllowInsecureEndpoints {
		t.Error("http:// member endpoints allowed by default")
	}
	if o.pprofAddr != "" {
		t.Errorf("pprof served on %q by default, want off", o.pprofAddr)
	}
	m := metricsOptions(o)
	if !m.SecureServing || m.FilterProvider == nil {
		t.Errorf("metrics: secure %v, authn/authz filter set %v; want both", m.SecureServing, m.FilterProvider != nil)
	}
	if m.CertDir != "" {
		t.Errorf("metrics CertDir %q by default, want empty (self-signed)", m.CertDir)
	}
}

func TestFlagsAreWired(t *testing.T) {
	o, err := parseFlags([]string{"--enable-machine-deletion", "--allow-insecure-member-endpoints",
		"--metrics-cert-dir=/etc/metrics-certs", "--kubefed-namespace=fed", "--member-sync-stall-timeout=5m"})
	if err != nil {
		t.Fatal(err)
	}
	op := operatorOptions(o)
	if !op.NodeRecovery.EnableMachineDeletion || !op.Members.AllowInsecureEndpoints || op.KubefedNamespace != "fed" {
		t.Errorf("operator options %+v: want Machine deletion, insecure member endpoints and namespace fed", op)
	}
	if op.Members.SyncStallTimeout != 5*time.Minute {
		t.Errorf("member sync stall timeout %s, want 5m", op.Members.SyncStallTimeout)
	}
	m := metricsOptions(o)
	if m.CertDir != "/etc/metrics-certs" || m.CertName != "tls.crt" || m.KeyName != "tls.key" {
		t.Errorf("metrics certificate %s/{%s,%s}, want /etc/metrics-certs/{tls.crt,tls.key}", m.CertDir, m.CertName, m.KeyName)
	}
}

func TestMetricsCertDirNeedsSecureServing(t *testing.T) {
	if _, err := parseFlags([]string{"--metrics-secure=false", "--metrics-cert-dir=/x"}); err == nil {
		t.Fatal("--metrics-cert-dir accepted without --metrics-secure")
	}
}

// A cert dir without the files would make controller-runtime fall back to a
// self-signed certificate without a word.
func TestMetricsCertDirMustHoldTheCertificate(t *testing.T) {
	dir := t.TempDir()
	o := options{metricsSecure: true, metricsCertDir: dir}
	if err := checkMetricsCert(o); err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("empty cert dir: error %v, want one naming tls.crt", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkMetricsCert(o); err == nil || !strings.Contains(err.Error(), "tls.key") {
		t.Errorf("no key: error %v, want one naming tls.key", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkMetricsCert(o); err != nil {
		t.Errorf("complete cert dir refused: %v", err)
	}
	if err := checkMetricsCert(options{metricsSecure: true}); err != nil {
		t.Errorf("no cert dir refused: %v", err)
	}
}

// The host rate limit is the flags', whether the config comes from a
// kubeconfig file (client-go's default there: 5 requests per second, which
// queued a burst of RSP shifts one behind the other) or elsewhere.
func TestHostRateLimitIsTheFlagsWhereverTheConfigComesFrom(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: host, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: host, context: {cluster: host, user: u}}]
current-context: host
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{[]string{"--kubeconfig", kubeconfig}, 50, 100},
		{[]string{"--kubeconfig", kubeconfig, "--kube-api-qps=200", "--kube-api-burst=300"}, 200, 300},
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := hostConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst {
			t.Errorf("%v: host QPS %v burst %d, want %v and %d", tc.args, cfg.QPS, cfg.Burst, tc.qps, tc.burst)
		}
	}
	for _, bad := range [][]string{{"--kube-api-qps=0"}, {"--kube-api-burst=0"}} {
		if _, err := parseFlags(bad); err == nil || !strings.Contains(err.Error(), "kube-api") {
			t.Errorf("%v: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestRemediationKindFlag: each --remediation-kind names one kind, fully;
// anything else is refused, naming the flag.
func TestRemediationKindFlag(t *testing.T) {
	o, err := parseFlags([]string{"--remediation-kind=LabRemediation.v1alpha1.lab.fedfailover.io",
		"--remediation-kind=FenceAgentsRemediation.v1alpha1.fence-agents-remediation.medik8s.io"})
	if err != nil {
		t.Fatal(err)
	}
	got := operatorOptions(o).NodeRecovery.RemediationKinds
	if len(got) != 2 || got[0].Kind != "LabRemediation" || got[0].Version != "v1alpha1" || got[0].Group != "lab.fedfailover.io" ||
		got[1].Group != "fence-agents-remediation.medik8s.io" {
		t.Fatalf("remediation kinds %v", got)
	}
	for _, bad := range []string{"LabRemediation", "LabRemediation.lab", "*.v1.lab.fedfailover.io"} {
		if _, err := parseFlags([]string{"--remediation-kind=" + bad}); err == nil || !strings.Contains(err.Error(), "--remediation-kind") {
			t.Errorf("--remediation-kind=%s: error %v, want one naming the flag", bad, err)
		}
	}
}
