package lab

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestClusterPKI(t *testing.T) {
	pki, err := NewClusterPKI("member1")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pki.CA.CertPEM) {
		t.Fatal("CA PEM not parseable")
	}
	serving := parseCert(t, pki.Serving.CertPEM)
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving cert not valid for localhost: %v", err)
	}
	if err := serving.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("serving cert not valid for 127.0.0.1: %v", err)
	}
	admin := parseCert(t, pki.Admin.CertPEM)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin cert not a valid client cert: %v", err)
	}
	if got := admin.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("admin organization = %v, want [system:masters]", got)
	}
	if _, err := tls.X509KeyPair(pki.Admin.CertPEM, pki.Admin.KeyPEM); err != nil {
		t.Errorf("admin key pair: %v", err)
	}
	if b, _ := pem.Decode(pki.SAPubPEM); b == nil || b.Type != "PUBLIC KEY" {
		t.Errorf("service-account public key not PEM")
	}
	dir := t.TempDir()
	if err := pki.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fileCA, fileServingCert, fileServingKey, fileAdminCert, fileAdminKey, fileSAKey, fileSAPub} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPortAllocatorUnique(t *testing.T) {
	a := NewPortAllocator()
	seen := map[int]bool{}
	for range 30 {
		p, err := a.Free()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port
	err = NewPortAllocator().Claim(port)
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("Claim(busy port) = %v, want an 'in use' error naming the port", err)
	}
	a := NewPortAllocator()
	free, _ := a.Free()
	if err := a.Claim(free); err == nil {
		t.Fatalf("claiming an already allocated port must fail")
	}
	if err := NewPortAllocator().Claim(70000); err == nil {
		t.Fatalf("out-of-range port accepted")
	}
}

