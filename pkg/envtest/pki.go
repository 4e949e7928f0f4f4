package envtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// pki is what the API server and its admin client authenticate with: a
// CA, the server's certificate, an admin client certificate and the key
// ServiceAccount tokens are signed with. Files are paths in the
// environment's directory.
type pki struct {
	caCert, servingCert, servingKey, serviceAccountKey string
	caPEM, adminCertPEM, adminKeyPEM                   []byte
}

// writePKI makes a new CA and the certificates and keys signed by it,
// valid for a day, and writes what the API server reads to dir.
func writePKI(dir string) (pki, error) {
	var p pki
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, fmt.Errorf("envtest: %w", err)
	}
	ca := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "envtest-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return p, fmt.Errorf("envtest: %w", err)
	}
	p.caPEM = pemOf("CERTIFICATE", caDER)

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	servingCert, servingKey, err := issue(serving, ca, caKey)
	if err != nil {
		return p, err
	}
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "envtest-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if p.adminCertPEM, p.adminKeyPEM, err = issue(admin, ca, caKey); err != nil {
		return p, err
	}
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return p, fmt.Errorf("envtest: %w", err)
	}

	files := []struct {
		path *string
		name string
		data []byte
	}{
		{&p.caCert, "ca.crt", p.caPEM},
		{&p.servingCert, "apiserver.crt", servingCert},
		{&p.servingKey, "apiserver.key", servingKey},
		{&p.serviceAccountKey, "sa.key", saKey},
	}
	for _, f := range files {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return p, fmt.Errorf("envtest: %w", err)
		}
	}
	return p, nil
}

// issue makes a key and a certificate of it from template, signed by ca;
// it returns both as PEM.
func issue(template, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("envtest: %w", err)
	}
	der, err := sign(template, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("envtest: %w", err)
	}
	return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", keyDER), nil
}

// sign signs template, valid from an hour ago for a day, with a random
// serial number.
func sign(template, parent *x509.Certificate, pub *ecdsa.PublicKey, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, parentKey)
	if err != nil {
		return nil, fmt.Errorf("envtest: signing a certificate: %w", err)
	}
	return der, nil
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
