package main

// The image `make image` builds has no CA bundle of its own (an empty base,
// no /etc/ssl). The host's CA comes from the ServiceAccount and members'
// from their KubeFedCluster caBundle, but a member whose endpoint has a
// publicly trusted certificate and an empty caBundle is verified against
// the system roots: these Mozilla roots stand in for them when the system
// has none (and are ignored when it has, e.g. on distroless).
import _ "golang.org/x/crypto/x509roots/fallback"
