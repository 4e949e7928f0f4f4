package certs_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// waitTimeout bounds waits for something that normally takes milliseconds.
const waitTimeout = 10 * time.Second

// eventually polls cond until it returns true, and fails the test if it has
// not within waitTimeout. what names the condition in the failure.
func eventually(t testing.TB, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, fmt.Sprintf(what, args...))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// logSink is a logger that keeps its lines for the test to look at, and
// writes them to t.Log.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func newLog(t testing.TB) (logr.Logger, *logSink) {
	s := &logSink{}
	var ended bool
	t.Cleanup(func() {
		s.mu.Lock()
		ended = true
		s.mu.Unlock()
	})
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
		if !ended {
			t.Log(prefix, args)
		}
	}, funcr.Options{}), s
}

// count returns how many lines contain substr.
func (s *logSink) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// runStart runs start on a goroutine until the test ends or the returned
// stop is called, and requires it to return nil then.
func runStart(t testing.TB, start func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start returned %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// served returns the leaf certificate a GetCertificate function serves.
func served(t testing.TB, get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *x509.Certificate {
	t.Helper()
	c, err := get(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatalf("parsing the served certificate: %v", err)
	}
	return leaf
}

// pemPair returns a new self-signed certificate for cn and its key, in PEM.
func pemPair(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// verify checks that leaf is valid for host at now against the PEM roots.
func verify(leaf *x509.Certificate, roots []byte, host string, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		return fmt.Errorf("no certificate in the roots")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now})
	return err
}
