// Command demo shows ctrlkit reconciling a custom resource: it starts a
// local control plane (envtest's kube-apiserver and etcd, unless
// $KUBECONFIG names a cluster), installs the Website CRD, runs the website
// example operator against it as a separate process, makes changes an
// operator must react to, and prints what the operator did. It exits 0
// when every step was observed, or 1 naming the step that was not.
// DEMO_KEEP=1 keeps the control plane and operator running, with a
// Website to play with.
//
// Run it through `make demo`, which builds the binaries it needs and sets
// OPERATOR (the operator binary) and CRDS (the CRD manifests directory).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// What the website operator uses; see examples/website.
const (
	routesNamespace = "website-system"
	finalizer       = "example.ctrlkit.io/route"
	component       = "website-operator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func run() error {
	operator, crds := os.Getenv("OPERATOR"), os.Getenv("CRDS")
	if operator == "" || crds == "" {
		return errors.New("OPERATOR and CRDS must be set: run `make demo`, which builds the operator binary")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	kubeconfig := os.Getenv("KUBECONFIG")
	local := kubeconfig == ""
	if local {
		say("Starting a local control plane (kube-apiserver + etcd from %s)", os.Getenv("KUBEBUILDER_ASSETS"))
		env := &envtest.Environment{}
		if _, err := env.Start(); err != nil {
			return fmt.Errorf("starting the control plane: %w", err)
		}
		defer func() { _ = env.Stop() }()
		user, err := env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return err
		}
		raw, err := user.KubeConfig()
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "ctrlkit-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
			return err
		}
	} else {
		say("Using the cluster in KUBECONFIG=%s", kubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	say("Installing the Website CRD from %s", crds)
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the CRD: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{
		Scheme:       scheme,
		Mapper:       restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
		FieldManager: "demo",
	})
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("demo-%d", time.Now().Unix()%100000)
	for _, n := range []string{routesNamespace, ns} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}

	say("Starting the website operator (%s)\n"+
		"    (a \"the object has been modified\" conflict in its log now and then is expected: its cache\n"+
		"    lags behind its own writes, and the retry, after backoff, reads a fresher one)", operator)
	cmd := exec.Command(operator)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	// Its own process group: a Ctrl-C at the terminal reaches the demo
	// only, which stops the operator with one SIGTERM (a second signal
	// would make the operator exit at once, with status 1).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	logDone := make(chan struct{})
	go func() { defer close(logDone); prefix(logs, "    operator | ") }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	d := &demo{kube: kube, c: c, ns: ns, name: "shop", samples: filepath.Join(crds, "..", "samples")}
	var oldService *corev1.Service
	rollout := step{
		what: "the Deployment rolls out (no Deployment controller runs on this control plane: the demo plays it and writes the Deployment's status); expect Ready=True, Progressing=False",
		do:   d.rollOut,
		want: d.ready(metav1.ConditionTrue),
		show: d.showStatus,
	}
	if !local {
		rollout.what, rollout.do, rollout.timeout = "wait for the Deployment to roll out; expect Ready=True, Progressing=False", nil, 3*time.Minute
	}
	steps := []step{
		{
			what: fmt.Sprintf("create Website %s/%s from config/samples/website.yaml (2 replicas of nginx:1.27 on port 80); expect a Deployment and a Service it controls, a route in %s, and a status waiting for the rollout",
				ns, d.name, routesNamespace),
			do:   d.createSample,
			want: all(d.deploymentIs(2, "nginx:1.27", 80), d.serviceIs(80), d.routeIs(80), d.observed(1)),
			show: d.showAll,
		},
		rollout,
		{
			what: "change the Website to 3 replicas of nginx:1.28 on port 8080; expect the Deployment, Service and route to follow, and status.observedGeneration 2",
			do: d.updateSpec(func(s *v1alpha1.WebsiteSpec) {
				s.Replicas, s.Image, s.Port = ptr.To[int32](3), "nginx:1.28", 8080
			}),
			want: all(d.deploymentIs(3, "nginx:1.28", 8080), d.serviceIs(8080), d.routeIs(8080), d.observed(2), d.notReadyIf(local)),
			show: d.showAll,
		},
		rollout,
		{
			what: "scale the Deployment to 7 by hand; expect the operator to repair it to 3",
			do:   d.scaleDeployment(7),
			want: d.deploymentIs(3, "nginx:1.28", 8080),
		},
		{
			what: "delete the Service; expect the operator to recreate it",
			do: func(ctx context.Context) (err error) {
				if oldService, err = kube.CoreV1().Services(ns).Get(ctx, d.name, metav1.GetOptions{}); err != nil {
					return err
				}
				return kube.CoreV1().Services(ns).Delete(ctx, d.name, metav1.DeleteOptions{})
			},
			want: func(ctx context.Context) error {
				s, err := kube.CoreV1().Services(ns).Get(ctx, d.name, metav1.GetOptions{})
				if err == nil && s.UID == oldService.UID {
					return errors.New("still the old Service")
				}
				if err != nil {
					return err
				}
				return d.serviceIs(8080)(ctx)
			},
			show: d.showService,
		},
		{
			what: fmt.Sprintf("delete the Website; expect its finalizer to hold it until the operator has deleted the route in %s (no owner reference can reach across namespaces), then the Website to go", routesNamespace),
			do: func(ctx context.Context) error {
				return c.Delete(ctx, &v1alpha1.Website{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.name}}, client.DeleteOptions{})
			},
			want: all(d.routeGone, d.websiteGone),
			show: func(ctx context.Context) {
				fmt.Printf("    route %s/%s: deleted; Website %s/%s: deleted\n", routesNamespace, d.routeName(), ns, d.name)
				if local {
					fmt.Println("    (no garbage collector runs on this control plane: on a cluster the Deployment and Service, which the Website controls, would go too)")
				}
			},
		},
	}
	for i, s := range steps {
		say("Step %d: %s", i+1, s.what)
		start := time.Now()
		if s.do != nil {
			if err := s.do(ctx); err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		timeout := s.timeout
		if timeout == 0 {
			timeout = 30 * time.Second
		}
		var last error
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			last = s.want(ctx)
			return last == nil, nil
		})
		if err != nil {
			return fmt.Errorf("step %d (%s): not observed within %v: %v (%w)", i+1, s.what, timeout, last, err)
		}
		fmt.Printf("    done in %v\n", time.Since(start).Round(time.Millisecond))
		if s.show != nil {
			s.show(ctx)
		}
	}

	say("Events the operator recorded")
	evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=" + component})
	if err != nil {
		return err
	}
	slices.SortFunc(evs.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	for _, e := range evs.Items {
		fmt.Printf("    %-8s %-12s %s/%s: %s (x%d)\n", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, max(e.Count, 1))
	}

	if os.Getenv("DEMO_KEEP") != "" {
		if err := d.createSample(ctx); err != nil {
			return fmt.Errorf("re-creating the sample Website to keep: %w", err)
		}
		say("DEMO_KEEP is set: the control plane and operator keep running, with Website %s/%s. Try:\n"+
			"    export KUBECONFIG=%s\n    kubectl get websites,deployments,services -n %s\n    kubectl get configmaps -n %s\n"+
			"Press Ctrl-C to stop.", ns, d.name, kubeconfig, ns, routesNamespace)
		<-ctx.Done()
	}

	say("Stopping the operator (SIGTERM) and waiting for a graceful exit")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		<-logDone
		if err != nil {
			return fmt.Errorf("operator exited with %w", err)
		}
	case <-time.After(45 * time.Second):
		return errors.New("operator did not exit within 45s of SIGTERM")
	}
	say("Demo complete: the website operator\n" +
		"    - created a Deployment and a Service it controls, and a route outside the owner tree,\n" +
		"    - reported the rollout in status conditions Ready and Progressing for each generation,\n" +
		"    - followed a spec change to every child,\n" +
		"    - repaired a hand-scaled Deployment and recreated a deleted Service,\n" +
		"    - removed the route through its finalizer when the Website was deleted,\n" +
		"    - and shut down cleanly")
	return nil
}

