package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SharedLabel, with the value SharedLabelValue, marks a Secret as a Shared
// source's. A Shared source creates its Secret with this label and writes
// an existing Secret only if it carries it (see SharedOptions.SecretName
// for the one exception, a Secret an earlier ctrlkit made). A manifest
// that creates the Secret ahead of the operator, as a placeholder for the
// source to fill in, sets it:
//
//	metadata:
//	  labels:
//	    certs.ctrlkit.io/managed-by: shared
//
// It is a key of ctrlkit's own rather than app.kubernetes.io/managed-by,
// which Helm charts and kustomizations set to their own values.
const (
	SharedLabel      = "certs.ctrlkit.io/managed-by"
	SharedLabelValue = "shared"
)

// labelled reports whether secret carries SharedLabel.
func labelled(secret *corev1.Secret) bool {
	return secret.Labels[SharedLabel] == SharedLabelValue
}

// setLabel puts SharedLabel on secret, which the caller owns.
func setLabel(secret *corev1.Secret) {
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[SharedLabel] = SharedLabelValue
}

// notOurs is the error for a Secret that the source may not write: it
// names the Secret, says why, and gives the three ways out.
func notOurs(secret *corev1.Secret) error {
	why := fmt.Sprintf("it lacks the label %s=%s and does not hold this source's certificates", SharedLabel, SharedLabelValue)
	overwrite := ""
	if v, ok := secret.Labels[SharedLabel]; ok {
		why = fmt.Sprintf("its label %s is %q, not %q", SharedLabel, v, SharedLabelValue)
		overwrite = " --overwrite"
	}
	return fmt.Errorf("certs: the Secret %s/%s was not made by this source: %s, so it is left untouched; "+
		"delete it, set SharedOptions.SecretName to another name, or, if it is meant for this operator, label it (its data is then replaced): "+
		"kubectl label secret --namespace %s %s %s=%s%s",
		secret.Namespace, secret.Name, why,
		secret.Namespace, secret.Name, SharedLabel, SharedLabelValue, overwrite)
}

// The keys of the shared Secret's data, all PEM.
const (
	// keyCABundle holds every CA a client should trust, oldest first: the
	// CA that signs the serving certificate, a newer one during a CA
	// rotation, and older ones until they expire. It is the caBundle
	// injected into webhook configurations and CRDs.
	keyCABundle = "ca.crt"
	// keyServingCert and keyServingKey hold the serving certificate and its
	// key (the keys of a kubernetes.io/tls Secret).
	keyServingCert = "tls.crt"
	keyServingKey  = "tls.key"
	// keySignerCert and keySignerKey hold the CA that signed the serving
	// certificate.
	keySignerCert = "signer.crt"
	keySignerKey  = "signer.key"
	// keyNextSignerCert and keyNextSignerKey hold, during a CA rotation
	// only, the new CA: it is in the bundle already, and signs the next
	// serving certificate once the bundle is published.
	keyNextSignerCert = "next-signer.crt"
	keyNextSignerKey  = "next-signer.key"
)

// state is what the shared Secret holds.
type state struct {
	serving *keyPair
	signer  *keyPair
	next    *keyPair // nil but during a CA rotation
	bundle  []*x509.Certificate
}

// decodeState parses a Secret's data and checks that it is consistent: the
// serving certificate is signed by the signer, and the bundle holds the
// signer (and the next signer, if any).
func decodeState(data map[string][]byte) (*state, error) {
	pair := func(certKey, keyKey string) (*keyPair, error) {
		if len(data[certKey]) == 0 || len(data[keyKey]) == 0 {
			return nil, fmt.Errorf("%s or %s is missing", certKey, keyKey)
		}
		kp, err := parseKeyPair(data[certKey], data[keyKey])
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certKey, keyKey, err)
		}
		return kp, nil
	}
	var st state
	var err error
	if st.serving, err = pair(keyServingCert, keyServingKey); err != nil {
		return nil, err
	}
	if st.signer, err = pair(keySignerCert, keySignerKey); err != nil {
		return nil, err
	}
	if len(data[keyNextSignerCert]) > 0 || len(data[keyNextSignerKey]) > 0 {
		if st.next, err = pair(keyNextSignerCert, keyNextSignerKey); err != nil {
			return nil, err
		}
	}
	if st.bundle, err = parseCerts(data[keyCABundle]); err != nil {
		return nil, fmt.Errorf("%s: %w", keyCABundle, err)
	}
	if err := st.serving.cert.CheckSignatureFrom(st.signer.cert); err != nil {
		return nil, fmt.Errorf("%s is not signed by %s: %w", keyServingCert, keySignerCert, err)
	}
	for _, ca := range []*keyPair{st.signer, st.next} {
		if ca == nil {
			continue
		}
		if !ca.cert.IsCA {
			return nil, errors.New("a signer is not a CA")
		}
		if !slices.ContainsFunc(st.bundle, ca.cert.Equal) {
			return nil, fmt.Errorf("%s does not hold the signer %q", keyCABundle, ca.cert.Subject.CommonName)
		}
	}
	return &st, nil
}

