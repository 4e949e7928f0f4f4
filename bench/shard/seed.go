package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

const (
	objPrefix   = "cm-"
	seedWorkers = 32 // parallel creators
)

// unsent is the sent annotation of a ConfigMap the driver has not
// written: as long as a time in Unix ns, and 0 once parsed.
const unsent = "0000000000000000000"

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func objName(i int) string { return fmt.Sprintf("%s%05d", objPrefix, i) }

// keyIndex is i for the name objName(i).
func keyIndex(name string) (int, error) {
	s, ok := strings.CutPrefix(name, objPrefix)
	if !ok {
		return 0, fmt.Errorf("%q is not a bench ConfigMap", name)
	}
	return strconv.Atoi(s)
}

// payload is the data of every ConfigMap: dataBytes of text in 8 keys, so
// that the cache, not the runtime, dominates a replica's heap.
func payload(dataBytes int) map[string]string {
	data := make(map[string]string, 8)
	const line = "the quick brown fox jumps over the lazy dog 0123456789\n"
	for k := range 8 {
		v := strings.Repeat(line, dataBytes/8/len(line)+1)[:dataBytes/8]
		data[fmt.Sprintf("key-%d", k)] = v
	}
	return data
}

// seed creates namespace ns and the ConfigMaps 0..n-1 in it, with
// seedWorkers in parallel; those that exist already are kept.
func seed(ctx context.Context, c kubernetes.Interface, ns string, n, dataBytes int) (time.Duration, error) {
	began := time.Now()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	data := payload(dataBytes)
	var next atomic.Int64
	errs := make([]error, seedWorkers)
	var wg sync.WaitGroup
	for w := range seedWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				// The sent annotation is there from the start, as long as
				// the driver's, so that every heap is measured over objects
				// of one shape, churned or not.
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: objName(i), Namespace: ns, Labels: map[string]string{"app": "bench-shard"},
						Annotations: map[string]string{sentKey: unsent}},
					Data: data,
				}
				if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					errs[w] = fmt.Errorf("creating %s: %w", cm.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(began), errors.Join(errs...)
}

// placement is where every ConfigMap is, by its labels: the member each is
// labelled for ("" when none), by index, and how many are draining.
type placement struct {
	owner    []string
	draining int
}

// place lists the ConfigMaps' metadata in ns.
func place(ctx context.Context, md metadata.Interface, ns, ring string, n int) (placement, error) {
	list, err := md.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return placement{}, err
	}
	pl := placement{owner: make([]string, n)}
	shardLabel, drainLabel := shard.ShardLabel(ring), shard.DrainLabel(ring)
	for _, m := range list.Items {
		i, err := keyIndex(m.Name)
		if err != nil || i >= n {
			continue
		}
		pl.owner[i] = m.Labels[shardLabel]
		if m.Labels[drainLabel] != "" {
			pl.draining++
		}
	}
	return pl, nil
}

// ringOwners is the member the ring of members picks for each of the n
// ConfigMaps of ns, by index: the placement the sharder converges to.
func ringOwners(ns string, n int, members []string) []string {
	r := shard.NewRing(members...)
	out := make([]string, n)
	for i := range n {
		out[i] = r.Owner(ns + "/" + objName(i))
	}
	return out
}
