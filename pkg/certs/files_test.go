package certs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
)

func TestFilesReload(t *testing.T) {
	dir := t.TempDir()
	certA, keyA := pemPair(t, "a.example.com")
	certFile := writeFile(t, dir, "tls.crt", certA)
	keyFile := writeFile(t, dir, "tls.key", keyA)
	clk := clocktesting.NewFakeClock(time.Now())
	log, lines := newLog(t)
	f, err := certs.NewFiles(certs.FilesOptions{CertFile: certFile, KeyFile: keyFile, Interval: time.Second, Logger: log, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if cn := served(t, f.GetCertificate).Subject.CommonName; cn != "a.example.com" {
		t.Fatalf("serving %q, want a.example.com", cn)
	}
	runStart(t, f.Start)
	// poll runs one round of Start's loop and waits until it is waiting again.
	poll := func() {
		eventually(t, clk.HasWaiters, "Start to wait for the next poll")
		clk.Step(time.Second)
		eventually(t, clk.HasWaiters, "Start to finish the poll")
	}

	certB, keyB := pemPair(t, "b.example.com")
	writeFile(t, dir, "tls.crt", certB)
	poll() // half-written: the new certificate with the old key
	if lines.count("not a valid pair") != 1 {
		t.Errorf("a mismatched pair was not logged once")
	}
	if cn := served(t, f.GetCertificate).Subject.CommonName; cn != "a.example.com" {
		t.Fatalf("serving %q after a mismatched pair was written, want the previous a.example.com", cn)
	}
	poll() // the same mismatch is not logged again
	if n := lines.count("not a valid pair"); n != 1 {
		t.Errorf("the same mismatched pair was logged %d times, want once", n)
	}

	writeFile(t, dir, "tls.key", keyB)
	poll()
	if cn := served(t, f.GetCertificate).Subject.CommonName; cn != "b.example.com" {
		t.Fatalf("serving %q after both files changed, want b.example.com", cn)
	}
	if n := lines.count("reloaded the certificate"); n != 1 {
		t.Errorf("logged %d reloads, want 1", n)
	}

	writeFile(t, dir, "tls.crt", []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"))
	poll()
	if cn := served(t, f.GetCertificate).Subject.CommonName; cn != "b.example.com" {
		t.Fatalf("serving %q after the certificate file was corrupted, want the previous b.example.com", cn)
	}
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	poll()
	if cn := served(t, f.GetCertificate).Subject.CommonName; cn != "b.example.com" {
		t.Fatalf("serving %q after the certificate file was removed, want the previous b.example.com", cn)
	}
	if n := lines.count("not a valid pair"); n != 3 {
		t.Errorf("logged %d rejected changes, want 3 (mismatch, garbage, missing)", n)
	}
}

func TestFilesInvalid(t *testing.T) {
	dir := t.TempDir()
	certA, keyA := pemPair(t, "a.example.com")
	_, keyB := pemPair(t, "b.example.com")
	certFile := writeFile(t, dir, "tls.crt", certA)
	keyFile := writeFile(t, dir, "tls.key", keyA)
	otherKey := writeFile(t, dir, "other.key", keyB)
	missing := filepath.Join(dir, "missing.crt")
	for _, tt := range []struct {
		name string
		opts certs.FilesOptions
		want string
	}{
		{"no paths", certs.FilesOptions{}, "certs: FilesOptions.CertFile and KeyFile are both required"},
		{"missing", certs.FilesOptions{CertFile: missing, KeyFile: keyFile}, "certs: reading the certificate: open " + missing},
		{"mismatch", certs.FilesOptions{CertFile: certFile, KeyFile: otherKey}, "are not a valid certificate and key: tls: private key does not match public key"},
		{"negative interval", certs.FilesOptions{CertFile: certFile, KeyFile: keyFile, Interval: -time.Second}, "certs: FilesOptions.Interval (-1s) must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certs.NewFiles(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewFiles: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
