package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/memberconfig"
)

// ErrNotConnected is matched (errors.Is) by every error returned for a member
// that has no healthy connection right now. Callers should not retry-loop on
// it: subscribe to EventSource and get a request when the member connects.
var ErrNotConnected = errors.New("member cluster not connected")

// NotConnectedError says why a member is not connected.
type NotConnectedError struct {
	Cluster string
	Reason  string
}

func (e *NotConnectedError) Error() string {
	return fmt.Sprintf("member cluster %q not connected: %s", e.Cluster, e.Reason)
}

// Is makes errors.Is(err, ErrNotConnected) true.
func (e *NotConnectedError) Is(target error) bool { return target == ErrNotConnected }

// Reasons for a member's connection state, used in status, events and the
// disconnects metric.
const (
	ReasonConnected       = "Connected"
	ReasonSyncing         = "Syncing"
	ReasonPending         = "Pending"
	ReasonUnjoined        = "Unjoined"
	ReasonSecretNotFound  = "SecretNotFound"
	ReasonSecretInvalid   = "SecretInvalid"
	ReasonConfigInvalid   = "ConfigInvalid"
	ReasonUnauthorized    = "Unauthorized"
	ReasonForbidden       = "Forbidden"
	ReasonTLSError        = "TLSError"
	ReasonUnreachable     = "Unreachable"
	ReasonTimeout         = "Timeout"
	ReasonCacheSyncFailed = "CacheSyncFailed"
	ReasonProbeFailed     = "ProbeFailed"
	// ReasonStaleCache: the member answers its probes again after an
	// outage that broke its cache's watches; the cache is rebuilt (the
	// member syncs again, unknown until synced) instead of being read
	// while its informers catch up.
	ReasonStaleCache         = "StaleCache"
	ReasonCredentialsChanged = "CredentialsChanged"
	ReasonConnectFailed      = "ConnectFailed"
	// ReasonMemberPermissionDenied: the member refused (403) requests
	// fedfailover made with its credentials; the message names each
	// permission (verb, resource, namespace). The member stays connected
	// if it was: what needs the permission fails until it is granted.
	ReasonMemberPermissionDenied = v1alpha1.ReasonMemberPermissionDenied
)

// reasonFor classifies a connection or probe error.
func reasonFor(err error) string {
	var (
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		certInvalid x509.CertificateInvalidError
		tlsVerify   *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
		netErr      net.Error
		opErr       *net.OpError
	)
	switch {
	case errors.Is(err, memberconfig.ErrMissingToken), errors.Is(err, memberconfig.ErrCredentialsNotForMember):
		return ReasonSecretInvalid
	case errors.Is(err, memberconfig.ErrNoEndpoint), errors.Is(err, memberconfig.ErrInvalidEndpoint),
		errors.Is(err, memberconfig.ErrInvalidCABundle), errors.Is(err, memberconfig.ErrInvalidProxyURL),
		errors.Is(err, memberconfig.ErrNoSecretRef), errors.Is(err, memberconfig.ErrUnknownTLSOption),
		errors.Is(err, memberconfig.ErrInsecureEndpoint), errors.Is(err, memberconfig.ErrInvalidCredentialsRef):
		return ReasonConfigInvalid
	case apierrors.IsUnauthorized(err):
		return ReasonUnauthorized
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &certInvalid),
		errors.As(err, &tlsVerify), errors.As(err, &recordErr),
		strings.Contains(err.Error(), "x509:"), strings.Contains(err.Error(), "tls:"):
		return ReasonTLSError
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case errors.As(err, &opErr), strings.Contains(err.Error(), "connection refused"),
		strings.Contains(err.Error(), "no such host"):
		return ReasonUnreachable
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return ReasonTimeout
	}
	return ReasonConnectFailed
}

// disconnectNow is true for errors that make further probes pointless: the
// credentials are no longer accepted.
func disconnectNow(reason string) bool {
	return reason == ReasonUnauthorized || reason == ReasonForbidden
}

// redact removes secret from s. Error texts from client-go do not carry the
// token, but a message we surface must never do so whatever its origin.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[REDACTED]")
}