// step is one change the demo makes and what it then waits for: want
// returns nil once the operator has done its part.
type step struct {
	what    string
	do      func(context.Context) error // nil: only wait
	want    func(context.Context) error
	show    func(context.Context) // prints what the operator wrote; optional
	timeout time.Duration         // 0: 30s
}

// all is a want that holds when every one of wants does.
func all(wants ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, w := range wants {
			if err := w(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// demo holds the clients and the Website the steps work on.
type demo struct {
	kube     kubernetes.Interface
	c        *client.Client // the Website's writes and reads
	ns, name string
	samples  string
}

func (d *demo) website(ctx context.Context) (*v1alpha1.Website, error) {
	site := &v1alpha1.Website{}
	return site, d.c.GetFromServer(ctx, types.NamespacedName{Namespace: d.ns, Name: d.name}, site)
}

func (d *demo) routeName() string { return d.ns + "." + d.name }

func (d *demo) createSample(ctx context.Context) error {
	f, err := os.Open(filepath.Join(d.samples, "website.yaml"))
	if err != nil {
		return err
	}
	defer f.Close()
	site := &v1alpha1.Website{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(site); err != nil {
		return fmt.Errorf("reading the sample: %w", err)
	}
	site.Namespace, site.Name = d.ns, d.name
	return d.c.Create(ctx, site)
}

func (d *demo) updateSpec(change func(*v1alpha1.WebsiteSpec)) func(context.Context) error {
	return func(ctx context.Context) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes the Website too
			site, err := d.website(ctx)
			if err != nil {
				return err
			}
			change(&site.Spec)
			return d.c.Update(ctx, site)
		})
	}
}

func (d *demo) scaleDeployment(n int32) func(context.Context) error {
	return func(ctx context.Context) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			dep.Spec.Replicas = ptr.To(n)
			_, err = d.kube.AppsV1().Deployments(d.ns).Update(ctx, dep, metav1.UpdateOptions{})
			return err
		})
	}
}

