package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// keyPair is a certificate with its private key, parsed and PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
	tls     *tls.Certificate // the same, for a TLS handshake
}

// hosts are the names a serving certificate is valid for.
type hosts struct {
	dnsNames []string
	ips      []net.IP
}

// backdate is how far before its creation a certificate becomes valid, so
// that a peer whose clock is a little behind accepts it: a tenth of its
// validity, at most five minutes.
func backdate(validity time.Duration) time.Duration {
	return min(validity/10, 5*time.Minute)
}

// template returns a certificate template valid from now (backdated) for
// validity, with a random serial number.
func template(cn string, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: generating a serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate(validity)).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		BasicConstraintsValid: true,
	}, nil
}

// newSelfSigned returns a self-signed serving certificate for h. It is not
// a CA, so it can sign nothing; a client trusts it by putting it in its
// root pool (Go's verifier, like most, accepts a root pool's certificate
// as the whole chain).
func newSelfSigned(h hosts, now time.Time, validity time.Duration) (*keyPair, error) {
	tmpl, err := template(servingCN(h), now, validity)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames, tmpl.IPAddresses = h.dnsNames, h.ips
	return sign(tmpl, nil)
}

// servingCN is the common name of a serving certificate: its first name.
// Clients match the SANs; the common name only helps people reading it.
func servingCN(h hosts) string {
	if len(h.dnsNames) > 0 {
		return h.dnsNames[0]
	}
	if len(h.ips) > 0 {
		return h.ips[0].String()
	}
	return "ctrlkit"
}

// sign creates a certificate from tmpl with a new ECDSA P-256 key, signed by
// parent, or self-signed when parent is nil.
func sign(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generating a key: %w", err)
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("certs: signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parsing the certificate just signed: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encoding a key: %w", err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		tls:     &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}, nil
}

// tlsCertificate returns k as a tls.Certificate whose chain is k alone.
// It is shared: callers must not modify it.
func (k *keyPair) tlsCertificate() *tls.Certificate { return k.tls }
