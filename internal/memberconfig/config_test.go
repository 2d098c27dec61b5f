package memberconfig

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/contract"
)

const token = "s3cr3t-token-value"

func kfc(endpoint string, ca []byte, tls ...kubefedv1beta1.TLSValidation) *kubefedv1beta1.KubeFedCluster {
	k := &kubefedv1beta1.KubeFedCluster{}
	k.Name = "m1"
	k.Spec.APIEndpoint = endpoint
	k.Spec.CABundle = ca
	k.Spec.SecretRef.Name = "m1-secret"
	k.Spec.DisabledTLSValidations = tls
	return k
}

func secret(tok string) *corev1.Secret {
	s := &corev1.Secret{Data: map[string][]byte{}}
	s.Namespace, s.Name = "kube-federation-system", "m1-secret"
	if tok != "" {
		s.Data[TokenKey] = []byte(tok)
	}
	return s
}

func TestRESTConfigErrors(t *testing.T) {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})
	for _, tc := range []struct {
		name string
		k    *kubefedv1beta1.KubeFedCluster
		s    *corev1.Secret
		want error
	}{
		{"no endpoint", kfc("", nil), secret(token), ErrNoEndpoint},
		{"bad endpoint", kfc("::not a url", nil), secret(token), ErrInvalidEndpoint},
		{"no token", kfc("https://10.0.0.1:6443", nil), secret(""), ErrMissingToken},
		{"bad CA", kfc("https://10.0.0.1:6443", []byte("not pem")), secret(token), ErrInvalidCABundle},
		{"CA not a cert", kfc("https://10.0.0.1:6443", ca[:10]), secret(token), ErrInvalidCABundle},
		{"unknown TLS option", kfc("https://10.0.0.1:6443", nil, "Everything"), secret(token), ErrUnknownTLSOption},
		// The old code accepted it and sent the bearer token in clear.
		{"http endpoint", kfc("http://10.0.0.1:8080", nil), secret(token), ErrInsecureEndpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RESTConfig(tc.k, tc.s, Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), token) {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
	if cfg, err := RESTConfig(kfc("http://10.0.0.1:8080", nil), secret(token), Options{AllowHTTP: true}); err != nil || cfg.Host != "http://10.0.0.1:8080" {
		t.Fatalf("http endpoint explicitly allowed: %v, %v", cfg, err)
	}
	k := kfc("https://10.0.0.1:6443", nil)
	k.Spec.ProxyURL = "://bad"
	if _, err := RESTConfig(k, secret(token), Options{}); !errors.Is(err, ErrInvalidProxyURL) {
		t.Fatalf("bad proxy: got %v", err)
	}
}

func TestRESTConfigAsKubefedctlWritesIt(t *testing.T) {
	k := kfc("https://10.0.0.1:6443", nil)
	k.Spec.ProxyURL = "http://proxy.example:3128"
	cfg, err := RESTConfig(k, secret(token), Options{QPS: 7, Burst: 9})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != k.Spec.APIEndpoint || cfg.BearerToken != token || cfg.QPS != 7 || cfg.Burst != 9 {
		t.Fatalf("unexpected config %+v", cfg)
	}
	u, err := cfg.Proxy(&http.Request{})
	if err != nil || u.String() != k.Spec.ProxyURL {
		t.Fatalf("proxy = %v, %v", u, err)
	}
	if s := cfg.String(); strings.Contains(s, token) {
		t.Fatalf("config String() leaks the token: %s", s)
	}

	all, err := RESTConfig(kfc("https://10.0.0.1:6443", []byte("ignored"), kubefedv1beta1.TLSAll), secret(token), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !all.Insecure || len(all.CAData) != 0 {
		t.Fatalf("\"*\" must skip verification without a CA: insecure=%v ca=%d", all.Insecure, len(all.CAData))
	}
}

// TestRelaxedTLS talks to a real TLS server whose certificate names
// 127.0.0.1 and example.com but not localhost.
func TestRelaxedTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	localhost := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	get := func(k *kubefedv1beta1.KubeFedCluster) error {
		cfg, err := RESTConfig(k, secret(token), Options{})
		if err != nil {
			return err
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(k.Spec.APIEndpoint)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := get(kfc(srv.URL, ca)); err != nil {
		t.Fatalf("matching name and CA: %v", err)
	}
	if err := get(kfc(localhost, ca)); err == nil {
		t.Fatal("name mismatch accepted without SubjectName disabled")
	}
	if err := get(kfc(localhost, ca, kubefedv1beta1.TLSSubjectName)); err != nil {
		t.Fatalf("SubjectName disabled: %v", err)
	}
	if err := get(kfc(localhost, nil, kubefedv1beta1.TLSSubjectName)); err == nil {
		t.Fatal("unknown CA accepted with only SubjectName disabled")
	}
	if err := get(kfc(localhost, nil, kubefedv1beta1.TLSAll)); err != nil {
		t.Fatalf("all validations disabled: %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	base := Fingerprint(kfc("https://a", nil), secret(token))
	if strings.Contains(base, token) {
		t.Fatal("fingerprint contains the token")
	}
	if Fingerprint(kfc("https://a", nil), secret(token)) != base {
		t.Fatal("fingerprint not stable")
	}
	for name, fp := range map[string]string{
		"token":    Fingerprint(kfc("https://a", nil), secret(token+"x")),
		"endpoint": Fingerprint(kfc("https://b", nil), secret(token)),
		"ca":       Fingerprint(kfc("https://a", []byte("x")), secret(token)),
		"tls":      Fingerprint(kfc("https://a", nil, kubefedv1beta1.TLSAll), secret(token)),
	} {
		if fp == base {
			t.Errorf("changing the %s does not change the fingerprint", name)
		}
	}
}

func TestCredentialsSecret(t *testing.T) {
	k := kfc("https://a", nil)
	if name, own, err := CredentialsSecret(k); err != nil || own || name != "m1-secret" {
		t.Errorf("without the annotation: %q %v %v, want kubefed's m1-secret", name, own, err)
	}
	k.Annotations = map[string]string{contract.AnnotationCredentialsSecret: "m1-fedfailover"}
	if name, own, err := CredentialsSecret(k); err != nil || !own || name != "m1-fedfailover" {
		t.Errorf("with the annotation: %q %v %v", name, own, err)
	}
	// A reference never leaves the kubefed namespace, and an empty one is
	// not kubefed's by default: refused, not ignored.
	for _, v := range []string{"other-ns/m1-fedfailover", "", "../x", "UPPER", "a b"} {
		k.Annotations[contract.AnnotationCredentialsSecret] = v
		if _, own, err := CredentialsSecret(k); !errors.Is(err, ErrInvalidCredentialsRef) || !own {
			t.Errorf("annotation %q: %v, want ErrInvalidCredentialsRef", v, err)
		}
	}
	k.Annotations = nil
	k.Spec.SecretRef.Name = ""
	if _, _, err := CredentialsSecret(k); !errors.Is(err, ErrNoSecretRef) {
		t.Errorf("no secretRef: %v", err)
	}
}

func TestCheckCredentialsSecret(t *testing.T) {
	k := kfc("https://a", nil)
	s := secret(token)
	for label, ok := range map[string]bool{"": false, "m2": false, "m1": true} {
		s.Labels = map[string]string{}
		if label != "" {
			s.Labels[contract.LabelCredentialsFor] = label
		}
		err := CheckCredentialsSecret(k, s)
		if ok != (err == nil) || (!ok && !errors.Is(err, ErrCredentialsNotForMember)) {
			t.Errorf("label %q: %v", label, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Error("the error holds the token")
		}
	}
	// Which Secret a token came from is part of the connection's identity.
	other := secret(token)
	other.Name = "m1-fedfailover"
	if Fingerprint(k, s) == Fingerprint(k, other) {
		t.Error("the same token from another Secret has the same fingerprint")
	}
}
