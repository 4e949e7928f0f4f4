package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// SharedOptions configure NewShared. Namespace, SecretName and a name to
// serve (ServiceName, DNSNames or IPAddresses) are required; every other
// zero value means its documented default.
type SharedOptions struct {
	// Namespace is the namespace of the Secret and of the Service, usually
	// the operator's own.
	Namespace string
	// SecretName names the Secret that holds the CA and the serving
	// certificate for every replica. It is created if missing, with the
	// label SharedLabel. An existing Secret is written only if it is the
	// source's:
	//   - with SharedLabel, it is used, and filled in if it holds no
	//     usable certificates (a placeholder created with the label);
	//   - without the label's key, but holding the source's whole layout
	//     (see the package documentation) with keys and certificates that
	//     parse and match, as a Secret an earlier ctrlkit made does, it is
	//     labelled, with nothing else changed, and used;
	//   - any other Secret is never written: Ready reports it, naming it
	//     and what to do, until it is deleted or labelled, which the
	//     source sees without a restart.
	SecretName string
	// ServiceName is the webhook Service the API server calls; the serving
	// certificate is valid for <ServiceName>.<Namespace>.svc and
	// <ServiceName>.<Namespace>.svc.cluster.local.
	ServiceName string
	// DNSNames and IPAddresses are further names the serving certificate
	// is valid for (127.0.0.1 for a webhook called at a URL in tests).
	DNSNames    []string
	IPAddresses []net.IP
	// Inject names the webhook configurations and CRDs whose caBundle is
	// kept current.
	Inject Targets
	// CA is the lifetime of the CA. Zero Validity means ten years
	// (replaced with 3⅓ years left).
	CA Lifetime
	// Serving is the lifetime of the serving certificate. Zero Validity
	// means a year (replaced with four months left). A serving certificate
	// is never valid beyond the CA that signed it.
	Serving Lifetime
	// PublishDelay is how long every target must have held a new CA in its
	// caBundle before the serving certificate switches to that CA, so that
	// every API server has seen the new bundle. Zero means a minute.
	PublishDelay time.Duration
	// CheckInterval is how often Start re-reads the Secret and the
	// targets, restoring a caBundle that someone else overwrote. Zero
	// means 10s. Changes of the Secret are seen at once, through a watch.
	CheckInterval time.Duration
	// Logger receives a line for each change of the Secret and each
	// failure. Zero means the logger in Start's ctx (logr.FromContext; a
	// manager puts its own there), or none.
	Logger logr.Logger
	// Clock tells the time. Nil means the real clock.
	Clock clock.WithTicker
}

// Shared is a serving certificate signed by a CA that the operator makes
// and rotates itself, kept in a Secret that all its replicas share. See the
// package documentation for the Secret's layout, the rotation and the RBAC
// it needs.
//
// GetCertificate, CABundle and Ready are safe for concurrent use and never
// block; they report what Start last loaded.
type Shared struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	opts    SharedOptions
	hosts   hosts
	targets []target
	clock   clock.WithTicker

	started atomic.Bool
	current atomic.Pointer[snapshot]

	// Owned by Start's goroutine.
	nextSeen  *x509.Certificate // the new CA every target was seen to hold
	nextSince time.Time         // since when, continuously
	logged    map[string]string // the last failure logged per subject, to log each once
}

// snapshot is what Start last loaded; it is never modified.
type snapshot struct {
	cert   *tls.Certificate // nil until a certificate was loaded
	bundle []byte
	ready  error
}

