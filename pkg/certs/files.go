package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// FilesOptions configure NewFiles.
type FilesOptions struct {
	// CertFile and KeyFile are the paths of the PEM certificate (the
	// serving certificate first, then any intermediates) and its PEM
	// private key, as cert-manager writes them into a Secret that is
	// mounted into the Pod (tls.crt and tls.key). Required.
	CertFile, KeyFile string
	// Interval is how often Start reads the files to see if they changed.
	// Zero means 5s. (Kubernetes updates a mounted Secret about a minute
	// after it changes.)
	Interval time.Duration
	// Logger receives a line for each reload and each rejected change.
	// Zero means the logger in Start's ctx (logr.FromContext; a manager
	// puts its own there), or none.
	Logger logr.Logger
	// Clock tells the time. Nil means the real clock.
	Clock clock.WithTicker
}

// Files serves a certificate read from files and reloads it when they
// change: Start reads both files every Interval, and when either changed
// and the pair is valid it swaps the served certificate at once. A pair
// that is not valid (a file half-written, a key that does not match the
// certificate) is logged and the previous certificate is kept; the next
// change is tried again.
//
// GetCertificate is safe for concurrent use and never blocks.
type Files struct {
	opts    FilesOptions
	current atomic.Pointer[tls.Certificate]

	// Owned by Start.
	certPEM, keyPEM []byte // the contents of the pair being served
	rejected        string // the last rejected pair and its error, logged once
}

// NewFiles reads and checks the certificate and key files; it fails if
// either is missing or they are not a valid pair.
func NewFiles(opts FilesOptions) (*Files, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("certs: FilesOptions.CertFile and KeyFile are both required: set them to the paths of the mounted tls.crt and tls.key")
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("certs: FilesOptions.Interval (%v) must not be negative: leave it zero for 5s", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	f := &Files{opts: opts}
	certPEM, keyPEM, err := f.read()
	if err != nil {
		return nil, err
	}
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: %s and %s are not a valid certificate and key: %w", opts.CertFile, opts.KeyFile, err)
	}
	f.certPEM, f.keyPEM = certPEM, keyPEM
	f.current.Store(&tc)
	return f, nil
}

// read returns the contents of both files.
func (f *Files) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(f.opts.CertFile); err != nil {
		return nil, nil, fmt.Errorf("certs: reading the certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(f.opts.KeyFile); err != nil {
		return nil, nil, fmt.Errorf("certs: reading the key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// GetCertificate returns the current certificate; it fits
// tls.Config.GetCertificate.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.current.Load(), nil
}

// Start reloads the files when they change, until ctx is done; then it
// returns nil. Call it once. It runs on the caller's goroutine and starts
// none.
func (f *Files) Start(ctx context.Context) error {
	log := f.opts.Logger
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithName("certs").WithValues("certFile", f.opts.CertFile, "keyFile", f.opts.KeyFile)
	for sleep(ctx, f.opts.Clock, f.opts.Interval) {
		f.reload(log)
	}
	return nil
}

// reload serves the files' pair if it changed and is valid.
func (f *Files) reload(log logr.Logger) {
	certPEM, keyPEM, err := f.read()
	if err == nil && bytes.Equal(certPEM, f.certPEM) && bytes.Equal(keyPEM, f.keyPEM) {
		return
	}
	var tc tls.Certificate
	if err == nil {
		tc, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		seen := string(certPEM) + "\x00" + string(keyPEM) + "\x00" + err.Error()
		if seen != f.rejected {
			log.Error(err, "the certificate files changed but are not a valid pair; still serving the previous certificate")
			f.rejected = seen
		}
		return
	}
	f.certPEM, f.keyPEM, f.rejected = certPEM, keyPEM, ""
	f.current.Store(&tc)
	if tc.Leaf != nil { // nil only with GODEBUG=x509keypairleaf=0
		log.Info("reloaded the certificate", "notAfter", tc.Leaf.NotAfter)
	} else {
		log.Info("reloaded the certificate")
	}
}
