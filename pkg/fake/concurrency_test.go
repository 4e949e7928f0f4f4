package fake_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestConcurrentWrites checks, under -race, that concurrent read-modify-
// write loops lose no update (each conflict is seen and retried) and that
// a watcher sees every resulting version in order.
func TestConcurrentWrites(t *testing.T) {
	const workers, increments = 8, 10 // 80 events: within the watcher's buffer, read after the writes
	c := newCluster(t, configMap("ns", "counter", map[string]string{"n": "0"}))
	cms := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().ConfigMaps("ns")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range increments {
				for { // read, modify, write; again on a conflict
					cm, err := cms.Get(ctx, "counter", metav1.GetOptions{})
					if err == nil {
						n, _ := strconv.Atoi(cm.Data["n"])
						cm.Data["n"] = strconv.Itoa(n + 1)
						_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					}
					if apierrors.IsConflict(err) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	last := 0
	for range workers * increments {
		e := next(t, w)
		if e.Type != watch.Modified {
			t.Fatalf("event %s, want MODIFIED", e.Type)
		}
		n, _ := strconv.Atoi(e.Object.(*corev1.ConfigMap).ResourceVersion)
		if n <= last {
			t.Fatalf("resourceVersion %d after %d: events out of order", n, last)
		}
		last = n
	}
	last = 0
	for _, w := range c.Writes() {
		if w.Err != nil {
			continue
		}
		n, _ := strconv.Atoi(w.Object.(*corev1.ConfigMap).ResourceVersion)
		if n <= last {
			t.Fatalf("Writes: resourceVersion %d after %d, want them in commit order", n, last)
		}
		last = n
	}
	cm, err := cms.Get(ctx, "counter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * increments); cm.Data["n"] != want {
		t.Errorf("counter = %s, want %s: an update was lost", cm.Data["n"], want)
	}
}