// NewShared checks opts and returns a Shared source; it makes no request.
// kube reads and writes the Secret; dyn reads and patches the targets and
// may be nil if opts.Inject names none. Start loads the certificate.
func NewShared(kube kubernetes.Interface, dyn dynamic.Interface, opts SharedOptions) (*Shared, error) {
	if kube == nil {
		return nil, errors.New("certs: NewShared needs a clientset: pass kubernetes.NewForConfig(cfg)")
	}
	if opts.Namespace == "" {
		return nil, errors.New("certs: SharedOptions.Namespace is required: set it to the namespace of the Secret and the webhook Service, usually the operator's own")
	}
	if opts.SecretName == "" {
		return nil, errors.New("certs: SharedOptions.SecretName is required: name the Secret that keeps the certificates for all replicas, such as \"my-operator-webhook-cert\"")
	}
	if errs := validation.IsDNS1123Subdomain(opts.SecretName); len(errs) > 0 {
		return nil, fmt.Errorf("certs: SharedOptions.SecretName %q is not a valid Secret name: %s", opts.SecretName, strings.Join(errs, "; "))
	}
	dnsNames := opts.DNSNames
	if opts.ServiceName != "" {
		if errs := validation.IsDNS1035Label(opts.ServiceName); len(errs) > 0 {
			return nil, fmt.Errorf("certs: SharedOptions.ServiceName %q is not a valid Service name: %s", opts.ServiceName, strings.Join(errs, "; "))
		}
		svc := opts.ServiceName + "." + opts.Namespace + ".svc"
		dnsNames = append([]string{svc, svc + ".cluster.local"}, dnsNames...)
	}
	if len(dnsNames) == 0 && len(opts.IPAddresses) == 0 {
		return nil, errors.New("certs: SharedOptions needs ServiceName, DNSNames or IPAddresses: the serving certificate must name the host the API server calls, usually the webhook Service")
	}
	h, err := newHosts("SharedOptions", dnsNames, opts.IPAddresses)
	if err != nil {
		return nil, err
	}
	targets, err := opts.Inject.list()
	if err != nil {
		return nil, err
	}
	if len(targets) > 0 && dyn == nil {
		return nil, errors.New("certs: NewShared needs a dynamic client to keep the caBundle of SharedOptions.Inject's objects: pass dynamic.NewForConfig(cfg)")
	}
	opts.CA = opts.CA.withDefaults(10 * 365 * 24 * time.Hour)
	opts.Serving = opts.Serving.withDefaults(365 * 24 * time.Hour)
	if err := opts.CA.validate("SharedOptions.CA"); err != nil {
		return nil, err
	}
	if err := opts.Serving.validate("SharedOptions.Serving"); err != nil {
		return nil, err
	}
	if opts.PublishDelay < 0 || opts.CheckInterval < 0 {
		return nil, fmt.Errorf("certs: SharedOptions.PublishDelay (%v) and CheckInterval (%v) must not be negative: leave them zero for the defaults", opts.PublishDelay, opts.CheckInterval)
	}
	if opts.PublishDelay == 0 {
		opts.PublishDelay = time.Minute
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = 10 * time.Second
	}
	if opts.CA.RenewBefore <= opts.PublishDelay+opts.CheckInterval {
		return nil, fmt.Errorf("certs: SharedOptions.CA.RenewBefore (%v) must exceed PublishDelay + CheckInterval (%v), or the CA could expire before the serving certificate switches to the new one: raise CA.RenewBefore or lower the others", opts.CA.RenewBefore, opts.PublishDelay+opts.CheckInterval)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	s := &Shared{kube: kube, dyn: dyn, opts: opts, hosts: h, targets: targets, clock: opts.Clock, logged: map[string]string{}}
	s.current.Store(&snapshot{ready: fmt.Errorf("certs: no serving certificate yet: Start has not loaded the Secret %s/%s", opts.Namespace, opts.SecretName)})
	return s, nil
}

// GetCertificate returns the serving certificate; it fits
// tls.Config.GetCertificate. It fails until Start has loaded one.
func (s *Shared) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	snap := s.current.Load()
	if snap.cert == nil {
		return nil, snap.ready
	}
	return snap.cert, nil
}

// CABundle returns the CA bundle in PEM, for callers that write the
// caBundle of their webhook configurations themselves; nil until Start has
// loaded the Secret. It changes during a CA rotation (see the package
// documentation): a caller that copies it must copy it again when it
// changes, within PublishDelay.
func (s *Shared) CABundle() []byte {
	return s.current.Load().bundle
}

// Ready returns nil once this replica serves a certificate that the API
// server trusts: every target's caBundle holds the CA that signed it.
// Otherwise it says what is missing, for a readiness check.
func (s *Shared) Ready() error {
	return s.current.Load().ready
}

// Start keeps the certificate and the targets current until ctx is done;
// then it returns nil. It may be called once.
//
// Goroutines: Start runs the rotation loop on the caller's goroutine, and
// a client-go informer on the Secret (a reflector and a handler goroutine)
// that only wakes the loop. It joins them before it returns.
func (s *Shared) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("certs: Shared.Start was called twice: run one Start per Shared")
	}
	log := s.opts.Logger
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithName("certs").WithValues("namespace", s.opts.Namespace, "name", s.opts.SecretName)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	informer := s.secretInformer(log, poke)
	wg.Go(func() { informer.RunWithContext(ctx) })

	for ctx.Err() == nil {
		wait := s.sync(ctx, log)
		if wait == 0 {
			continue
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
		case <-t.C():
		}
		t.Stop()
	}
	return nil
}

// secretInformer returns an informer on the Secret alone whose every event
// calls poke.
func (s *Shared) secretInformer(log logr.Logger, poke func()) cache.Controller {
	secrets := s.kube.CoreV1().Secrets(s.opts.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", s.opts.SecretName).String()
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &log,
		ListerWatcher: kube.ListWatch(func(o *metav1.ListOptions) { o.FieldSelector = byName }, secrets.List, secrets.Watch),
		ObjectType:    &corev1.Secret{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		},
	})
	return informer
}