func TestRenderStages(t *testing.T) {
	p := DefaultStageParams()
	p.CPU = "7"
	out, err := RenderStages(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("[[")) {
		t.Fatalf("unrendered lab placeholder left:\n%s", out)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	byName := map[string]map[string]any{}
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc == nil {
			continue
		}
		if doc["kind"] != "Stage" || doc["apiVersion"] != "kwok.x-k8s.io/v1alpha1" {
			t.Fatalf("unexpected document %v", doc["kind"])
		}
		name := doc["metadata"].(map[string]any)["name"].(string)
		byName[name] = doc
	}
	for _, want := range []string{"lab-node-initialize", "lab-node-heartbeat", "lab-pod-ready", "lab-pod-ready-volumes-attached", "lab-pod-ready-again", "lab-pod-delete", "lab-pod-complete"} {
		if byName[want] == nil {
			t.Errorf("stage %s missing (have %v)", want, keys(byName))
		}
	}
	// The PVC pod stage must be gated on the attacher's annotation, and the
	// plain pod stage must exclude PVC pods.
	gated := selectorKeys(byName["lab-pod-ready-volumes-attached"])
	if !strings.Contains(strings.Join(gated, "\n"), AttachedAnnotation) {
		t.Errorf("volume pod stage not gated on %s: %v", AttachedAnnotation, gated)
	}
	plain := selectorKeys(byName["lab-pod-ready"])
	if !strings.Contains(strings.Join(plain, "\n"), "persistentVolumeClaim") {
		t.Errorf("plain pod stage does not exclude PVC pods: %v", plain)
	}
	// kwok's own templates survive rendering and our values land in them.
	tmpl := byName["lab-pod-ready"]["spec"].(map[string]any)["next"].(map[string]any)["statusTemplate"].(string)
	if !strings.Contains(tmpl, "phase: Running") || !strings.Contains(tmpl, "{{ $now := Now }}") {
		t.Errorf("pod-ready template mangled:\n%s", tmpl)
	}
	if !bytes.Contains(out, []byte(`cpu: "7"`)) {
		t.Errorf("node CPU not rendered")
	}
	if _, err := RenderStages(StageParams{}); err == nil {
		t.Errorf("rendering without attached annotation must fail")
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func selectorKeys(stage map[string]any) []string {
	var out []string
	sel := stage["spec"].(map[string]any)["selector"].(map[string]any)
	for _, e := range sel["matchExpressions"].([]any) {
		out = append(out, e.(map[string]any)["key"].(string))
	}
	return out
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := &State{Dir: dir, Clusters: []*ClusterState{{Name: "member1", Role: RoleMember, Nodes: []NodeState{{Name: "member1-node-1"}}}}}
	if err := withStateLock(dir, func() error { return writeState(dir, st) }); err != nil {
		t.Fatal(err)
	}
	err := UpdateState(dir, func(s *State) error {
		s.SetProc(&Proc{Component: CompKwok, Cluster: "member1", Node: "member1-node-1", PID: 42})
		s.SetProc(&Proc{Component: CompKwok, Cluster: "member1", Node: "member1-node-1", PID: 43})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Procs) != 1 || got.Proc("member1/kwok/member1-node-1").PID != 43 {
		t.Fatalf("SetProc did not replace: %+v", got.Procs)
	}
	if c, n := got.NodeCluster("member1-node-1"); c == nil || n == nil || c.Name != "member1" {
		t.Fatalf("NodeCluster lookup failed")
	}
	if _, err := LoadState(t.TempDir()); !errors.Is(err, ErrNoLab) {
		t.Fatalf("LoadState(empty) = %v, want ErrNoLab", err)
	}
}

func TestProcessLifecycle(t *testing.T) {
	dir := t.TempDir()
	p := &Proc{Component: CompKwok, Cluster: "c", Node: "n", Binary: "/bin/sh", Args: []string{"-c", "echo started; exec sleep 60"}, Log: filepath.Join(dir, "p.log")}
	if err := startProc(p, true); err != nil {
		t.Fatal(err)
	}
	if s := procState(p.PID); s != ProcRunning {
		t.Fatalf("state = %v, want running", s)
	}
	signalGroup(p.PID, 19) // SIGSTOP
	deadline := time.Now().Add(5 * time.Second)
	for procState(p.PID) != ProcStopped && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := procState(p.PID); s != ProcStopped {
		t.Fatalf("state after SIGSTOP = %v, want stopped", s)
	}
	if rssBytes(p.PID) <= 0 {
		t.Errorf("no RSS for a live process")
	}
	stopAll([]*Proc{p}, time.Second)
	if s := procState(p.PID); s != ProcGone {
		t.Fatalf("state after stop = %v, want gone", s)
	}
	if !strings.Contains(logTail(p.Log, 5), "started") {
		t.Errorf("log tail misses output: %q", logTail(p.Log, 5))
	}
}

func TestCheckBinaries(t *testing.T) {
	err := CheckBinaries(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("CheckBinaries(empty) = %v, want a 'run make tools' error naming the binaries", err)
	}
}

func TestWaitReadyReportsLogTail(t *testing.T) {
	dir := t.TempDir()
	p := &Proc{Component: CompEtcd, Cluster: "c", Binary: "/bin/sh", Args: []string{"-c", "echo 'bind: address already in use' >&2; exit 1"}, Log: filepath.Join(dir, "etcd.log")}
	if err := startProc(p, true); err != nil {
		t.Fatal(err)
	}
	err := waitReady(t.Context(), p, 10*time.Second, func(context.Context) error { return errors.New("not yet") })
	var ce *ComponentError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("waitReady = %v, want a ComponentError with the log tail", err)
	}
}

func TestExitReason(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"I1130 ok\nE1130 some error\n":                                             "no reason in its log",
		"I1130 ok\nF1130 12:00:00 1 main.go:1] leaderelection lost\ngoroutine 1\n": "F1130 12:00:00 1 main.go:1] leaderelection lost",
		"I1130 ok\npanic: boom\n\ngoroutine 7 [running]:\n":                        "panic: boom",
		"fatal error: concurrent map writes\n":                                     "fatal error: concurrent map writes",
	}
	i := 0
	for log, want := range cases {
		i++
		p := filepath.Join(dir, fmt.Sprintf("%d.log", i))
		if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := exitReason(p); got != want {
			t.Errorf("exitReason(%q) = %q, want %q", log, got, want)
		}
	}
	if got := exitReason(filepath.Join(dir, "missing")); got != "no log" {
		t.Errorf("missing log: %q", got)
	}
}
