package certs

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// minWait is the shortest pause between two rounds of the loop, but for a
// round repeated at once after losing a write to another replica.
const minWait = time.Second

// sync is one round of Start's loop: it reads the targets and the Secret,
// writes the Secret if a certificate is due, serves the Secret's
// certificate, injects its bundle into the targets, and updates Ready. It
// returns how long to wait before the next round.
func (s *Shared) sync(ctx context.Context, log logr.Logger) time.Duration {
	now := s.clock.Now()
	// The targets first, then the Secret: the bundle this round injects is
	// then never older than what it saw in a target, so a replica that is
	// behind cannot take a new CA out of a caBundle (inject's write is
	// conditional on the target's resourceVersion).
	obs := make([]observed, len(s.targets))
	for i, t := range s.targets {
		obs[i] = observe(ctx, s.dyn, t)
	}
	secret, err := s.kube.CoreV1().Secrets(s.opts.Namespace).Get(ctx, s.opts.SecretName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return s.fail(ctx, log, "secret", fmt.Errorf("certs: reading the Secret %s/%s: %w", s.opts.Namespace, s.opts.SecretName, err))
	}
	var st *state
	var unusable error // the Secret exists but its certificates cannot be used
	if err == nil {
		st, unusable = decodeState(secret.Data)
		if !labelled(secret) {
			if _, other := secret.Labels[SharedLabel]; other || unusable != nil {
				return s.fail(ctx, log, "secret", notOurs(secret))
			}
			// No label, but this source's whole layout, consistent: a
			// Secret an earlier ctrlkit made, before it labelled them.
			if secret, err = s.adopt(ctx, secret); err != nil {
				if apierrors.IsConflict(err) {
					log.V(1).Info("the Secret changed while labelling it; reading it again")
					return 0
				}
				return s.fail(ctx, log, "secret", err)
			}
			log.Info("labelled the Secret as this source's: it holds this source's certificates without the label, as a Secret an earlier ctrlkit made does", "label", SharedLabel+"="+SharedLabelValue)
		}
	} else {
		secret = nil
	}

	// Has every target held the new CA for PublishDelay?
	published := false
	if st != nil && st.next != nil && allHave(obs, st.next.cert) {
		if s.nextSeen == nil || !s.nextSeen.Equal(st.next.cert) {
			s.nextSeen, s.nextSince = st.next.cert, now
		}
		published = now.Sub(s.nextSince) >= s.opts.PublishDelay
	} else {
		s.nextSeen = nil
	}

	want, changes, err := s.plan(st, now, published)
	if err != nil {
		return s.fail(ctx, log, "secret", err)
	}
	if want != nil {
		if err := s.write(ctx, secret, want); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				log.V(1).Info("another replica wrote the Secret first; reading it again")
				return 0
			}
			return s.fail(ctx, log, "secret", err)
		}
		if unusable != nil {
			changes = append([]string{fmt.Sprintf("replaced the Secret's unusable certificates (%v)", unusable)}, changes...)
		}
		log.Info("updated the certificates in the Secret", "changes", strings.Join(changes, "; "),
			"servingNotAfter", want.serving.cert.NotAfter, "caNotAfter", want.signer.cert.NotAfter)
		st = want
		if st.next != nil {
			s.nextSeen = nil
		}
	}
	delete(s.logged, "secret")

	bundle := st.caBundle()
	var problems []string
	retry := false
	for i, t := range s.targets {
		o := obs[i]
		if o.err == nil && !o.equals(bundle) {
			switch err := inject(ctx, s.dyn, t, o, bundle); {
			case apierrors.IsConflict(err): // another replica injected it first
				log.V(1).Info("the target changed while injecting the CA bundle; reading it again", "target", t.String())
				retry = true
			case err != nil:
				o.err = err
			default:
				o.bundles = repeat(bundle, len(o.bundles))
				log.V(1).Info("injected the CA bundle", "target", t.String())
			}
			obs[i] = o
		}
		if o.err != nil {
			s.logOnce(log, t.String(), o.err)
			problems = append(problems, o.err.Error())
			continue
		}
		delete(s.logged, t.String())
		if !o.has(st.signer.cert) {
			problems = append(problems, fmt.Sprintf("%s does not trust the serving certificate's CA yet", t))
		}
	}
	if st.next != nil && s.nextSeen == nil && allHave(obs, st.next.cert) {
		s.nextSeen, s.nextSince = st.next.cert, s.clock.Now() // published by this round
	}
	var ready error
	if len(problems) > 0 {
		ready = fmt.Errorf("certs: the API server may not trust the serving certificate: %s", strings.Join(problems, "; "))
	}
	s.load(log, st, bundle, ready)
	if retry {
		return 0
	}
	return s.nextWait(st, now)
}

