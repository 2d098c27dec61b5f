package member

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberconfig"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// TestCredentialsSecretAnnotation: the annotation replaces kubefed's token
// with one from a Secret labelled for the member, in the kubefed namespace
// only; the endpoint stays the KubeFedCluster's, and anything else is
// refused (never kubefed's token as a fallback).
func TestCredentialsSecretAnnotation(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	tokenSecret := func(ns, name, token string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Data: map[string][]byte{memberconfig.TokenKey: []byte(token)}}
	}
	forM1 := map[string]string{contract.LabelCredentialsFor: "m1"}
	host := fake.NewClientBuilder().WithScheme(s).WithObjects(
		tokenSecret(DefaultNamespace, "m1-kubefed", "kubefed-token", nil),
		tokenSecret(DefaultNamespace, "m1-fedfailover", "least-token", forM1),
		tokenSecret(DefaultNamespace, "m2-fedfailover", "m2-token", map[string]string{contract.LabelCredentialsFor: "m2"}),
		tokenSecret(DefaultNamespace, "m2-kubefed", "m2-admin-token", nil),
		tokenSecret("elsewhere", "m1-fedfailover", "elsewhere-token", forM1),
	).Build()
	r := &reconciler{host: host, cache: newCache(Options{}.withDefaults(), s)}
	kfc := func(annotation *string) *kubefedv1beta1.KubeFedCluster {
		k := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "m1"},
			Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: "https://m1.example:6443",
				SecretRef: kubefedv1beta1.LocalSecretReference{Name: "m1-kubefed"}}}
		if annotation != nil {
			k.Annotations = map[string]string{contract.AnnotationCredentialsSecret: *annotation}
		}
		return k
	}
	ptr := func(s string) *string { return &s }

	in, _, err := r.restConfig(t.Context(), kfc(nil))
	if err != nil || in.cfg.BearerToken != "kubefed-token" || in.credentials != "" {
		t.Fatalf("without the annotation: %+v %v, want kubefed's token", in, err)
	}
	kubefed := in.fingerprint
	in, _, err = r.restConfig(t.Context(), kfc(ptr("m1-fedfailover")))
	if err != nil || in.cfg.BearerToken != "least-token" || in.credentials != "m1-fedfailover" || in.cfg.Host != "https://m1.example:6443" {
		t.Fatalf("with the annotation: %+v %v, want the labelled Secret's token for kubefed's endpoint", in, err)
	}
	if in.fingerprint == kubefed {
		t.Error("switching credentials does not reconnect")
	}
	for _, c := range []struct {
		annotation, reason, msg string
	}{
		{"elsewhere/m1-fedfailover", ReasonConfigInvalid, "must be the name of a Secret"},
		{"", ReasonConfigInvalid, "must be the name of a Secret"},
		{"missing", ReasonSecretNotFound, "secret named by annotation failover.fedfailover.io/credentials-secret kube-federation-system/missing not found"},
		// Another member's Secret, and kubefed's own, lack this member's label.
		{"m2-fedfailover", ReasonSecretInvalid, `(label "m2")`},
		{"m2-kubefed", ReasonSecretInvalid, "is not labelled failover.fedfailover.io/credentials-for"},
	} {
		in, reason, err := r.restConfig(t.Context(), kfc(ptr(c.annotation)))
		if err == nil || reason != c.reason || !strings.Contains(err.Error(), c.msg) || in.cfg != nil {
			t.Errorf("annotation %q: %q %v, want %s with %q", c.annotation, reason, err, c.reason, c.msg)
		}
		for _, tok := range []string{"kubefed-token", "least-token", "m2-token", "m2-admin-token", "elsewhere-token"} {
			if err != nil && strings.Contains(err.Error(), tok) {
				t.Errorf("annotation %q: the error holds a token: %v", c.annotation, err)
			}
		}
	}
}
