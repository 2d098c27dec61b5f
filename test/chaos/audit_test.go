package chaos

import (
	"os"
	"path/filepath"
	"testing"
)

const (
	auditTaint   = `{"kind":"Event","level":"RequestResponse","stage":"ResponseComplete","verb":"patch","userAgent":"fedfailover-member","objectRef":{"resource":"nodes","name":"member1-node-1"},"responseStatus":{"code":200},"requestObject":{"spec":{"taints":[{"key":"node.kubernetes.io/out-of-service","effect":"NoExecute","value":"nodeshutdown"}]}},"responseObject":{"spec":{"taints":[{"key":"node.kubernetes.io/out-of-service","effect":"NoExecute"}]}},"requestReceivedTimestamp":"2026-12-01T12:00:01.500000Z"}`
	auditUntaint = `{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"fedfailover-member","objectRef":{"resource":"nodes","name":"member1-node-1"},"responseStatus":{"code":200},"requestObject":{"spec":{"taints":null}},"responseObject":{"spec":{}},"requestReceivedTimestamp":"2026-12-01T12:00:02Z"}`
	auditPod     = `{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"fedfailover-member","objectRef":{"resource":"pods","namespace":"db","name":"db-0"},"responseStatus":{"code":200},"requestObject":{"gracePeriodSeconds":0},"responseObject":{"spec":{"nodeName":"member1-node-2"}},"requestReceivedTimestamp":"2026-12-01T12:00:03Z"}`
	auditVA      = `{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"fedfailover-member","objectRef":{"resource":"volumeattachments","name":"va-1"},"responseStatus":{"code":200},"responseObject":{"spec":{"nodeName":"member1-node-2"}},"requestReceivedTimestamp":"2026-12-01T12:00:04Z"}`
	auditKubefed = `{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"kubefed-controller-manager","objectRef":{"resource":"pods","namespace":"db","name":"db-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T12:00:05Z"}`
	auditFailed  = `{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"fedfailover-member","objectRef":{"resource":"pods","namespace":"db","name":"db-1"},"responseStatus":{"code":404},"requestReceivedTimestamp":"2026-12-01T12:00:06Z"}`
	auditEvent1  = `{"kind":"Event","stage":"ResponseComplete","verb":"create","userAgent":"fedfailover-member","objectRef":{"resource":"events","namespace":"db","name":"x"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-12-01T12:00:07Z"}`
)

func TestClassify(t *testing.T) {
	cases := []struct {
		line string
		ok   bool
		kind ActKind
		node string
	}{
		{auditTaint, true, ActTaint, "member1-node-1"},
		{auditUntaint, true, ActWrite, ""},
		{auditPod, true, ActPodDelete, "member1-node-2"},
		{auditVA, true, ActDetachVolume, "member1-node-2"},
		{auditKubefed, false, "", ""},
		{auditFailed, false, "", ""},
		{auditEvent1, true, ActWrite, ""},
		{`not json`, false, "", ""},
	}
	for _, c := range cases {
		a, ok := classify("member1", "fedfailover-member", []byte(c.line))
		if ok != c.ok || a.Kind != c.kind || a.Node != c.node {
			t.Errorf("classify(%.60s…) = %+v, %v; want kind %q node %q ok %v", c.line, a, ok, c.kind, c.node, c.ok)
		}
	}
}

func TestAuditTailReadsWholeLinesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	tail := &auditTail{cluster: "member1", path: path, agent: "fedfailover-member"}
	if acts, err := tail.read(); err != nil || len(acts) != 0 {
		t.Fatalf("missing file: %v %v", acts, err)
	}
	if err := os.WriteFile(path, []byte(auditTaint+"\n"+auditPod[:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	acts, err := tail.read()
	if err != nil || len(acts) != 1 || acts[0].Kind != ActTaint {
		t.Fatalf("first read: %+v %v", acts, err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(auditPod[40:] + "\n" + auditVA + "\n")
	_ = f.Close()
	acts, err = tail.read()
	if err != nil || len(acts) != 2 || acts[0].Kind != ActPodDelete || acts[1].Kind != ActDetachVolume {
		t.Fatalf("second read: %+v %v", acts, err)
	}
}

func TestTokenSubject(t *testing.T) {
	// header.payload.signature with payload {"sub":"system:serviceaccount:kube-federation-system:member1-host"}
	tok := "e30.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1mZWRlcmF0aW9uLXN5c3RlbTptZW1iZXIxLWhvc3QifQ.sig"
	ns, name, err := tokenSubject(tok)
	if err != nil || ns != "kube-federation-system" || name != "member1-host" {
		t.Fatalf("tokenSubject = %q %q %v", ns, name, err)
	}
	for _, bad := range []string{"", "a.b", "e30.eyJzdWIiOiJhZG1pbiJ9.sig"} {
		if _, _, err := tokenSubject(bad); err == nil {
			t.Errorf("tokenSubject(%q): want an error", bad)
		}
	}
}
