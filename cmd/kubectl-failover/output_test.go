package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/test/logbuf"
)

// testOutputFormats prints every command's report of the seeded host in
// each -o format cli-runtime offers.
func testOutputFormats(t *testing.T, h *host) {
	kc := "--kubeconfig=" + h.admin
	dir := t.TempDir()
	jsonpathFile, templateFile := filepath.Join(dir, "members.jsonpath"), filepath.Join(dir, "policies.tmpl")
	if err := os.WriteFile(jsonpathFile, []byte(`{range .members[*]}{.name} {.kubefedReady}{"\n"}{end}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(templateFile, []byte(`{{range .policies}}{{.name}}: {{.mode}}{{"\n"}}{{end}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	explain := []string{"explain", "node", "member1/m1-node-2", kc}
	plan := []string{"plan", "--fail", "member1", kc}
	status := []string{"status", kc}
	cases := []struct {
		name string
		args []string
		want string // the whole output
	}{
		{"status name", append(status, "-o", "name"), "kubefedcluster.core.kubefed.io/member1\nkubefedcluster.core.kubefed.io/member2\n" +
			"failoverpolicy.failover.fedfailover.io/default\nreplicaschedulingpreference.scheduling.kubefed.io/web\n" +
			"noderecovery.failover.fedfailover.io/member1.m1-node-2.active\n"},
		{"status jsonpath", append(status, "-o", "jsonpath={.members[*].name}"), "member1 member2"},
		{"status jsonpath filter", append(status, "-o", "jsonpath={.members[?(@.connected==false)].name}"), "member2"},
		{"status jsonpath-file", append(status, "-o", "jsonpath-file="+jsonpathFile), "member1 True\nmember2 False\n"},
		{"status go-template", append(status, "-o", `go-template={{.kind}}/{{len .recoveries}}`), "StatusReport/1"},
		{"status go-template-file", append(status, "-o", "go-template-file="+templateFile), "default: Recovery(Auto)+Rebalance\n"},
		{"status --template alone", append(status, "--template", "{{.apiVersion}}"), "failover.fedfailover.io/v1alpha1"},
		{"status jsonpath with --template", append(status, "-o", "jsonpath", "--template", "{.recoveries[0].record}"), "member1.m1-node-2.active"},
		{"explain name", append(explain, "-o", "name"), "failoverpolicy.failover.fedfailover.io/default\n" +
			"noderecovery.failover.fedfailover.io/member1.m1-node-2.active\nnoderecovery.failover.fedfailover.io/member1.m1-node-2.returned\n" +
			"machine.cluster.x-k8s.io/m1-node-2\n"},
		{"explain jsonpath", append(explain, "-o", "jsonpath={.verdict}"), "Recovered"},
		{"explain go-template", append(explain, "-o", `go-template={{range .records}}{{.name}} {{end}}`),
			"member1.m1-node-2.active member1.m1-node-2.returned "},
		{"plan name", append(plan, "-o", "name"), "replicaschedulingpreference.scheduling.kubefed.io/web\n"},
		{"plan jsonpath", append(plan, "-o", "jsonpath={.replicaSchedulingPreferences[0].reason}"), "TooManyMembersFailed"},
		{"plan go-template", append(plan, "-o", `go-template={{.kind}} {{.scenario.cluster}}`), "PlanReport member1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mustRun(t, c.args...); got != c.want {
				t.Errorf("kubectl failover %s:\n%q\nwant\n%q", strings.Join(c.args, " "), got, c.want)
			}
		})
	}

	// json and yaml: the whole report, typed.
	for _, args := range [][]string{status, explain, plan} {
		for _, format := range []string{"json", "yaml"} {
			t.Run(args[0]+" "+format, func(t *testing.T) {
				out := mustRun(t, append(args, "-o", format)...)
				var got map[string]any
				if err := yaml.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("%v:\n%s", err, out)
				}
				kind := map[string]string{"status": cli.KindStatusReport, "explain": cli.KindNodeExplanation, "plan": cli.KindPlanReport}[args[0]]
				if got["apiVersion"] != "failover.fedfailover.io/v1alpha1" || got["kind"] != kind {
					t.Errorf("apiVersion %v, kind %v; want failover.fedfailover.io/v1alpha1 %s", got["apiVersion"], got["kind"], kind)
				}
				if format == "json" && !json.Valid([]byte(out)) {
					t.Errorf("not JSON:\n%s", out)
				}
			})
		}
	}
	t.Run("explain json fields", func(t *testing.T) {
		var e cli.NodeExplanation
		if err := json.Unmarshal([]byte(mustRun(t, append(explain, "-o", "json")...)), &e); err != nil {
			t.Fatal(err)
		}
		if e.Verdict != "Recovered" || len(e.Records) != 2 || e.Machine == nil || e.Machine.Name != "fleet/m1-node-2" {
			t.Errorf("verdict %q, %d records, machine %+v", e.Verdict, len(e.Records), e.Machine)
		}
	})
	t.Run("plan yaml fields", func(t *testing.T) {
		var p cli.PlanReport
		if err := yaml.Unmarshal([]byte(mustRun(t, append(plan, "-o", "yaml")...)), &p); err != nil {
			t.Fatal(err)
		}
		if p.Scenario.Cluster != "member1" || len(p.RSPs) != 1 || p.RSPs[0].Name != "web" {
			t.Errorf("plan: %+v", p.PlanView)
		}
	})
	// Without -o the tables, as before; -o wide stays accepted everywhere.
	t.Run("explain wide is the default", func(t *testing.T) {
		// The two runs may straddle a second: ages ("2m4s ago") are not compared.
		age := regexp.MustCompile(`\(?[0-9hms]+ ago\)?`)
		a, b := mustRun(t, explain...), mustRun(t, append(explain, "-o", "wide")...)
		if a, b := age.ReplaceAllString(a, "AGE"), age.ReplaceAllString(b, "AGE"); a != b {
			t.Errorf("explain -o wide differs from explain:\n%s\n---\n%s", b, a)
		}
	})
}

