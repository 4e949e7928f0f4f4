// Command website is an operator for a custom resource, Website
// (example.ctrlkit.io/v1alpha1): for each Website it runs a Deployment
// behind a Service, both owned by the Website and repaired when edited or
// deleted; it publishes the site as a route ConfigMap in the
// website-system namespace, which the garbage collector cannot tie to the
// Website, so a finalizer removes it; and it reports Ready and
// Progressing conditions in the Website's status.
//
// It shows ctrlkit on a CRD without a generated clientset: a typed
// informer for the custom type, owner-key and custom mapping, reads from
// listers only, server-side apply through ctrlkit's client for the
// children and the status (with apply configurations controller-gen
// generates for the Website), a merge patch for the finalizer, and events.
//
// With SHARD_NAMESPACE set, its replicas split the Websites among them
// (ShardingOptions).
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

const (
	// Name is the operator's name: its user agent, the source of its
	// events, the value of the app.kubernetes.io/managed-by label.
	Name = "website-operator"
	// Finalizer holds a Website's deletion until its route is removed.
	Finalizer = "example.ctrlkit.io/route"
	// RoutesNamespace holds one route ConfigMap per Website, named
	// <namespace>.<name>, for a shared front proxy to read. The namespace
	// must exist.
	RoutesNamespace = "website-system"
	// RouteAnnotation on a route names its Website as namespace/name.
	RouteAnnotation = "example.ctrlkit.io/website"
)

var websiteGVK = v1alpha1.GroupVersion.WithKind("Website")

func main() {
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	cfg, err := manager.GetConfig()
	if err == nil {
		err = run(manager.SignalContext(context.Background()), cfg, log)
	}
	if err != nil {
		log.Error(err, "operator failed")
		os.Exit(1)
	}
}

// run runs the operator against the cluster at cfg until ctx ends.
func run(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Name:      Name,
		Logger:    log,
		HTTPAddr:  os.Getenv("HTTP_ADDR"),
		Scheme:    scheme,
		Informers: InformerOptions(),
		Sharding:  ShardingOptions(os.Getenv("SHARD_NAMESPACE"), os.Getenv("POD_NAME")),
	})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Run(ctx)
}

// NewScheme returns a scheme with client-go's types and the Website types,
// for manager.Options.Scheme: informer.For finds the Website's
// kind there, and the event recorder refers to Websites through it.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// InformerOptions are the cache options the operator needs: ConfigMaps
// cached only from RoutesNamespace, the only ConfigMaps it reads (without
// this, every ConfigMap in the cluster would be cached).
func InformerOptions() informer.Options {
	return informer.Options{
		ByType: map[runtime.Object]informer.TypeOptions{
			&corev1.ConfigMap{}: {Namespaces: []string{RoutesNamespace}},
		},
	}
}

// ShardingOptions split the Websites among the replicas of the operator,
// each Website with its Deployment and Service, when namespace (the
// replicas' Leases go there; SHARD_NAMESPACE) is not empty: each replica
// caches and reconciles only its share. pod names the replica (POD_NAME,
// from the downward API; the hostname when empty). Nil, no sharding, when
// namespace is empty.
func ShardingOptions(namespace, pod string) *shard.Options {
	if namespace == "" {
		return nil
	}
	return &shard.Options{
		Namespace:   namespace,
		Identity:    pod,
		Controllers: []string{"website"},
		Primary:     []runtime.Object{&v1alpha1.Website{}},
		Children:    []runtime.Object{&appsv1.Deployment{}, &corev1.Service{}},
	}
}

// Setup declares the informers and adds the controller to mgr, whose
// scheme must come from NewScheme. It fails if the Website CRD is not
// installed.
//
// The Websites, Deployments and Services are declared in the manager's
// shard scope: sharded, each replica caches its share of them; without
// sharding, the scope is nil and they are declared as usual.
func Setup(mgr *manager.Manager) error {
	websites, err := informer.For[*v1alpha1.Website](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		return err
	}
	deployments, err := informer.For[*appsv1.Deployment](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		return err
	}
	services, err := informer.For[*corev1.Service](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		return err
	}
	configMaps, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return err
	}
	r := &Reconciler{
		Websites:    websites.Lister(),
		Deployments: deployments.Lister(),
		Services:    services.Lister(),
		ConfigMaps:  configMaps.Lister(),
		Client:      mgr.Client(),
		Events:      mgr.EventRecorder(Name),
		ShardLabels: mgr.ShardLabels(),
	}
	changed := []informer.Predicate{informer.ResourceVersionChanged()}
	owned := informer.OwnerKey(websiteGVK.GroupKind())
	_, err = mgr.AddController("website", r, manager.ControllerOptions{Workers: 2},
		// Spec changes and deletion (which sets deletionTimestamp and bumps
		// the generation), not the status writes the operator makes itself.
		manager.Watch{Source: websites, Predicates: []informer.Predicate{informer.GenerationChanged()}},
		// The Deployment's status drives the conditions; edits and deletes
		// of either child are drift to repair.
		manager.Watch{Source: deployments, Map: owned, Predicates: changed},
		manager.Watch{Source: services, Map: owned, Predicates: changed},
		// A route is not owned (owner references do not cross namespaces):
		// its annotation names the Website.
		manager.Watch{Source: configMaps, Map: routeWebsite, Predicates: changed},
	)
	return err
}

// routeWebsite maps a route ConfigMap to the Website its annotation names.
func routeWebsite(obj metav1.Object) []types.NamespacedName {
	if obj.GetNamespace() != RoutesNamespace {
		return nil
	}
	ns, name, ok := strings.Cut(obj.GetAnnotations()[RouteAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []types.NamespacedName{{Namespace: ns, Name: name}}
}
