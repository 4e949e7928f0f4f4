package faketest_test

import (
	"errors"
	"net/http"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/internal/faketest"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReactors: a reactor's answer replaces the fake's, for the requests
// it picks, from the moment it is added, and the fake answers the rest.
func TestReactors(t *testing.T) {
	fc, err := fake.New(fake.Options{Objects: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	rs := faketest.New(fc)
	kube, err := kubernetes.NewForConfig(rs.Config())
	if err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps("default")
	if l, err := cms.List(t.Context(), metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("List with no reactor = %v, %v; want the fake's one ConfigMap", l, err)
	}
	rs.React(func(req *http.Request) (*http.Response, error) {
		if !faketest.Is(req, "configmaps", false) {
			return nil, nil
		}
		return faketest.Status(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no"))), nil
	})
	if _, err := cms.List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("List with the reactor = %v, want Forbidden", err)
	}
	if _, err := kube.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("List of Secrets, which the reactor leaves to the fake = %v", err)
	}
}