// testWatchDocuments runs `status --watch -o json|yaml`: a complete
// document first, then one per change of what the report shows, and none
// for a change that shows nowhere (an annotation on the policy).
func testWatchDocuments(t *testing.T, h *host, format string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out logbuf.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"status", "--watch", "-o", format, "--kubeconfig=" + h.admin})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	docs := func() []cli.StatusReport {
		t.Helper()
		s := out.String()
		if s == "" || !strings.HasSuffix(s, "\n") {
			return nil // nothing yet, or a document still being written
		}
		var parts []string
		if format == "json" {
			parts = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		} else {
			parts = strings.Split(s, "---\n")
		}
		var reports []cli.StatusReport
		for _, p := range parts {
			var r cli.StatusReport
			if err := yaml.Unmarshal([]byte(p), &r); err != nil || r.Kind != cli.KindStatusReport || len(r.Members) != 2 {
				t.Fatalf("not a complete status document (%v): %q\nall output:\n%s", err, p, s)
			}
			reports = append(reports, r)
		}
		return reports
	}
	waitUntil(t, "the first document", func() bool { return len(docs()) > 0 })

	pol := &v1alpha1.FailoverPolicy{}
	if err := h.c.Get(ctx, client.ObjectKey{Name: "default"}, pol); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pol.DeepCopy())
	pol.Annotations = map[string]string{"example.com/watch-" + format: "x"}
	if err := h.c.Patch(ctx, pol, patch); err != nil {
		t.Fatal(err)
	}
	// The annotation changes the policy's resourceVersion, not the report:
	// the watch gathers again and prints nothing. (This window lets it see
	// the annotation alone; the count below is what fails.)
	time.Sleep(time.Second)

	ready := pol.Status.Members[0].NodesReady + 1
	pol.Status.Members[0].NodesReady = ready
	if err := h.c.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a document with the change", func() bool {
		d := docs()
		return len(d) > 0 && d[len(d)-1].Members[0].NodesReady == ready
	})
	if d := docs(); len(d) != 2 {
		t.Errorf("%d documents for one change of the report, want 2:\n%s", len(d), out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end after Ctrl-C")
	}
}
