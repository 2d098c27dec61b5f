// Package mgmtconfig builds the REST config of a Cluster API management
// cluster from the kubeconfig a Secret holds (the Secret that a
// KubeFedCluster's failover.fedfailover.io/capi-management-cluster
// annotation names). It is pure: no clients, no I/O.
//
// The kubeconfig comes from a Secret, not from the manager's own disk, so
// nothing in it may make the manager run a program or read its own files:
// exec and auth-provider plugins, and every file path (token, client
// certificate and key, certificate authority), are refused. Otherwise a
// writer of that Secret could make the manager run a command, or send its
// own service account token (a file in its pod) to a server of their
// choice.
package mgmtconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Errors RESTConfig wraps. None of them quotes the kubeconfig.
var (
	ErrInvalid  = errors.New("the Secret's kubeconfig cannot be parsed (details withheld: they could quote the Secret)")
	ErrContext  = errors.New("the kubeconfig has no usable current context")
	ErrRefused  = errors.New("the kubeconfig uses a setting fedfailover refuses in a Secret")
	ErrInsecure = errors.New("the kubeconfig's server uses http:// or skips TLS verification, which sends its credentials in clear or to anyone (allow it with --allow-insecure-member-endpoints)")
)

// Options tune the connection; zero values take client-go's defaults.
type Options struct {
	QPS       float32
	Burst     int
	UserAgent string
	// Timeout bounds every request.
	Timeout time.Duration
	// AllowInsecure accepts http:// servers and insecure-skip-tls-verify
	// (tests and labs only; the manager's --allow-insecure-member-endpoints).
	AllowInsecure bool
}

// Hash identifies a kubeconfig's content: a new hash is a new connection.
func Hash(kubeconfig []byte) string {
	h := sha256.Sum256(kubeconfig)
	return hex.EncodeToString(h[:8])
}

// RESTConfig returns the config of the kubeconfig's current context (its
// only context when none is current). Errors never contain the
// kubeconfig's content.
func RESTConfig(kubeconfig []byte, o Options) (*rest.Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, ErrInvalid
	}
	ctxName := raw.CurrentContext
	if ctxName == "" && len(raw.Contexts) == 1 {
		for name := range raw.Contexts {
			ctxName = name
		}
	}
	kctx := raw.Contexts[ctxName]
	if kctx == nil {
		return nil, fmt.Errorf("%w: current-context %q is not one of its %d contexts", ErrContext, ctxName, len(raw.Contexts))
	}
	cl, user := raw.Clusters[kctx.Cluster], raw.AuthInfos[kctx.AuthInfo]
	if cl == nil {
		return nil, fmt.Errorf("%w: context %q names cluster %q, which it does not define", ErrContext, ctxName, kctx.Cluster)
	}
	if user == nil {
		return nil, fmt.Errorf("%w: context %q names user %q, which it does not define", ErrContext, ctxName, kctx.AuthInfo)
	}
	if err := check(cl, user, o); err != nil {
		return nil, err
	}
	// Only the chosen context, so no other entry is ever used.
	only := clientcmdapi.NewConfig()
	only.Clusters[kctx.Cluster] = cl
	only.AuthInfos[kctx.AuthInfo] = user
	only.Contexts[ctxName] = kctx
	only.CurrentContext = ctxName
	cfg, err := clientcmd.NewDefaultClientConfig(*only, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w (context %q)", ErrInvalid, ctxName)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent, cfg.Timeout = o.QPS, o.Burst, o.UserAgent, o.Timeout
	return cfg, nil
}

// check refuses what a kubeconfig in a Secret must not do.
func check(cl *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo, o Options) error {
	refuse := func(what string) error { return fmt.Errorf("%w: %s", ErrRefused, what) }
	switch {
	case user.Exec != nil:
		return refuse("an exec credential plugin (it would run a program in the manager)")
	case user.AuthProvider != nil:
		return refuse("an auth-provider plugin")
	case user.TokenFile != "":
		return refuse("tokenFile (a file of the manager's; put the token itself in the kubeconfig)")
	case user.ClientCertificate != "" || user.ClientKey != "":
		return refuse("client-certificate or client-key files (use client-certificate-data and client-key-data)")
	case cl.CertificateAuthority != "":
		return refuse("a certificate-authority file (use certificate-authority-data)")
	case user.Token == "" && len(user.ClientCertificateData) == 0 && user.Username == "":
		return refuse("no credentials: a token, client-certificate-data and client-key-data, or a username and password are needed")
	}
	u, err := url.Parse(cl.Server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%w: the server is not an https URL", ErrInvalid)
	}
	if (u.Scheme == "http" || cl.InsecureSkipTLSVerify) && !o.AllowInsecure {
		return ErrInsecure
	}
	return nil
}
