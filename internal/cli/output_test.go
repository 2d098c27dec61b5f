package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"
)

// outputErr is the error of -o format.
func outputErr(format string) error {
	f := NewPrintFlags()
	cmd := &cobra.Command{}
	f.AddFlags(cmd)
	_ = cmd.Flags().Set("output", format)
	_, err := f.Output()
	return err
}

func TestOutputRejectsUnknownFormats(t *testing.T) {
	for _, format := range []string{"table", "jsn", "custom-columns=NAME:.name", "wide=1"} {
		err := outputErr(format)
		if !genericclioptions.IsNoCompatiblePrinterError(err) {
			t.Errorf("-o %s: %v, want cli-runtime's NoCompatiblePrinterError", format, err)
			continue
		}
		for _, want := range []string{`output format "` + format + `"`, "allowed formats are:", "wide", "json", "yaml", "name",
			"jsonpath", "jsonpath-file", "go-template", "go-template-file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("-o %s: %q lacks %q", format, err, want)
			}
		}
	}
}

func TestOutputRejectsBadTemplates(t *testing.T) {
	cases := map[string]struct{ format, want string }{
		"jsonpath without template":    {"jsonpath", "template format specified but no template given"},
		"jsonpath that does not parse": {"jsonpath={.members[", "error parsing jsonpath"},
		"template that does not parse": {"go-template={{.members", "error parsing template"},
		"missing template file":        {"go-template-file=" + filepath.Join(t.TempDir(), "nope"), "error reading --template"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := outputErr(c.format)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// The template files and --template without -o (go-template, as in
// kubectl) print the report like the inline forms.
func TestOutputTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	jp, gt := filepath.Join(dir, "members.jsonpath"), filepath.Join(dir, "members.tmpl")
	if err := os.WriteFile(jp, []byte(`{.members[*].name}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gt, []byte(`{{range .members}}{{.name}} {{end}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewStatusReport(BuildStatus(fixture()))
	for format, want := range map[string]string{
		"jsonpath-file=" + jp:    "member1 member2 member3",
		"go-template-file=" + gt: "member1 member2 member3 ",
		"jsonpath=" + "{.kind}":  "StatusReport",
	} {
		if got := string(render(t, format, r, nil)); got != want {
			t.Errorf("-o %s: %q, want %q", format, got, want)
		}
	}
	f := NewPrintFlags()
	cmd := &cobra.Command{}
	f.AddFlags(cmd)
	_ = cmd.Flags().Set("template", "{{.apiVersion}}")
	out, err := f.Output()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := out.Print(&b, r, nil); err != nil || b.String() != "failover.fedfailover.io/v1alpha1" {
		t.Errorf("--template without -o: %q, %v", b.String(), err)
	}
}

// Every report is an object cli-runtime prints: its JSON has apiVersion
// and kind, and its copy is equal to it.
func TestReportsAreTypedObjects(t *testing.T) {
	s := fixture()
	plan, err := BuildPlan(s, Scenario{Cluster: "member1"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := BuildExplanation(s, "member1", "m1-node-2", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for kind, r := range map[string]Report{KindStatusReport: NewStatusReport(BuildStatus(s)),
		KindPlanReport: NewPlanReport(plan), KindNodeExplanation: NewNodeExplanation(e)} {
		var got struct{ APIVersion, Kind string }
		if err := json.Unmarshal(render(t, "json", r, nil), &got); err != nil {
			t.Fatal(err)
		}
		if got.APIVersion != "failover.fedfailover.io/v1alpha1" || got.Kind != kind {
			t.Errorf("%s prints as %s %s", kind, got.APIVersion, got.Kind)
		}
		if c := r.DeepCopyObject(); !bytes.Equal(render(t, "json", c.(Report), nil), render(t, "json", r, nil)) {
			t.Errorf("%s: the copy prints differently", kind)
		}
	}
}

// A stream prints a document, then one more only when the report shows
// something else: a new time alone prints nothing.
func TestStreamPrintsOnlyChanges(t *testing.T) {
	for _, format := range []string{"json", "yaml", "name", "jsonpath={.members[*].nodesReady}"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			st := outputFor(t, format).NewStream(&b)
			s := fixture()
			printed := func(want bool) {
				t.Helper()
				r := NewStatusReport(BuildStatus(s))
				got, err := st.Print(r)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("printed %v, want %v; output so far:\n%s", got, want, b.String())
				}
			}
			printed(true)
			s.Now = s.Now.Add(time.Minute)
			printed(false)
			if format == "name" {
				s.Policies = s.Policies[:1] // -o name changes only with the objects
			} else {
				s.Policies[0].Status.Members[0].NodesReady++
			}
			printed(true)
			printed(false)
			checkStream(t, format, b.String(), 2)
		})
	}
}

// checkStream: n documents, each complete; JSON one per line.
func checkStream(t *testing.T, format, out string, n int) {
	t.Helper()
	switch format {
	case "json":
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("%d lines, want %d documents:\n%s", len(lines), n, out)
		}
		for _, l := range lines {
			var v StatusView
			if err := json.Unmarshal([]byte(l), &v); err != nil || len(v.Members) == 0 {
				t.Errorf("line %q: %v", l, err)
			}
		}
	case "yaml":
		docs := strings.Split(out, "---\n")
		if len(docs) != n {
			t.Fatalf("%d documents, want %d:\n%s", len(docs), n, out)
		}
		for _, d := range docs {
			var v StatusReport
			if err := yaml.Unmarshal([]byte(d), &v); err != nil || v.Kind != KindStatusReport || len(v.Members) == 0 {
				t.Errorf("document %q: %v", d, err)
			}
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("the stream does not end with a newline: %q", out)
	}
}

func TestStreamRefusesTables(t *testing.T) {
	var b bytes.Buffer
	if _, err := outputFor(t, "wide").NewStream(&b).Print(NewStatusReport(StatusView{})); err == nil {
		t.Error("a stream of tables printed")
	}
}

// untimed clears only the time.
func TestUntimed(t *testing.T) {
	r := NewStatusReport(BuildStatus(fixture()))
	u := r.untimed().(*StatusReport)
	if !u.Time.IsZero() || r.Time.IsZero() {
		t.Fatalf("untimed: %v, original %v", u.Time, r.Time)
	}
	u.Time = r.Time
	if !reflect.DeepEqual(u, r) {
		t.Error("untimed changed more than the time")
	}
}
