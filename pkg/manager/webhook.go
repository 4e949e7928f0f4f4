package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"

	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// WebhookOptions configures the manager's webhook server (see
// Options.Webhook and Manager.Webhooks).
//
// Run starts the server and its certificate source first thing, before the
// caches sync, and on every replica, leader or not: the API server calls
// whichever replica its Service picks, and may need the operator's own
// conversion webhook to answer the lists the caches wait for. /readyz
// fails until the server listens and has a certificate (webhook.Server's
// Ready), and while the source says it is not ready (see Certificate).
// They serve until the controllers, Runnables and informers have stopped,
// as those may write objects that go through the webhooks on their way
// out.
type WebhookOptions struct {
	// Addr is where the webhook server listens, e.g. ":9443" or
	// "127.0.0.1:0". Empty means webhook.DefaultAddr (":9443").
	Addr string
	// Certificate is the serving certificate's source; required. Package
	// certs has one that keeps a CA and certificate in a Secret the
	// replicas share and keeps the webhook configurations' caBundles
	// current, and one that reads a certificate mounted from a Secret
	// (cert-manager). Run starts it with the server and stops it after
	// the server: do not also Add it. An error from its Start stops Run.
	// If it has a method Ready() error, /readyz also fails while that
	// returns an error (package certs's shared source does until the
	// webhook configurations' caBundles trust its certificate).
	Certificate CertificateSource
	// HTTP2 lets the API server speak HTTP/2 to the webhooks. Off by
	// default, as on every server the manager starts, against HTTP/2
	// rapid reset (CVE-2023-44487).
	HTTP2 bool
	// TLS, when set, edits the webhook server's TLS configuration (see
	// webhook.Options.TLS).
	TLS func(*tls.Config)
}

// validateWebhook checks o.Webhook, in a copy with Addr filled in: the
// caller's struct is left alone.
func validateWebhook(o *Options) []error {
	if o.Webhook == nil {
		return nil
	}
	wo := *o.Webhook
	o.Webhook = &wo
	var errs []error
	if wo.Addr == "" {
		wo.Addr = webhook.DefaultAddr
	}
	if _, _, err := net.SplitHostPort(wo.Addr); err != nil {
		errs = append(errs, fmt.Errorf("manager: Options.Webhook.Addr is %q: use host:port such as \":9443\" or \"127.0.0.1:0\", or empty for %q", wo.Addr, webhook.DefaultAddr))
	}
	for _, other := range []struct{ field, addr string }{
		{"HTTPAddr", o.HTTPAddr},
		{"SecureMetrics.Addr", secureMetricsAddr(o)},
	} {
		if sharePort(wo.Addr, other.addr) {
			errs = append(errs, fmt.Errorf("manager: Options.Webhook.Addr %q and Options.%s %q share a port: serve them apart, e.g. webhooks on %q", wo.Addr, other.field, other.addr, webhook.DefaultAddr))
		}
	}
	if isNilSource(wo.Certificate) {
		errs = append(errs, errors.New("manager: Options.Webhook.Certificate is nil: pass a certificate source, such as package certs's (a certificate the replicas share through a Secret, or one mounted by cert-manager)"))
	}
	return errs
}

// secureMetricsAddr is where secure metrics are served, or "".
func secureMetricsAddr(o *Options) string {
	if o.SecureMetrics == nil {
		return ""
	}
	return cmp.Or(o.SecureMetrics.Addr, DefaultSecureMetricsAddr)
}

// sharePort reports whether listening on a and on b would clash: the same
// port, not 0, on the same host or on every interface.
func sharePort(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && portA == portB && portA != "0" &&
		(hostA == hostB || anyHost(hostA) || anyHost(hostB))
}

// isNilSource reports whether c is nil or a nil pointer, which would
// otherwise fail only at the first handshake.
func isNilSource(c CertificateSource) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// newWebhookServer builds the server Options.Webhook configures, its
// metrics on the manager's registry. opts.Webhook has been validated.
func (m *Manager) newWebhookServer() error {
	wo := m.opts.Webhook
	if wo == nil {
		return nil
	}
	srv, err := webhook.NewServer(webhook.Options{
		Addr:           wo.Addr,
		GetCertificate: wo.Certificate.GetCertificate,
		HTTP2:          wo.HTTP2,
		Limits:         m.opts.ServerLimits,
		TLS:            wo.TLS,
		Registry:       m.registry,
		Logger:         m.log.WithValues("server", "webhook"),
	})
	if err != nil {
		return fmt.Errorf("manager: Options.Webhook: %w", err)
	}
	m.webhooks = srv
	return nil
}

// webhooksReady says why the webhooks are not ready to serve (see
// WebhookOptions), or returns nil; nil without Options.Webhook.
func (m *Manager) webhooksReady() error {
	if m.webhooks == nil {
		return nil
	}
	if err := m.webhooks.Ready(); err != nil {
		return err
	}
	if r, ok := m.opts.Webhook.Certificate.(interface{ Ready() error }); ok {
		if err := r.Ready(); err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
	}
	return nil
}

// Webhooks is the webhook server, where the handlers of package webhook
// (webhook.NewValidating, NewDefaulting, NewConversion) are registered at
// the paths of the webhook configurations, before or while Run runs. It is
// nil without Options.Webhook; Register on it then fails saying so.
func (m *Manager) Webhooks() *webhook.Server { return m.webhooks }

// serveWebhooks starts the webhook server and its certificate source on a
// context of their own, which Run's ending does not cancel: they serve
// until the returned stop is called. An error from either ends Run's ctx
// through fail; stop cancels them, waits for them to return (the server
// drains requests in flight for up to 10 seconds) and returns their
// errors.
func (m *Manager) serveWebhooks(ctx context.Context, fail context.CancelCauseFunc) (stop func() error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, r := range []struct {
		name  string
		start func(context.Context) error
	}{
		{"webhook server", m.webhooks.Start},
		{"webhook certificate source", m.opts.Webhook.Certificate.Start},
	} {
		wg.Go(func() {
			err := r.start(wctx)
			if err == nil || wctx.Err() != nil && errors.Is(err, context.Canceled) {
				return
			}
			err = fmt.Errorf("manager: %s: %w", r.name, err)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			fail(err)
		})
	}
	return func() error {
		cancel()
		wg.Wait()
		return errors.Join(errs...)
	}
}
