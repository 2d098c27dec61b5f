package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/internal/planner"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/<name>.golden (rewriting it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./internal/cli -run %s -update`)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (rerun with -update if the change is intended):\n--- got\n%s\n--- want\n%s", t.Name(), path, got, want)
	}
}

// outputFor is what -o format asks for.
func outputFor(t *testing.T, format string) *Output {
	t.Helper()
	f := NewPrintFlags()
	cmd := &cobra.Command{}
	f.AddFlags(cmd)
	if format != "" {
		if err := cmd.Flags().Set("output", format); err != nil {
			t.Fatal(err)
		}
	}
	out, err := f.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func render(t *testing.T, format string, r Report, table func(*bytes.Buffer, bool) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := outputFor(t, format).Print(&b, r, func(_ io.Writer, wide bool) error { return table(&b, wide) }); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestStatusGolden(t *testing.T) {
	v := BuildStatus(fixture())
	table := func(b *bytes.Buffer, wide bool) error { return RenderStatus(b, v, wide) }
	for name, format := range map[string]string{"status": "", "status-wide": "wide", "status-json": "json", "status-yaml": "yaml",
		"status-name": "name", "status-jsonpath": "jsonpath={range .members[*]}{.name}={.kubefedReady}{\"\\n\"}{end}",
		"status-go-template": `go-template={{.kind}} {{len .replicaSchedulingPreferences}} RSPs{{"\n"}}`} {
		t.Run(name, func(t *testing.T) { golden(t, name, render(t, format, NewStatusReport(v), table)) })
	}
}

func TestStatusEmptyGolden(t *testing.T) {
	v := BuildStatus(&Snapshot{Now: now})
	golden(t, "status-empty", render(t, "", NewStatusReport(v), func(b *bytes.Buffer, wide bool) error { return RenderStatus(b, v, wide) }))
}

func TestExplainGolden(t *testing.T) {
	cases := map[string]struct {
		cluster, node string
		machine       *clusterv1.Machine
		note          string
	}{
		"explain-recovered":   {"member1", "m1-node-2", machine("member1", "m1-node-2", true, clusterv1.MachineInfrastructureDeletedReason), ""},
		"explain-blocked":     {"member3", "m3-node-1", machine("member3", "m3-node-1", false, clusterv1.MachineInfrastructureReadyReason), ""},
		"explain-not-lost":    {"member1", "m1-node-1", nil, ""},
		"explain-no-capi":     {"member3", "m3-node-1", nil, "machines.cluster.x-k8s.io is not served by the host cluster"},
		"explain-not-covered": {"member2", "m2-node-1", nil, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := fixture()
			if name == "explain-not-covered" {
				s.Policies[0].Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}
			}
			e, err := BuildExplanation(s, c.cluster, c.node, c.machine, "", c.note)
			if err != nil {
				t.Fatal(err)
			}
			table := func(b *bytes.Buffer, _ bool) error { return RenderExplanation(b, e, now) }
			golden(t, name, render(t, "", NewNodeExplanation(e), table))
			if name == "explain-recovered" {
				golden(t, name+"-yaml", render(t, "yaml", NewNodeExplanation(e), table))
				golden(t, name+"-name", render(t, "name", NewNodeExplanation(e), table))
			}
		})
	}
}

func TestExplainUnknownCluster(t *testing.T) {
	if _, err := BuildExplanation(fixture(), "nope", "n", nil, "", ""); err == nil {
		t.Fatal("want an error for an unknown member")
	}
}

func TestPlanGolden(t *testing.T) {
	cases := map[string]struct {
		sc     Scenario
		format string
	}{
		"plan-fail-member1":      {Scenario{Cluster: "member1"}, ""},
		"plan-fail-member1-wide": {Scenario{Cluster: "member1"}, "wide"},
		"plan-full-member3":      {Scenario{Cluster: "member3", Full: true}, ""},
		"plan-full-member3-json": {Scenario{Cluster: "member3", Full: true}, "json"},
		"plan-fail-member1-name": {Scenario{Cluster: "member1"}, "name"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := BuildPlan(fixture(), c.sc)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, render(t, c.format, NewPlanReport(v), func(b *bytes.Buffer, wide bool) error { return RenderPlan(b, v, wide) }))
		})
	}
}

func TestPlanUnknownCluster(t *testing.T) {
	if _, err := BuildPlan(fixture(), Scenario{Cluster: "nope"}); !errors.Is(err, ErrUnknownCluster) {
		t.Fatalf("got %v, want ErrUnknownCluster", err)
	}
}

// The what-if counts a member that is failing but not failed yet for the
// federation guard, as the controller does: with member2 failing for 5 s
// (clusterFailedAfter 20 s), member1 failing makes two of three.
func TestPlanGuardCountsFailingMembers(t *testing.T) {
	s := fixture()
	for i := range s.Rebalances {
		if t, ok := s.Rebalances[i].Spec.Members["member2"]; ok && t.FailingSince != nil {
			t.FailingSince = &metav1.Time{Time: now.Add(-5 * time.Second)}
			s.Rebalances[i].Spec.Members["member2"] = t
		}
	}
	v, err := BuildPlan(s, Scenario{Cluster: "member1"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(v.RSPs, func(r PlanRow) bool { return r.Namespace == "demo" && r.Name == "web" })
	if i < 0 {
		t.Fatalf("no demo/web in %+v", v.RSPs)
	}
	if r := v.RSPs[i]; r.Reason != planner.ReasonTooManyMembersFailed || r.Changed {
		t.Errorf("demo/web: %s changed=%v, want %s and no change", r.Reason, r.Changed, planner.ReasonTooManyMembersFailed)
	}
}
