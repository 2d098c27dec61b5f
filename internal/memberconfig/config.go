// Package memberconfig builds the REST config of a member cluster from the
// KubeFedCluster and Secret that `kubefedctl join` writes in the host cluster.
// It is pure: no clients, no I/O.
package memberconfig

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// TokenKey is the Secret data key kubefedctl join stores the member's
// service account token under.
const TokenKey = "token"

// Errors RESTConfig wraps, so callers can give each a reason of its own.
var (
	ErrNoEndpoint       = errors.New("spec.apiEndpoint is empty")
	ErrInvalidEndpoint  = errors.New("spec.apiEndpoint is not a valid https URL")
	ErrInvalidCABundle  = errors.New("spec.caBundle holds no PEM certificate")
	ErrInvalidProxyURL  = errors.New("spec.proxyURL is not a valid URL")
	ErrNoSecretRef      = errors.New("spec.secretRef.name is empty")
	ErrMissingToken     = errors.New("secret has no non-empty \"token\" key")
	ErrUnknownTLSOption = errors.New("spec.disabledTLSValidations has an unknown value")
	// ErrInvalidCredentialsRef: the credentials-secret annotation is not
	// the bare name of a Secret (a reference never leaves the kubefed
	// namespace).
	ErrInvalidCredentialsRef = errors.New("annotation " + contract.AnnotationCredentialsSecret +
		" must be the name of a Secret in the KubeFedCluster's namespace")
	// ErrCredentialsNotForMember: the Secret the annotation names does not
	// say it holds credentials for this member.
	ErrCredentialsNotForMember = errors.New("secret is not labelled " + contract.LabelCredentialsFor + "=<this KubeFedCluster's name>")
	// ErrInsecureEndpoint: an http:// endpoint would send the member's
	// bearer token in clear; refused unless explicitly allowed.
	ErrInsecureEndpoint = errors.New("spec.apiEndpoint uses http://, which sends the member's token in clear (allow it with --allow-insecure-member-endpoints)")
)

// Options tune the connection; zero values take client-go's defaults.
type Options struct {
	QPS         float32
	Burst       int
	UserAgent   string
	DialTimeout time.Duration
	// AllowHTTP accepts http:// endpoints (tests and labs only).
	AllowHTTP bool
}

// RESTConfig returns the config to reach the member described by kfc with the
// credentials in secret. Errors never contain the token.
func RESTConfig(kfc *kubefedv1beta1.KubeFedCluster, secret *corev1.Secret, o Options) (*rest.Config, error) {
	spec := kfc.Spec
	if spec.APIEndpoint == "" {
		return nil, ErrNoEndpoint
	}
	u, err := url.Parse(spec.APIEndpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%w: %q", ErrInvalidEndpoint, spec.APIEndpoint)
	}
	if u.Scheme == "http" && !o.AllowHTTP {
		return nil, fmt.Errorf("%w: %q", ErrInsecureEndpoint, spec.APIEndpoint)
	}
	token := secret.Data[TokenKey]
	if len(token) == 0 {
		return nil, fmt.Errorf("secret %s/%s: %w", secret.Namespace, secret.Name, ErrMissingToken)
	}
	skip, err := disabledValidations(spec.DisabledTLSValidations)
	if err != nil {
		return nil, err
	}
	if !skip.all && len(spec.CABundle) > 0 && !x509.NewCertPool().AppendCertsFromPEM(spec.CABundle) {
		return nil, ErrInvalidCABundle
	}

	cfg := &rest.Config{
		Host:        spec.APIEndpoint,
		BearerToken: string(token),
		QPS:         o.QPS,
		Burst:       o.Burst,
		UserAgent:   o.UserAgent,
	}
	cfg.CAData = spec.CABundle

	var proxy func(*http.Request) (*url.URL, error)
	if spec.ProxyURL != "" {
		p, err := url.Parse(spec.ProxyURL)
		if err != nil || p.Host == "" {
			return nil, fmt.Errorf("%w: %q", ErrInvalidProxyURL, spec.ProxyURL)
		}
		proxy = http.ProxyURL(p)
	}

	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	switch {
	case skip.all:
		// client-go refuses a CA together with Insecure.
		cfg.CAData = nil
		cfg.Insecure = true
	case skip.subjectName || skip.validityPeriod:
		// client-go cannot relax single checks: bring our own transport that
		// verifies the chain itself. The bearer token is still added by
		// client-go's wrappers around it.
		cfg.CAData = nil
		cfg.Transport = &http.Transport{
			Proxy:               proxy,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     relaxedTLS(spec.CABundle, u.Hostname(), skip),
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
			IdleConnTimeout:     90 * time.Second,
		}
		return cfg, nil
	}
	cfg.Proxy = proxy
	cfg.Dial = dialer.DialContext
	return cfg, nil
}

