package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any lab session and short enough that a
// leaked lab key is worthless soon.
const certValidity = 7 * 24 * time.Hour

// KeyPair is a PEM-encoded certificate and private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
	cert    *x509.Certificate
	key     crypto.Signer
}

// ClusterPKI is everything one lab cluster needs: a CA, the API server's
// serving certificate, an admin client certificate (system:masters) and the
// service-account signing key.
type ClusterPKI struct {
	CA      KeyPair
	Serving KeyPair
	Admin   KeyPair
	// SAKeyPEM is the RSA private key that signs service-account tokens;
	// SAPubPEM its public half, which the API server verifies tokens with.
	SAKeyPEM []byte
	SAPubPEM []byte
}

// NewClusterPKI generates a fresh PKI for a cluster called name.
func NewClusterPKI(name string) (*ClusterPKI, error) {
	ca, err := newCA(name + "-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	admin, err := ca.issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "lab-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	return &ClusterPKI{
		CA:       *ca,
		Serving:  *serving,
		Admin:    *admin,
		SAKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		SAPubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}, nil
}

func newCA(cn string) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return encodePair(der, key)
}

func (ca *KeyPair) issue(tmpl x509.Certificate) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return encodePair(der, key)
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (*KeyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
		key:     key,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial is still valid.
		return big.NewInt(1)
	}
	return n
}

// PKI file names inside a cluster's directory.
const (
	fileCA          = "ca.crt"
	fileCAKey       = "ca.key"
	fileServingCert = "apiserver.crt"
	fileServingKey  = "apiserver.key"
	fileAdminCert   = "admin.crt"
	fileAdminKey    = "admin.key"
	fileSAKey       = "sa.key"
	fileSAPub       = "sa.pub"
)

// Write stores the PKI as PEM files in dir (0600).
func (p *ClusterPKI) Write(dir string) error {
	files := map[string][]byte{
		fileCA:          p.CA.CertPEM,
		fileCAKey:       p.CA.KeyPEM,
		fileServingCert: p.Serving.CertPEM,
		fileServingKey:  p.Serving.KeyPEM,
		fileAdminCert:   p.Admin.CertPEM,
		fileAdminKey:    p.Admin.KeyPEM,
		fileSAKey:       p.SAKeyPEM,
		fileSAPub:       p.SAPubPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