// encode returns st as a Secret's data.
func (st *state) encode() map[string][]byte {
	data := map[string][]byte{
		keyCABundle:    encodeCerts(st.bundle),
		keyServingCert: st.serving.certPEM,
		keyServingKey:  st.serving.keyPEM,
		keySignerCert:  st.signer.certPEM,
		keySignerKey:   st.signer.keyPEM,
	}
	if st.next != nil {
		data[keyNextSignerCert] = st.next.certPEM
		data[keyNextSignerKey] = st.next.keyPEM
	}
	return data
}

// caBundle returns st's bundle in PEM.
func (st *state) caBundle() []byte { return encodeCerts(st.bundle) }

// plan decides what st should become at now. published reports whether the
// bundle holding st.next has been in every target long enough for the
// serving certificate to switch to it. It returns nil if st is current, or
// the new state and what changed, for the log. st nil means there is no
// usable state; plan then starts afresh.
func (s *Shared) plan(st *state, now time.Time, published bool) (*state, []string, error) {
	if st == nil {
		fresh, err := s.fresh(now)
		return fresh, []string{"created a CA and a serving certificate"}, err
	}
	next := &state{serving: st.serving, signer: st.signer, next: st.next}
	var changes []string
	if !now.Before(st.signer.cert.NotAfter) {
		if st.next == nil || !now.Before(st.next.cert.NotAfter) {
			// Nothing valid is left to keep: clients fail until the new
			// bundle is published, but they fail already.
			fresh, err := s.fresh(now)
			return fresh, []string{"the CA expired: created a new CA and a serving certificate"}, err
		}
		published = true // the switch cannot wait any longer
	}
	if next.next == nil && !now.Before(s.opts.CA.renewAt(st.signer.cert)) {
		ca, err := newCA(s.caName(now), now, s.opts.CA.Validity)
		if err != nil {
			return nil, nil, err
		}
		next.next = ca
		published = false
		changes = append(changes, "added a new CA to the bundle (the serving certificate switches to it once the bundle is published)")
	}
	switch {
	case next.next != nil && published:
		serving, err := newServing(next.next, s.hosts, now, s.opts.Serving.Validity)
		if err != nil {
			return nil, nil, err
		}
		next.serving, next.signer, next.next = serving, next.next, nil
		changes = append(changes, "switched the serving certificate to the new CA")
	case !now.Before(s.opts.Serving.renewAt(st.serving.cert)) || !s.hosts.covers(st.serving.cert):
		serving, err := newServing(next.signer, s.hosts, now, s.opts.Serving.Validity)
		if err != nil {
			return nil, nil, err
		}
		next.serving = serving
		changes = append(changes, "renewed the serving certificate")
	}
	// The bundle: every CA still valid, with the signers always in it.
	for _, c := range st.bundle {
		if now.Before(c.NotAfter) || c.Equal(next.signer.cert) {
			next.bundle = append(next.bundle, c)
		}
	}
	if next.next != nil && !slices.ContainsFunc(next.bundle, next.next.cert.Equal) {
		next.bundle = append(next.bundle, next.next.cert)
	}
	if len(next.bundle) < len(st.bundle) {
		changes = append(changes, "removed expired CAs from the bundle")
	}
	if len(changes) == 0 {
		return nil, nil, nil
	}
	return next, changes, nil
}

// fresh returns a new CA and a serving certificate signed by it.
func (s *Shared) fresh(now time.Time) (*state, error) {
	ca, err := newCA(s.caName(now), now, s.opts.CA.Validity)
	if err != nil {
		return nil, err
	}
	serving, err := newServing(ca, s.hosts, now, s.opts.Serving.Validity)
	if err != nil {
		return nil, err
	}
	return &state{serving: serving, signer: ca, bundle: []*x509.Certificate{ca.cert}}, nil
}

// caName is the common name of a CA made at now: the Secret that keeps it
// and the time, so that people can tell CAs apart.
func (s *Shared) caName(now time.Time) string {
	return fmt.Sprintf("ctrlkit CA %s/%s %s", s.opts.Namespace, s.opts.SecretName, now.UTC().Format("20060102T150405Z"))
}
