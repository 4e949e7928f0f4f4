package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const (
	namespaces  = 10
	objPrefix   = "cm-"
	podPrefix   = "pod-"
	halfLabel   = "bench.ctrlkit.io/half" // on the objects a half-cache run selects
	seedWorkers = 32                      // parallel creators
)

func nsName(i int) string  { return fmt.Sprintf("bench-%d", i%namespaces) }
func objName(i int) string { return fmt.Sprintf("%s%05d", objPrefix, i) }
func podName(i int) string { return fmt.Sprintf("%s%05d", podPrefix, i) }

// seeded is how long creating a batch of objects took.
type seeded struct {
	what     string
	from, to int
	took     time.Duration
}

func (s seeded) String() string {
	n := s.to - s.from
	return fmt.Sprintf("created %s %d–%d (%d) in %.1fs, %.0f/s with %d parallel creators",
		s.what, s.from, s.to-1, n, s.took.Seconds(), float64(n)/s.took.Seconds(), seedWorkers)
}

// seedNamespaces creates the namespaces; those that exist already are kept.
func seedNamespaces(ctx context.Context, c kubernetes.Interface) error {
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}

// createAll calls create(i) for every i in [from, to) with seedWorkers in
// parallel, and stops at the first error of each worker.
func createAll(from, to int, create func(i int) error) error {
	next := atomic.Int64{}
	next.Store(int64(from))
	errs := make([]error, seedWorkers)
	var wg sync.WaitGroup
	for w := range seedWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := create(i); err != nil && !apierrors.IsAlreadyExists(err) {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seedConfigMaps creates ConfigMaps from to to-1, spread over the
// namespaces, each with a 256-byte value; those below half carry
// halfLabel. Objects that exist already are kept.
func seedConfigMaps(ctx context.Context, c kubernetes.Interface, from, to, half int) (seeded, error) {
	value := strings.Repeat("x", 256)
	t := time.Now()
	err := createAll(from, to, func(i int) error {
		labels := map[string]string{"app": "bench"}
		if i < half {
			labels[halfLabel] = "true"
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: objName(i), Namespace: nsName(i), Labels: labels},
			Data:       map[string]string{"value": value},
		}
		if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	})
	return seeded{what: "ConfigMaps", from: from, to: to, took: time.Since(t)}, err
}

// podSize is the JSON size of a benchmark Pod as the API server returns it,
// with and without its managedFields.
type podSize struct{ full, stripped int }

// seedPods creates n Pods like benchPod, spread over the namespaces; those
// below n/2 carry halfLabel. envtest runs no scheduler, so they stay
// Pending. It returns the size of the first Pod as created.
func seedPods(ctx context.Context, c kubernetes.Interface, n int) (seeded, podSize, error) {
	var size podSize
	t := time.Now()
	err := createAll(0, n, func(i int) error {
		p, err := c.CoreV1().Pods(nsName(i)).Create(ctx, benchPod(i, n/2), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Pod %s/%s: %w", nsName(i), podName(i), err)
		}
		if i == 0 {
			size.full = jsonLen(p)
			p.ManagedFields = nil
			size.stripped = jsonLen(p)
		}
		return nil
	})
	return seeded{what: "Pods", from: 0, to: n, took: time.Since(t)}, size, err
}

func jsonLen(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// benchPod is a Pod of the size and shape of a real workload's: three
// containers with arguments, environment, ports, resources, probes and
// mounts, and the labels and annotations a Deployment and a monitoring
// stack put on it; about 4 KB as JSON without managedFields.
func benchPod(i, half int) *corev1.Pod {
	labels := map[string]string{
		"app": "bench", "app.kubernetes.io/name": "bench-app", "app.kubernetes.io/instance": "bench-app-prod",
		"app.kubernetes.io/version": "1.24.3", "app.kubernetes.io/component": "backend",
		"app.kubernetes.io/part-of": "bench-platform", "pod-template-hash": "7f9c6d5b8d", "team": "controllers",
	}
	if i < half {
		labels[halfLabel] = "true"
	}
	annotations := map[string]string{
		"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics",
		"kubectl.kubernetes.io/default-container": "app",
		"bench.ctrlkit.io/config-hash":            "sha256:" + strings.Repeat("3f", 32),
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	var containers []corev1.Container
	for ci, name := range []string{"app", "sidecar", "metrics"} {
		port := int32(8080 + ci)
		var env []corev1.EnvVar
		for e := range 5 {
			env = append(env, corev1.EnvVar{Name: fmt.Sprintf("BENCH_%s_SETTING_%d", strings.ToUpper(name), e), Value: fmt.Sprintf("value-%d-%d", i, e)})
		}
		containers = append(containers, corev1.Container{
			Name:         name,
			Image:        "registry.example.com/bench/" + name + ":1.24.3",
			Args:         []string{fmt.Sprintf("--port=%d", port), "--log-level=info", "--config=/etc/bench/config.yaml"},
			Env:          env,
			Ports:        []corev1.ContainerPort{{Name: "http-" + name, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Resources:    res,
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/bench", ReadOnly: true}, {Name: "data", MountPath: "/data"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(port)}}, PeriodSeconds: 10},
		})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: nsName(i), Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: containers,
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "bench-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}
