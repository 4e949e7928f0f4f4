package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestFirstReconcileSeesObjectsThatExistedBeforeStart: Run waits for every
// informer to sync before any worker runs, so the very first Reconcile
// already finds every object that existed when the manager started, in the
// informer that triggered it and in the others it reads. The Secrets list
// is made slow, as a large list over a slow link would be: a manager that
// started workers once the ConfigMaps alone had synced would show an empty
// Secrets lister.
func TestFirstReconcileSeesObjectsThatExistedBeforeStart(t *testing.T) {
	const n = 50
	ns := newNamespace(t)
	for i := range n {
		createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i), nil, nil)
		createSecret(t, ns, fmt.Sprintf("secret-%02d", i), "", nil)
	}
	// Whatever the API server lists now is what the first Reconcile must see.
	var wantCMs, wantSecrets []string
	cmList, err := kube.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cmList.Items {
		wantCMs = append(wantCMs, o.Name)
	}
	secretList, err := kube.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range secretList.Items {
		wantSecrets = append(wantSecrets, o.Name)
	}
	slices.Sort(wantCMs)
	slices.Sort(wantSecrets)
	if len(wantCMs) < n || len(wantSecrets) < n {
		t.Fatalf("the API server lists %d ConfigMaps and %d Secrets in %s, want at least the %d created", len(wantCMs), len(wantSecrets), ns, n)
	}

	slow := slowGets(cfg, "/api/v1/namespaces/"+ns+"/secrets", 500*time.Millisecond)
	mgr := newManager(t, slow, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.For[*corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var (
		once           sync.Once
		mu             sync.Mutex
		sawCMs, sawSec []string // names in the listers during the first Reconcile
		firstErr       error
	)
	rec := &recorder{}
	_, err = mgr.AddController("preexisting", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		once.Do(func() {
			cmObjs, err1 := cms.Lister().ListInNamespace(ns, nil)
			secObjs, err2 := secrets.Lister().ListInNamespace(ns, nil)
			mu.Lock()
			defer mu.Unlock()
			firstErr = errors.Join(err1, err2)
			for _, o := range cmObjs {
				sawCMs = append(sawCMs, o.Name)
			}
			for _, o := range secObjs {
				sawSec = append(sawSec, o.Name)
			}
			slices.Sort(sawCMs)
			slices.Sort(sawSec)
		})
		rec.add(req, time.Now(), "")
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	distinct := func() int {
		seen := map[reconcile.Request]bool{}
		for _, c := range rec.all() {
			seen[c.req] = true
		}
		return len(seen)
	}
	eventually(t, waitTimeout, func() bool { return distinct() == len(wantCMs) }, "all %d ConfigMaps to be reconciled (got %v)", len(wantCMs), later(func() any { return distinct() }))
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatalf("ListInNamespace in the first Reconcile: %v", firstErr)
	}
	if !slices.Equal(sawCMs, wantCMs) {
		t.Errorf("the first Reconcile's ConfigMap lister held %d objects, want all %d that existed before Run\n got: %v\nwant: %v", len(sawCMs), len(wantCMs), sawCMs, wantCMs)
	}
	if !slices.Equal(sawSec, wantSecrets) {
		t.Errorf("the first Reconcile's Secret lister held %d objects, want all %d that existed before Run\n got: %v\nwant: %v", len(sawSec), len(wantSecrets), sawSec, wantSecrets)
	}
}

// TestInformersStripManagedFields: cached objects lose metadata.managedFields
// (which the API server's copy has) unless Options.KeepManagedFields is set,
// on the initial list and on later updates alike.
func TestInformersStripManagedFields(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepManagedFields=%v", keep), func(t *testing.T) {
			ns := newNamespace(t)
			createConfigMap(t, ns, "cm", map[string]string{"v": "1"}, nil)
			mgr := newManager(t, cfg, ns, manager.Options{Informers: informer.Options{KeepManagedFields: keep}})
			cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
			if err != nil {
				t.Fatal(err)
			}
			r := start(t, mgr)
			eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")

			check := func(v string) {
				t.Helper()
				var cached *corev1.ConfigMap
				eventually(t, waitTimeout, func() bool {
					cached, err = cms.Lister().Get(ns, "cm")
					return err == nil && cached.Data["v"] == v
				}, "the lister to hold cm with v=%s", v)
				server, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(server.ManagedFields) == 0 {
					t.Fatalf("the API server's copy of cm has no managedFields: nothing to strip, the test proves nothing")
				}
				if got := len(cached.ManagedFields); (got > 0) != keep {
					t.Errorf("cached cm (v=%s) has %d managedFields entries, want %s", v, got, map[bool]string{false: "none", true: "the server's"}[keep])
				}
			}
			check("1") // from the initial list

			cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["v"] = "2"
			if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			check("2") // from a watch event

			if err := r.stop(t); err != nil {
				t.Fatalf("Run returned %v, want nil", err)
			}
		})
	}
}