// rollOut plays the Deployment controller: it reports every replica of the
// current generation updated and available.
func (d *demo) rollOut(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n := ptr.Deref(dep.Spec.Replicas, 1)
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		_, err = d.kube.AppsV1().Deployments(d.ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
		return err
	})
}

// controlled checks that obj is controlled by the current Website.
func (d *demo) controlled(ctx context.Context, obj metav1.Object) error {
	site, err := d.website(ctx)
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != site.UID {
		return fmt.Errorf("%s is not controlled by Website %s", obj.GetName(), site.Name)
	}
	return nil
}

func (d *demo) deploymentIs(replicas int32, image string, port int32) func(context.Context) error {
	return func(ctx context.Context) error {
		dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := dep.Spec.Template.Spec.Containers
		if ptr.Deref(dep.Spec.Replicas, 0) != replicas || len(c) != 1 || c[0].Image != image || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != port {
			return fmt.Errorf("the Deployment has %d replicas of %+v, want %d of %s on port %d", ptr.Deref(dep.Spec.Replicas, 0), c, replicas, image, port)
		}
		return d.controlled(ctx, dep)
	}
}

func (d *demo) serviceIs(port int32) func(context.Context) error {
	return func(ctx context.Context) error {
		svc, err := d.kube.CoreV1().Services(d.ns).Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != port {
			return fmt.Errorf("the Service ports %+v, want %d", svc.Spec.Ports, port)
		}
		return d.controlled(ctx, svc)
	}
}

func (d *demo) routeIs(port int32) func(context.Context) error {
	return func(ctx context.Context) error {
		cm, err := d.kube.CoreV1().ConfigMaps(routesNamespace).Get(ctx, d.routeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("http://%s.%s.svc:%d", d.name, d.ns, port); cm.Data["url"] != want {
			return fmt.Errorf("route url %q, want %q", cm.Data["url"], want)
		}
		return nil
	}
}

// observed checks that the status describes generation gen, with its
// conditions set.
func (d *demo) observed(gen int64) func(context.Context) error {
	return func(ctx context.Context) error {
		site, err := d.website(ctx)
		if err != nil {
			return err
		}
		if site.Generation != gen || site.Status.ObservedGeneration != gen {
			return fmt.Errorf("generation %d, observedGeneration %d, want both %d", site.Generation, site.Status.ObservedGeneration, gen)
		}
		for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionProgressing} {
			if c := objects.FindCondition(site.Status.Conditions, t); c == nil || c.ObservedGeneration != gen {
				return fmt.Errorf("condition %s is %+v, want one for generation %d", t, c, gen)
			}
		}
		if !objects.HasFinalizer(site, finalizer) {
			return fmt.Errorf("finalizer %s missing", finalizer)
		}
		return nil
	}
}

