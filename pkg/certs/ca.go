package certs

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"
)

// covers reports whether c is valid for every name in h (it may hold more).
func (h hosts) covers(c *x509.Certificate) bool {
	for _, n := range h.dnsNames {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	for _, ip := range h.ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// newCA returns a new self-signed CA valid for validity from now. Its path
// length is 0: it signs serving certificates, never another CA.
func newCA(cn string, now time.Time, validity time.Duration) (*keyPair, error) {
	tmpl, err := template(cn, now, validity)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.MaxPathLen, tmpl.MaxPathLenZero = true, 0, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, nil)
}

// newServing returns a serving certificate for h signed by ca, valid for
// validity from now but never beyond ca's own expiry.
func newServing(ca *keyPair, h hosts, now time.Time, validity time.Duration) (*keyPair, error) {
	tmpl, err := template(servingCN(h), now, validity)
	if err != nil {
		return nil, err
	}
	tmpl.NotAfter = minTime(tmpl.NotAfter, ca.cert.NotAfter)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames, tmpl.IPAddresses = h.dnsNames, h.ips
	return sign(tmpl, ca)
}

// parseKeyPair parses a PEM certificate (the first one when it is a chain)
// and its PEM private key, and checks that they belong together.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := tc.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", tc.PrivateKey)
	}
	if tc.Leaf == nil { // only with GODEBUG=x509keypairleaf=0
		if tc.Leaf, err = x509.ParseCertificate(tc.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &keyPair{cert: tc.Leaf, key: signer, certPEM: certPEM, keyPEM: keyPEM, tls: &tc}, nil
}

// parseCerts parses every CERTIFICATE block of a PEM bundle.
func parseCerts(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// encodeCerts returns certs as a PEM bundle.
func encodeCerts(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // writes to a bytes.Buffer do not fail
	}
	return b.Bytes()
}

// bundleHas reports whether the PEM bundle holds c.
func bundleHas(bundle []byte, c *x509.Certificate) bool {
	certs, err := parseCerts(bundle)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(certs, c.Equal)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
