package leader_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// leaseServer is an API server for the Leases of namespace "ns", as
// NewForConfig's lock talks to it: Get, Create, and an Update that fails
// with a conflict unless it names the stored resourceVersion. Its answers
// carry managedFields, in protobuf unless json is set.
type leaseServer struct {
	*httptest.Server
	t *testing.T

	mu      sync.Mutex
	leases  map[string]*coordinationv1.Lease
	rv      int
	json    bool   // answer in JSON, and expect JSON bodies
	timeout string // the timeout every request must name in its query
	refuse  int    // answer every request with this status code
	sentMF  bool   // a request body carried managedFields
	methods []string
}

func newLeaseServer(t *testing.T) *leaseServer {
	s := &leaseServer{t: t, leases: map[string]*coordinationv1.Lease{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// config is the rest config of a client of s: asking for JSON if s
// answers JSON, and with the timeout s expects.
func (s *leaseServer) config() *rest.Config {
	c := &rest.Config{Host: s.URL}
	if s.json {
		c.ContentType = runtime.ContentTypeJSON
	}
	c.Timeout, _ = time.ParseDuration(s.timeout)
	return c
}

const leasesPath = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"

func (s *leaseServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, r.Method)
	if s.refuse != 0 {
		w.WriteHeader(s.refuse) // no Status, as a proxy in front of the API server answers
		_, _ = w.Write([]byte("refused"))
		return
	}
	name, _ := strings.CutPrefix(r.URL.Path, leasesPath+"/")
	var sent *coordinationv1.Lease
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		want := map[bool]string{false: runtime.ContentTypeProtobuf, true: runtime.ContentTypeJSON}[s.json]
		if ct := r.Header.Get("Content-Type"); ct != want {
			s.t.Errorf("%s with content type %q, want %q", r.Method, ct, want)
		}
		if q := r.URL.Query().Get("timeout"); s.timeout != "" && q != s.timeout {
			s.t.Errorf("%s with timeout %q, want %q", r.Method, q, s.timeout)
		}
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			s.t.Errorf("decoding the %s body: %v", r.Method, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sent = obj.(*coordinationv1.Lease)
		s.sentMF = s.sentMF || len(sent.ManagedFields) > 0
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path != leasesPath:
		l, ok := s.leases[name]
		if !ok {
			s.status(w, &apierrors.NewNotFound(leases, name).ErrStatus, http.StatusNotFound)
			return
		}
		s.answer(w, l, http.StatusOK)
	case r.Method == http.MethodPost && r.URL.Path == leasesPath:
		if _, ok := s.leases[sent.Name]; ok {
			s.status(w, &apierrors.NewAlreadyExists(leases, sent.Name).ErrStatus, http.StatusConflict)
			return
		}
		s.store(sent)
		s.answer(w, sent, http.StatusCreated)
	case r.Method == http.MethodPut && r.URL.Path != leasesPath:
		l, ok := s.leases[name]
		if !ok {
			s.status(w, &apierrors.NewNotFound(leases, name).ErrStatus, http.StatusNotFound)
			return
		}
		if sent.ResourceVersion != l.ResourceVersion {
			s.status(w, &apierrors.NewConflict(leases, name, errors.New("the object has been modified")).ErrStatus, http.StatusConflict)
			return
		}
		s.store(sent)
		s.answer(w, sent, http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *leaseServer) store(l *coordinationv1.Lease) {
	s.rv++
	l.ResourceVersion = strconv.Itoa(s.rv)
	l.Namespace = "ns"
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
	s.leases[l.Name] = l
}

func (s *leaseServer) answer(w http.ResponseWriter, l *coordinationv1.Lease, code int) {
	l = l.DeepCopy()
	l.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	s.write(w, l, code)
}

func (s *leaseServer) status(w http.ResponseWriter, st *metav1.Status, code int) {
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	s.write(w, st, code)
}

func (s *leaseServer) write(w http.ResponseWriter, obj runtime.Object, code int) {
	var b bytes.Buffer
	if s.json {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(&b).Encode(obj); err != nil {
			s.t.Error(err)
		}
	} else {
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b); err != nil {
			s.t.Error(err)
		}
	}
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// TestNewForConfigElects: two Electors built by NewForConfig against one
// API server: one leads and renews, the other stands by and takes over
// once the first released the Lease.
func TestNewForConfigElects(t *testing.T) {
	s := newLeaseServer(t)
	opts := func(id string) leader.Options {
		return leader.Options{Name: "op", Namespace: "ns", Identity: id, ReleaseOnCancel: true,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	a, err := leader.NewForConfig(s.config(), opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.NewForConfig(s.config(), opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	lead := func(ctx context.Context) error { <-ctx.Done(); return nil }
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctxA, lead) }()
	waitFor(t, 10*time.Second, "a leads", a.IsLeader)
	go func() { doneB <- b.Run(ctxB, lead) }()
	// b reads the Lease a few times and stays a standby while a renews.
	waitFor(t, 10*time.Second, "a renews while b polls", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		var gets, puts int
		for _, m := range s.methods {
			gets += map[bool]int{true: 1}[m == http.MethodGet]
			puts += map[bool]int{true: 1}[m == http.MethodPut]
		}
		return gets >= 5 && puts >= 5
	})
	if b.IsLeader() {
		t.Fatal("b leads while a renews")
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Errorf("a's Run: %v", err)
	}
	waitFor(t, 10*time.Second, "b leads after a released the Lease", b.IsLeader)
	stopB()
	if err := <-doneB; err != nil {
		t.Errorf("b's Run: %v", err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