// notReadyIf checks, when cond holds, that Ready is False: on the local
// control plane nothing rolls a new generation out until the demo does.
func (d *demo) notReadyIf(cond bool) func(context.Context) error {
	if !cond {
		return func(context.Context) error { return nil }
	}
	return d.ready(metav1.ConditionFalse)
}

func (d *demo) ready(status metav1.ConditionStatus) func(context.Context) error {
	return func(ctx context.Context) error {
		site, err := d.website(ctx)
		if err != nil {
			return err
		}
		if c := objects.FindCondition(site.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != status || c.ObservedGeneration != site.Generation {
			return fmt.Errorf("the Ready is %+v, want %s", c, status)
		}
		return nil
	}
}

func (d *demo) routeGone(ctx context.Context) error {
	_, err := d.kube.CoreV1().ConfigMaps(routesNamespace).Get(ctx, d.routeName(), metav1.GetOptions{})
	if err == nil {
		return fmt.Errorf("route %s still exists", d.routeName())
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (d *demo) websiteGone(ctx context.Context) error {
	site, err := d.website(ctx)
	if err == nil {
		return fmt.Errorf("the Website %s still exists, finalizers %v", site.Name, site.Finalizers)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (d *demo) showAll(ctx context.Context) {
	d.showDeployment(ctx)
	d.showService(ctx)
	d.showRoute(ctx)
	d.showStatus(ctx)
}

func (d *demo) showDeployment(ctx context.Context) {
	dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		fmt.Println("    deployment:", err)
		return
	}
	c := dep.Spec.Template.Spec.Containers[0]
	fmt.Printf("    deployment %s/%s: replicas=%d image=%s port=%d controller=%s\n",
		d.ns, dep.Name, ptr.Deref(dep.Spec.Replicas, 0), c.Image, c.Ports[0].ContainerPort, controllerOf(dep))
}

func (d *demo) showService(ctx context.Context) {
	svc, err := d.kube.CoreV1().Services(d.ns).Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		fmt.Println("    service:", err)
		return
	}
	p := svc.Spec.Ports[0]
	fmt.Printf("    service %s/%s: port=%d->%s clusterIP=%s controller=%s\n", d.ns, svc.Name, p.Port, p.TargetPort.String(), svc.Spec.ClusterIP, controllerOf(svc))
}

func (d *demo) showRoute(ctx context.Context) {
	cm, err := d.kube.CoreV1().ConfigMaps(routesNamespace).Get(ctx, d.routeName(), metav1.GetOptions{})
	if err != nil {
		fmt.Println("    route:", err)
		return
	}
	fmt.Printf("    route configmap %s/%s: url=%s owners=%d (outside the owner tree)\n", routesNamespace, cm.Name, cm.Data["url"], len(cm.OwnerReferences))
}

func (d *demo) showStatus(ctx context.Context) {
	site, err := d.website(ctx)
	if err != nil {
		fmt.Println("    website:", err)
		return
	}
	fmt.Printf("    website %s/%s: generation=%d observedGeneration=%d availableReplicas=%d url=%s finalizers=%v\n",
		d.ns, site.Name, site.Generation, site.Status.ObservedGeneration, site.Status.AvailableReplicas, site.Status.URL, site.Finalizers)
	for _, c := range site.Status.Conditions {
		fmt.Printf("      %-11s %-5s %-15s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
}

func controllerOf(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	return "none"
}

// prefix copies r to stdout line by line, with p in front, keeping only the
// operator's info-level lines short enough to read.
func prefix(r io.Reader, p string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if slices.ContainsFunc([]string{"W1", "I1", "E1"}, func(k string) bool { return strings.HasPrefix(line, k) }) {
			continue // klog noise from client-go
		}
		fmt.Println(p + line)
	}
}