// write creates the Secret with st and SharedLabel, or updates it if it
// was read (conditional on its resourceVersion; only a Secret with
// SharedLabel is updated).
func (s *Shared) write(ctx context.Context, secret *corev1.Secret, st *state) error {
	secrets := s.kube.CoreV1().Secrets(s.opts.Namespace)
	if secret == nil {
		_, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      s.opts.SecretName,
				Namespace: s.opts.Namespace,
				Labels:    map[string]string{SharedLabel: SharedLabelValue},
			},
			Type: corev1.SecretTypeTLS,
			Data: st.encode(),
		}, metav1.CreateOptions{})
		return err
	}
	secret = secret.DeepCopy()
	secret.Data = st.encode()
	setLabel(secret) // it has the label already; no update may drop it
	_, err := secrets.Update(ctx, secret, metav1.UpdateOptions{})
	return err
}

// adopt adds SharedLabel to secret, changing nothing else, conditional on
// its resourceVersion, and returns the Secret written. Its error matches
// apierrors.IsConflict if the Secret changed since it was read.
func (s *Shared) adopt(ctx context.Context, secret *corev1.Secret) (*corev1.Secret, error) {
	secret = secret.DeepCopy()
	setLabel(secret)
	updated, err := s.kube.CoreV1().Secrets(s.opts.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("certs: labelling the Secret %s/%s %s=%s: %w", s.opts.Namespace, s.opts.SecretName, SharedLabel, SharedLabelValue, err)
	}
	return updated, nil
}

// load serves st's certificate and records the bundle and readiness.
func (s *Shared) load(log logr.Logger, st *state, bundle []byte, ready error) {
	old := s.current.Load()
	snap := &snapshot{cert: old.cert, bundle: bundle, ready: ready}
	if old.cert == nil || !old.cert.Leaf.Equal(st.serving.cert) {
		snap.cert = st.serving.tlsCertificate()
		log.V(1).Info("serving a certificate from the Secret", "serial", st.serving.cert.SerialNumber.Text(16), "notAfter", st.serving.cert.NotAfter)
	}
	s.current.Store(snap)
}

// fail records err for Ready, keeping the certificate served, logs it
// unless it was the last failure logged for subject, and returns how long
// to wait before trying again.
func (s *Shared) fail(ctx context.Context, log logr.Logger, subject string, err error) time.Duration {
	if ctx.Err() != nil { // shutting down; not a failure
		return s.opts.CheckInterval
	}
	s.logOnce(log, subject, err)
	old := s.current.Load()
	s.current.Store(&snapshot{cert: old.cert, bundle: old.bundle, ready: err})
	return s.opts.CheckInterval
}

// logOnce logs err unless it is the last error logged for subject.
func (s *Shared) logOnce(log logr.Logger, subject string, err error) {
	if s.logged[subject] == err.Error() {
		return
	}
	s.logged[subject] = err.Error()
	log.Error(err, "keeping the certificates current failed; retrying", "subject", subject)
}

// allHave reports whether every observed target holds c.
func allHave(obs []observed, c *x509.Certificate) bool {
	for _, o := range obs {
		if !o.has(c) {
			return false
		}
	}
	return true
}

// nextWait returns how long to wait before the next round: until something
// in st is due, or CheckInterval.
func (s *Shared) nextWait(st *state, now time.Time) time.Duration {
	wait := s.opts.CheckInterval
	at := []time.Time{s.opts.Serving.renewAt(st.serving.cert)}
	if st.next == nil {
		at = append(at, s.opts.CA.renewAt(st.signer.cert))
	} else if s.nextSeen != nil {
		at = append(at, s.nextSince.Add(s.opts.PublishDelay))
	}
	for _, c := range st.bundle {
		at = append(at, c.NotAfter)
	}
	for _, t := range at {
		wait = min(wait, t.Sub(now))
	}
	return max(wait, minWait)
}

// repeat returns n copies of b.
func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}
