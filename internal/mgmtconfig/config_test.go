package mgmtconfig

import (
	"errors"
	"strings"
	"testing"
)

const caData = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFqQWpNU0V3SHdZRFZRUUREQmhyTTNNdGMyVnkKZG1WeUxXTmhRREUzTURBd01EQXdNREF3SGhjTk1qUXdNVEF4TURBd01EQXdXaGNOTXpRd01UQXhNREF3TURBdwpXakFqTVNFd0h3WURWUVFEREJock0zTXRjMlZ5ZG1WeUxXTmhRREUzTURBd01EQXdNREF3V1RBVEJnY3Foa2pPClBRSUJCZ2dxaGtqT1BRTUJCd05DQUFTbGFkb3AKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

// kubeconfig is a one-context kubeconfig whose user has the given lines.
func kubeconfig(server, cluster, user string) []byte {
	return []byte(`apiVersion: v1
kind: Config
current-context: mgmt
clusters:
- name: mgmt
  cluster:
    server: ` + server + `
` + cluster + `
users:
- name: fedfailover
  user:
` + user + `
contexts:
- name: mgmt
  context: {cluster: mgmt, user: fedfailover}
`)
}

func TestRESTConfig(t *testing.T) {
	const token = "    token: s3cr3t-token"
	cases := []struct {
		name    string
		data    []byte
		opts    Options
		wantErr error
	}{
		{"token", kubeconfig("https://mgmt.example:6443", "", token), Options{}, nil},
		{"client certificate data", kubeconfig("https://mgmt.example:6443", "", "    client-certificate-data: "+caData+"\n    client-key-data: "+caData), Options{}, nil},
		{"exec plugin", kubeconfig("https://mgmt.example:6443", "", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}"), Options{}, ErrRefused},
		{"auth provider", kubeconfig("https://mgmt.example:6443", "", "    auth-provider: {name: oidc}"), Options{}, ErrRefused},
		{"token file", kubeconfig("https://mgmt.example:6443", "", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"), Options{}, ErrRefused},
		{"client certificate file", kubeconfig("https://mgmt.example:6443", "", "    client-certificate: /etc/tls.crt\n    client-key: /etc/tls.key"), Options{}, ErrRefused},
		{"CA file", kubeconfig("https://mgmt.example:6443", "    certificate-authority: /etc/ca.crt", token), Options{}, ErrRefused},
		{"no credentials", kubeconfig("https://mgmt.example:6443", "", "    {}"), Options{}, ErrRefused},
		{"http", kubeconfig("http://mgmt.example:8080", "", token), Options{}, ErrInsecure},
		{"http allowed", kubeconfig("http://mgmt.example:8080", "", token), Options{AllowInsecure: true}, nil},
		{"skip TLS verify", kubeconfig("https://mgmt.example:6443", "    insecure-skip-tls-verify: true", token), Options{}, ErrInsecure},
		{"not a kubeconfig", []byte("s3cr3t-token: [unclosed"), Options{}, ErrInvalid},
		{"no server", kubeconfig(`""`, "", token), Options{}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := RESTConfig(c.data, c.opts)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q quotes the Secret", err)
			}
			if err == nil && cfg.Host == "" {
				t.Error("no host in the config")
			}
		})
	}
}

// TestOnlyTheCurrentContext: another context's user (here an exec plugin)
// is neither checked nor used.
func TestOnlyTheCurrentContext(t *testing.T) {
	data := []byte(`apiVersion: v1
kind: Config
current-context: b
clusters:
- {name: a, cluster: {server: "https://a.example"}}
- {name: b, cluster: {server: "https://b.example"}}
users:
- {name: a, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}}
- {name: b, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: a}}
- {name: b, context: {cluster: b, user: b}}
`)
	cfg, err := RESTConfig(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://b.example" || cfg.ExecProvider != nil || cfg.BearerToken != "t" {
		t.Errorf("host %q exec %v token %q: want context b alone", cfg.Host, cfg.ExecProvider, cfg.BearerToken)
	}
	noCurrent := []byte(strings.Replace(string(data), "current-context: b", "current-context: c", 1))
	if _, err := RESTConfig(noCurrent, Options{}); !errors.Is(err, ErrContext) {
		t.Errorf("unknown current context: err %v, want %v", err, ErrContext)
	}
}

func TestHashChangesWithContent(t *testing.T) {
	a, b := Hash([]byte("a")), Hash([]byte("b"))
	if a == b || a != Hash([]byte("a")) {
		t.Errorf("hashes %s %s", a, b)
	}
}
