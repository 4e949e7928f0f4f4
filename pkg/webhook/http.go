package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// maxAdmissionBody bounds an AdmissionReview's body. The API server accepts
// objects of up to 3 MiB (etcd's 1.5 MiB request limit, doubled for JSON),
// and a review carries at most two (the old and the new) and its request's
// fields. A ConversionReview carries a whole list: the Server's
// Options.MaxBodyBytes bounds it.
const maxAdmissionBody = 7 << 20

// httpError is a request the webhook cannot answer with a review: the API
// server sees the call fail, and the webhook's failurePolicy decides.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{code: http.StatusBadRequest, msg: "webhook: " + fmt.Sprintf(format, args...)}
}

// kinded is a pointer to a review: its TypeMeta says what it is.
type kinded interface{ GetObjectKind() schema.ObjectKind }

// readReview reads the JSON review r carries into review, after checking
// the method and the content type, and checks its apiVersion and kind.
// limit bounds the body; 0 means no bound.
func readReview(w http.ResponseWriter, r *http.Request, limit int64, want schema.GroupVersionKind, review kinded) *httpError {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return &httpError{code: http.StatusMethodNotAllowed,
			msg: fmt.Sprintf("webhook: method %s is not allowed: send the %s with POST", r.Method, want.Kind)}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &httpError{code: http.StatusUnsupportedMediaType,
			msg: fmt.Sprintf("webhook: Content-Type %q is not supported: send the %s as application/json", r.Header.Get("Content-Type"), want.Kind)}
	}
	body := r.Body
	if limit > 0 {
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	raw, err := io.ReadAll(body)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return &httpError{code: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("webhook: the %s is larger than %d bytes", want.Kind, mbe.Limit)}
	}
	if err != nil {
		return badRequest("reading the %s: %v", want.Kind, err)
	}
	if len(raw) == 0 {
		return badRequest("the request body is empty: send the %s in it", want.Kind)
	}
	if err := utiljson.Unmarshal(raw, review); err != nil {
		return badRequest("decoding the %s: %v", want.Kind, err)
	}
	if got := review.GetObjectKind().GroupVersionKind(); got != want {
		return badRequest("the body is %q %q, want %s %s: list %s first in the webhook configuration's review versions",
			got.GroupVersion().String(), got.Kind, want.GroupVersion(), want.Kind, want.Version)
	}
	return nil
}

// writeReview writes review as the JSON answer, or logs why it could not.
func writeReview(w http.ResponseWriter, log logr.Logger, review kinded) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(review); err != nil {
		// The review encodes; what failed is the connection.
		log.Error(err, "Writing the webhook response")
	}
}

// writeError answers with e; the API server logs the body.
func writeError(w http.ResponseWriter, log logr.Logger, e *httpError) {
	log.V(4).Info("Rejected a webhook request", "code", e.code, "err", e.msg)
	http.Error(w, e.msg, e.code)
}