type tlsSkips struct{ all, subjectName, validityPeriod bool }

func disabledValidations(v []kubefedv1beta1.TLSValidation) (tlsSkips, error) {
	var s tlsSkips
	for _, x := range v {
		switch x {
		case kubefedv1beta1.TLSAll:
			s.all = true
		case kubefedv1beta1.TLSSubjectName:
			s.subjectName = true
		case kubefedv1beta1.TLSValidityPeriod:
			s.validityPeriod = true
		default:
			return s, fmt.Errorf("%w: %q", ErrUnknownTLSOption, x)
		}
	}
	return s, nil
}

// relaxedTLS verifies the server chain against caBundle (or the system roots)
// while skipping the checks the KubeFedCluster disabled.
func relaxedTLS(caBundle []byte, host string, skip tlsSkips) *tls.Config {
	var roots *x509.CertPool
	if len(caBundle) > 0 {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(caBundle)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification happens in VerifyConnection below.
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			leaf := cs.PeerCertificates[0]
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if !skip.subjectName {
				opts.DNSName = host
			}
			if skip.validityPeriod {
				opts.CurrentTime = leaf.NotBefore.Add(time.Second)
			}
			_, err := leaf.Verify(opts)
			return err
		},
	}
}

// CredentialsSecret is the name of the Secret, in the KubeFedCluster's
// namespace, whose token fedfailover uses for the member: the one the
// annotation failover.fedfailover.io/credentials-secret names (own is
// true), else kubefed's spec.secretRef. The annotation holds a bare name:
// anything else is refused, never followed into another namespace. The
// endpoint, CA, TLS options and proxy stay the KubeFedCluster's either way.
func CredentialsSecret(kfc *kubefedv1beta1.KubeFedCluster) (name string, own bool, err error) {
	v, ok := kfc.Annotations[contract.AnnotationCredentialsSecret]
	if !ok {
		if kfc.Spec.SecretRef.Name == "" {
			return "", false, ErrNoSecretRef
		}
		return kfc.Spec.SecretRef.Name, false, nil
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", true, fmt.Errorf("%w: %q: %s", ErrInvalidCredentialsRef, v, errs[0])
	}
	return v, true, nil
}

// CheckCredentialsSecret refuses a Secret named by the credentials-secret
// annotation unless it is labelled failover.fedfailover.io/credentials-for
// with the KubeFedCluster's name: whoever writes Secrets in the kubefed
// namespace says which member a token is for, so that whoever may only
// annotate a KubeFedCluster cannot send another member's token (kubefed's
// own Secrets carry no such label) to this member's endpoint.
func CheckCredentialsSecret(kfc *kubefedv1beta1.KubeFedCluster, secret *corev1.Secret) error {
	if got := secret.Labels[contract.LabelCredentialsFor]; got != kfc.Name {
		return fmt.Errorf("secret %s/%s (label %q): %w", secret.Namespace, secret.Name, got, ErrCredentialsNotForMember)
	}
	return nil
}

// Fingerprint identifies everything a connection was built from, so a change
// of endpoint, CA, TLS options, proxy or token (credential rotation) can be
// noticed. It is a hash: the token cannot be recovered from it.
func Fingerprint(kfc *kubefedv1beta1.KubeFedCluster, secret *corev1.Secret) string {
	h := sha256.New()
	write := func(b []byte) {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	write([]byte(kfc.Spec.APIEndpoint))
	write(kfc.Spec.CABundle)
	write([]byte(kfc.Spec.ProxyURL))
	tlsOpts := make([]string, 0, len(kfc.Spec.DisabledTLSValidations))
	for _, v := range kfc.Spec.DisabledTLSValidations {
		tlsOpts = append(tlsOpts, string(v))
	}
	slices.Sort(tlsOpts)
	for _, v := range tlsOpts {
		write([]byte(v))
	}
	if secret != nil {
		write([]byte(secret.Name))
		write(secret.Data[TokenKey])
	}
	return hex.EncodeToString(h.Sum(nil))
}
