// Command listtime times the ways of reading every ConfigMap of an
// envtest control plane into decoded objects, side by side in one run:
//
//   - raw transfer: the same list's bytes over the same connection,
//     discarded undecoded: the limit any decoder can approach;
//   - list, then decode: client-go's REST client reads the whole protobuf
//     body, then decodes it (what a clientset's List does);
//   - streamed: one list, each item decoded while the body is read
//     (internal/protolist), as ctrlkit's informers read a list of up to
//     10,000 objects of a built-in type;
//   - WatchList: a watch with sendInitialEvents until its bookmark, as
//     client-go's reflectors (and so controller-runtime's caches) fill a
//     cache by default;
//   - pages of N: pages of N objects, each decoded while read, the request
//     for each next page sent as soon as the page before has given its
//     continue token, at most 3 requests out at once (ctrlkit's informers,
//     with N = 10000), for each N of -pages.
//
// All are consistent reads (resourceVersion ""). It prints each
// round and the medians, with the ratios to "list, then decode" and to
// the raw transfer.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go run ./bench/cmd/listtime -n 10000 -rounds 7
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "listtime:", err)
		os.Exit(1)
	}
}

// count is -n: the raw transfer decodes nothing to count.
var count = new(int)

func run() error {
	n := flag.Int("n", 10000, "ConfigMaps to create (256-byte value each)")
	rounds := flag.Int("rounds", 7, "rounds; each times every way once, in rotating order")
	pageSizes := flag.String("pages", "10000", "page sizes of the pipelined way, comma-separated (ctrlkit's informers use 10000)")
	flag.Parse()
	*count = *n
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: run `make envtest` and set it to $PWD/bin/k8s")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS = -1
	cfg.ContentType = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := seed(ctx, cs, *n); err != nil {
		return err
	}
	ways := []struct {
		name string
		read func(context.Context, *kubernetes.Clientset) (int, error)
	}{
		{"list, then decode", listThenDecode},
		{"raw transfer", rawTransfer},
		{"streamed", streamed},
		{"WatchList", watchList},
	}
	for _, p := range strings.Split(*pageSizes, ",") {
		size, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || size <= 0 {
			return fmt.Errorf("-pages: %q is not a page size", p)
		}
		ways = append(ways, struct {
			name string
			read func(context.Context, *kubernetes.Clientset) (int, error)
		}{fmt.Sprintf("pages of %d", size), func(ctx context.Context, cs *kubernetes.Clientset) (int, error) { return pipelined(ctx, cs, size) }})
	}
	times := make([][]time.Duration, len(ways))
	for r := range *rounds {
		for k := range ways {
			i := (r + k) % len(ways)
			t0 := time.Now()
			got, err := ways[i].read(ctx, cs)
			took := time.Since(t0)
			if err != nil {
				return fmt.Errorf("%s: %w", ways[i].name, err)
			}
			if got < *n {
				return fmt.Errorf("%s: %d objects, want at least %d", ways[i].name, got, *n)
			}
			times[i] = append(times[i], took)
			fmt.Printf("round %d %-20s %7.1f ms\n", r+1, ways[i].name, ms(took))
		}
	}
	base, raw := median(times[0]), median(times[1])
	fmt.Printf("\n%d ConfigMaps, median of %d rounds (÷ list, then decode; ÷ raw transfer):\n", *n, *rounds)
	for i, w := range ways {
		m := median(times[i])
		fmt.Printf("  %-20s %7.1f ms  %.2f×  %.2f×\n", w.name, ms(m), float64(m)/float64(base), float64(m)/float64(raw))
	}
	return nil
}

func seed(ctx context.Context, cs *kubernetes.Clientset, n int) error {
	const ns = "listtime"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	value := strings.Repeat("x", 256)
	errs := make([]error, 32)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += len(errs) {
				_, errs[w] = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"app": "listtime"}},
					Data:       map[string]string{"value": value},
				}, metav1.CreateOptions{})
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("creating ConfigMaps: %w", err)
		}
	}
	return nil
}

func listThenDecode(ctx context.Context, cs *kubernetes.Clientset) (int, error) {
	l, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// rawTransfer reads the list's protobuf body and discards it; it counts
// the objects as none, so it reports n itself.
func rawTransfer(ctx context.Context, cs *kubernetes.Clientset) (int, error) {
	body, err := cs.CoreV1().RESTClient().Get().Resource("configmaps").
		VersionedParams(&metav1.ListOptions{}, kubescheme.ParameterCodec).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	if _, err := io.Copy(io.Discard, body); err != nil {
		return 0, err
	}
	return *count, nil
}

func streamed(ctx context.Context, cs *kubernetes.Clientset) (int, error) {
	body, err := cs.CoreV1().RESTClient().Get().Resource("configmaps").
		VersionedParams(&metav1.ListOptions{}, kubescheme.ParameterCodec).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	l, err := protolist.Decode(body, protolist.Hooks{New: func() protolist.Item { return &corev1.ConfigMap{} }})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

func watchList(ctx context.Context, cs *kubernetes.Clientset) (int, error) {
	yes := true
	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	n := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			n++
		case watch.Bookmark:
			return n, nil
		case watch.Error:
			return n, fmt.Errorf("watch error: %v", ev.Object)
		}
	}
	return n, fmt.Errorf("the watch ended before its initial events did")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pipelined lists in pages of size as ctrlkit's informers list a
// built-in type (protolist.Pages), at most 3 requests out at once, each
// page decoded while read.
func pipelined(ctx context.Context, cs *kubernetes.Clientset, size int64) (int, error) {
	l, err := protolist.Pages(ctx, metav1.ListOptions{Limit: size}, 3,
		func(ctx context.Context, opts metav1.ListOptions, meta func(*metav1.ListMeta)) (runtime.Object, error) {
			body, err := cs.CoreV1().RESTClient().Get().Resource("configmaps").
				VersionedParams(&opts, kubescheme.ParameterCodec).Stream(ctx)
			if err != nil {
				return nil, err
			}
			defer body.Close()
			return protolist.Decode(body, protolist.Hooks{New: func() protolist.Item { return &corev1.ConfigMap{} }, Meta: meta})
		})
	if err != nil {
		return 0, err
	}
	return len(l.(*protolist.List).Items), nil
}
