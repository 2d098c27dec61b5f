package main

import (
	"slices"
	"strings"
	"testing"
)

// completions runs cobra's completion entry point, as
// kubectl_complete-failover does, and returns the candidates and the
// directive line (":4" is ShellCompDirectiveNoFileComp).
func completions(t *testing.T, h *host, args ...string) ([]string, string) {
	t.Helper()
	out, err := run(t.Context(), append([]string{"__complete", "--kubeconfig=" + h.admin}, args...)...)
	if err != nil {
		t.Fatalf("__complete %s: %v", strings.Join(args, " "), err)
	}
	return parseCompletion(t, out)
}

func parseCompletion(t *testing.T, out string) ([]string, string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, ":") {
		t.Fatalf("no directive line in %q", out)
	}
	var names []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t") // drop the description
		names = append(names, name)
	}
	return names, last
}

func testCompletion(t *testing.T, h *host) {
	cases := []struct {
		name      string
		args      []string
		want      []string
		directive string
	}{
		{"subcommands", []string{""}, []string{"explain", "help", "member-rbac", "plan", "status", "version"}, ":4"},
		{"subcommand prefix", []string{"pl"}, []string{"plan"}, ":4"},
		{"flags", []string{"status", "--w"}, []string{"--watch"}, ":4"},
		{"output formats", []string{"status", "-o", ""}, []string{"wide", "json", "yaml", "kyaml", "name",
			"go-template", "go-template-file", "template", "templatefile", "jsonpath", "jsonpath-as-json", "jsonpath-file"}, ":4"},
		{"contexts", []string{"status", "--context", ""}, []string{"envtest"}, ":4"},
		{"members to fail", []string{"plan", "--fail", ""}, []string{"member1", "member2"}, ":4"},
		{"members to fill, by prefix", []string{"plan", "--full", "member2"}, []string{"member2"}, ":4"},
		// The member first, with no space after the slash (2|4).
		{"node: members", []string{"explain", "node", ""}, []string{"member1/", "member2/"}, ":6"},
		// Nodes of the member known from its Machines, policy status and
		// NodeRecovery records (m1-node-3 has only a record).
		{"node: nodes of a member", []string{"explain", "node", "member1/"}, []string{"member1/m1-node-1", "member1/m1-node-2", "member1/m1-node-3"}, ":4"},
		{"node: by prefix", []string{"explain", "node", "member1/m1-node-2"}, []string{"member1/m1-node-2"}, ":4"},
		{"node: unknown member", []string{"explain", "node", "nope/"}, nil, ":4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, directive := completions(t, h, c.args...)
			if !slices.Equal(got, c.want) || directive != c.directive {
				t.Errorf("completing %q: %q %s, want %q %s", c.args, got, directive, c.want, c.directive)
			}
		})
	}
}
