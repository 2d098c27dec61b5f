// Package docs holds only tests of the documentation: links resolve, the
// alerts link to their runbook sections, and the runbook covers every
// condition and reason fedfailover sets.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const repoRoot = ".." // go test runs in the package directory

var (
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	notAnchor  = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// markdownFiles are README.md and docs/*.md.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(files) < 5 {
		t.Fatalf("docs/*.md: %v (%d files)", err, len(files))
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// links returns the link targets of a markdown text, outside code.
func links(md string) []string {
	md = fence.ReplaceAllString(md, "")
	md = codeSpan.ReplaceAllString(md, "")
	var out []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(md, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors are the ids GitHub gives a file's headings: lower case, without
// punctuation, spaces as hyphens, "-1", "-2"... for repeats.
func anchors(md string) map[string]bool {
	md = fence.ReplaceAllString(md, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(md, -1) {
		text := linkText.ReplaceAllString(m[1], "$1")
		id := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[id]; n > 0 {
			out[id+"-"+strconv.Itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

func TestAnchors(t *testing.T) {
	got := anchors("# Runbook\n## Alerts\n### FedfailoverStormActive\n## Rebalancing (`controllers/rebalance`)\n" +
		"## Storage that handles node loss itself\n## Alerts\n```\n# not a heading\n```\n## [Link](x.md) here\n")
	for _, want := range []string{"runbook", "alerts", "fedfailoverstormactive", "rebalancing-controllersrebalance",
		"storage-that-handles-node-loss-itself", "alerts-1", "link-here"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became an anchor")
	}
}

// TestRelativeLinksResolve: every relative link of README.md and docs/*.md
// names a file or directory of the repository, and its #anchor, if any, a
// heading of that file.
func TestRelativeLinksResolve(t *testing.T) {
	n := 0
	for _, file := range markdownFiles(t) {
		for _, target := range links(read(t, file)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %v", rel(file), target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(read(t, resolved))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", rel(file), target, rel(resolved), anchor)
			}
		}
	}
	if n < 20 {
		t.Errorf("checked only %d relative links", n)
	}
}

func rel(path string) string {
	r, err := filepath.Rel(repoRoot, path)
	if err != nil {
		return path
	}
	return r
}

const runbookURL = "https://github.com/fedfailover/fedfailover/blob/main/docs/runbook.md#"

// alertRule is what the docs tests read of an alerting rule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules are the rules of config/prometheus/alerts.yaml, in order.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(repoRoot, "config", "prometheus", "alerts.yaml"))), &rules); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range rules.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("no alerts found")
	}
	return out
}

// TestAlertsLinkToTheirRunbookSection: each alert's runbook_url is its own
// section of docs/runbook.md.
func TestAlertsLinkToTheirRunbookSection(t *testing.T) {
	sections := anchors(read(t, "runbook.md"))
	for _, r := range alertRules(t) {
		url := r.Annotations["runbook_url"]
		want := runbookURL + strings.ToLower(r.Alert)
		if url != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, url, want)
		}
		if !sections[strings.ToLower(r.Alert)] {
			t.Errorf("alert %s: docs/runbook.md has no section ### %s", r.Alert, r.Alert)
		}
	}
}

// alertRow is a row of the alert table of install.md: | `Name` | fires when | severity |
var alertRow = regexp.MustCompile("(?m)^ *\\| `(Fedfailover[A-Za-z]+)` \\|[^|]*\\| *([a-z]+) *\\|$")

// TestInstallDocListsEveryAlert: the alert table of docs/install.md has a
// row for each alert of alerts.yaml, with its severity, in the same order,
// and no other.
func TestInstallDocListsEveryAlert(t *testing.T) {
	var want, have []string
	for _, r := range alertRules(t) {
		want = append(want, r.Alert+" "+r.Labels["severity"])
	}
	for _, m := range alertRow.FindAllStringSubmatch(read(t, "install.md"), -1) {
		have = append(have, m[1]+" "+m[2])
	}
	if !slices.Equal(have, want) {
		t.Errorf("the alert table of docs/install.md (alert severity):\n  %s\nalerts.yaml:\n  %s",
			strings.Join(have, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestRunbookCoversEveryReason: every condition type, reason, recovery
// phase, fencing evidence and decision action that the code defines as a
// constant appears in docs/runbook.md as `Value`.
func TestRunbookCoversEveryReason(t *testing.T) {
	runbook := read(t, "runbook.md")
	values := reasonConstants(t)
	if len(values) < 50 {
		t.Fatalf("found only %d reason constants: is the scan broken?", len(values))
	}
	for v, where := range values {
		if !strings.Contains(runbook, "`"+v+"`") {
			t.Errorf("docs/runbook.md does not explain %q (%s)", v, where)
		}
	}
}

// documented says which constants the runbook must explain, by name.
func documented(name string) bool {
	for _, prefix := range []string{"Reason", "Condition", "RecoveryPhase", "Evidence", "Action"} {
		if strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			return true
		}
	}
	return false
}

// reasonConstants maps each documented string constant's value to where it
// is defined, from the Go sources of the API and the controllers and
// decision packages.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{"api", "controllers", "internal/fencing", "internal/planner"} {
		root := filepath.Join(repoRoot, dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !name.IsExported() || !documented(name.Name) || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						out[v] = rel(path) + ": " + name.Name
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
