// Package serve holds what the servers ctrlkit starts share.
package serve

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// TLSConfig is a server's TLS configuration: TLS 1.2 or later, with
// get's certificate, then edited by edit (when set). It fails if edit
// lowered the version or removed the certificate.
func TLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error), edit func(*tls.Config)) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get}
	if edit == nil {
		return c, nil
	}
	edit(c)
	switch {
	case c.MinVersion < tls.VersionTLS12:
		return nil, fmt.Errorf("it set MinVersion to %s: TLS 1.0 and 1.1 are refused; use tls.VersionTLS12 or tls.VersionTLS13", tls.VersionName(c.MinVersion))
	case c.GetCertificate == nil && len(c.Certificates) == 0:
		return nil, errors.New("it removed GetCertificate: leave it, the server's certificate comes from it")
	}
	return c, nil
}
