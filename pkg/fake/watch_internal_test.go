package fake

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// These tests shrink the history and the watcher buffer, which have no
// option, to reach their limits with a few writes.

func testCluster(t *testing.T) (*Cluster, kubernetes.Interface) {
	t.Helper()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

func createN(ctx context.Context, cs kubernetes.Interface, n int) error {
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}}
		if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// watching reports the number of open watchers.
func (c *Cluster) watching() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watchers)
}

// waitForWatchers waits until n watchers are open.
func waitForWatchers(t *testing.T, c *Cluster, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.watching() == n, nil
	})
	if err != nil {
		t.Fatalf("%d watchers open, want %d: %v", c.watching(), n, err)
	}
}

// TestWatchResourceVersionBounds checks 410 Gone for a resourceVersion
// the bounded history no longer reaches, a resume from the oldest one it
// does, and the answer for one in the future.
func TestWatchResourceVersionBounds(t *testing.T) {
	c, cs := testCluster(t)
	c.historyLimit = 3
	if err := createN(t.Context(), cs, 5); err != nil { // history keeps 3, 4, 5
		t.Fatal(err)
	}
	_, err := cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "1"})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from resourceVersion 1: %v, want 410 Gone", err)
	}
	_, err = cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "6"})
	if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Errorf("watch from resourceVersion 6 (current 5): %v, want Too large resource version", err)
	}
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatalf("watch from resourceVersion 2: %v", err)
	}
	defer w.Stop()
	if e := <-w.ResultChan(); e.Object.(*corev1.ConfigMap).ResourceVersion != "3" {
		t.Errorf("first event from resourceVersion 2: %v, want resourceVersion 3", e.Object)
	}
}

// TestSlowWatcherIsClosed checks that a watcher that does not read cannot
// block writes: it falls behind, its stream ends after what it buffered,
// and it is unregistered.
func TestSlowWatcherIsClosed(t *testing.T) {
	c, cs := testCluster(t)
	c.bufferSize = 2
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, Host+"/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	done := make(chan error, 1)
	go func() { done <- createN(t.Context(), cs, 10) }() // more than the buffer and the pipe hold
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writes blocked on a watcher that does not read")
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the dropped watch: %v", err)
	}
	if n := strings.Count(string(body), "\n"); n == 0 || n >= 10 {
		t.Errorf("the dropped watch delivered %d events, want some, and fewer than the 10 writes", n)
	}
	waitForWatchers(t, c, 0)
}

// TestWatchEndsWhenClientStops checks that closing the body, or ending
// the request's context, ends the stream even when no event comes.
func TestWatchEndsWhenClientStops(t *testing.T) {
	c, cs := testCluster(t)
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForWatchers(t, c, 1)
	w.Stop()
	waitForWatchers(t, c, 0)

	ctx, cancel := context.WithCancel(t.Context())
	w, err = cs.CoreV1().ConfigMaps("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	waitForWatchers(t, c, 1)
	cancel()
	waitForWatchers(t, c, 0)
}

// TestWatchTimeout checks that timeoutSeconds ends the stream.
func TestWatchTimeout(t *testing.T) {
	c, cs := testCluster(t)
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Error("an event on an empty namespace")
		}
	case <-time.After(10 * time.Second):
		t.Error("the watch outlived timeoutSeconds=1")
	}
	waitForWatchers(t, c, 0)
}
