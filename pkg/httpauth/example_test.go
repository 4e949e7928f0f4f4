package httpauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
)

// Guard /metrics with the cluster's authentication and RBAC. In a program,
// Client is a clientset of the Guard's own, built from the operator's
// rest config with its own rate limiter (manager.Options.SecureMetrics
// does this for a Manager's /metrics); here a fake clientset plays the
// API server: it knows the token "prometheus-token", whose user may get
// /metrics.
func Example() {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "prometheus-token" {
			tr.Status.Authenticated = true
			tr.Status.User.Username = "system:serviceaccount:monitoring:prometheus"
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" &&
			sar.Spec.NonResourceAttributes.Verb == "get" && sar.Spec.NonResourceAttributes.Path == "/metrics"
		return true, sar, nil
	})

	guard, err := httpauth.New(httpauth.Options{Client: kube})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "up 1")
	})))

	for _, req := range []struct{ method, token string }{
		{"GET", "prometheus-token"},
		{"GET", ""},
		{"GET", "forged-token"},
		{"DELETE", "prometheus-token"},
	} {
		r := httptest.NewRequest(req.method, "/metrics", nil)
		if req.token != "" {
			r.Header.Set("Authorization", "Bearer "+req.token)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%s %q: %d %s", req.method, req.token, w.Code, w.Body)
	}
	// Output:
	// GET "prometheus-token": 200 up 1
	// GET "": 401 Unauthorized: send a bearer token (Authorization: Bearer <token>)
	// GET "forged-token": 401 Unauthorized: the token was not authenticated
	// DELETE "prometheus-token": 403 Forbidden: user "system:serviceaccount:monitoring:prometheus" may not delete /metrics
}
