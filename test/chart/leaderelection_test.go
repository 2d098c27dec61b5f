package chart

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReplicasNeedLeaderElection: more than one replica without leader
// election would be several managers writing the same RSPs, taints and
// status; the chart refuses to render it (sharded or not: sharding needs
// leader election too).
func TestReplicasNeedLeaderElection(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		// replicaCount is 2 by default.
		{[]string{"leaderElection.enabled=false"}, "replicaCount is 2 but leaderElection.enabled is false"},
		{[]string{"leaderElection.enabled=false", "replicaCount=3"}, "set replicaCount to 1"},
		// Whichever template fails first says it.
		{[]string{"leaderElection.enabled=false", "replicaCount=3", "sharding.enabled=true"}, "leaderElection.enabled"},
	} {
		if msg := helmTemplateFails(t, tc.set...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: error %q, want %q", tc.set, msg, tc.want)
		}
	}
	c := managerContainer(t, helmTemplate(t, "leaderElection.enabled=false", "replicaCount=1"))
	if argWithPrefix(c, "--leader-elect") != "" {
		t.Errorf("one replica without leader election: args %v pass --leader-elect*", c.Args)
	}
	if d := managerDeployment(t, helmTemplate(t)); *d.Spec.Replicas < 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Errorf("default: %d replicas, args %v; want two replicas under leader election", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
}

func TestLeaderElectionTimings(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{nil, []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}},
		{[]string{"leaderElection.leaseDuration=30s", "leaderElection.renewDeadline=20s", "leaderElection.retryPeriod=4s"},
			[]string{"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"}},
		{[]string{"leaderElection.leaseDuration=2s", "leaderElection.renewDeadline=1.5s", "leaderElection.retryPeriod=500ms"},
			[]string{"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1.5s", "--leader-elect-retry-period=500ms"}},
	} {
		args := managerContainer(t, helmTemplate(t, tc.set...)).Args
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("%v: args %v lack %s", tc.set, args, w)
			}
		}
	}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"leaderElection.renewDeadline=15s"}, "leaderElection.renewDeadline (15s) must be shorter than leaderElection.leaseDuration (15s)"},
		{[]string{"leaderElection.retryPeriod=9s"}, "renewDeadline (10s) more than 1.2 x retryPeriod"},
		{[]string{"leaderElection.retryPeriod=0s"}, "leaderElection.retryPeriod (0s) must be positive"},
		// The Lease records whole seconds: the schema takes only those.
		{[]string{"leaderElection.leaseDuration=1500ms"}, "/leaderElection/leaseDuration"},
		{[]string{"leaderElection.renewDeadline=10"}, "/leaderElection/renewDeadline"},
	} {
		if msg := helmTemplateFails(t, tc.set...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: error %q, want %q", tc.set, msg, tc.want)
		}
	}
}

// helmTemplateFails renders the chart as helmTemplate does and returns
// helm's error output; the rendering must fail.
func helmTemplateFails(t *testing.T, set ...string) string {
	t.Helper()
	args := []string{"template", release, filepath.Join(repoRoot(t), "charts", "fedfailover"),
		"--namespace", namespace, "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(tool(t, "helm"), args...)
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("helm template %v rendered; want it refused", set)
	}
	return stderr.String()
}
