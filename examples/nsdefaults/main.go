// Command nsdefaults is an operator that gives every Namespace labelled
// ctrlkit.io/defaults=true a ConfigMap named "defaults" that it owns, keeps in
// shape if edited, and recreates if deleted.
//
// It shows the core loop of ctrlkit on built-in types: typed informers,
// a predicate, owner-key mapping, listers for reads, ctrlkit's client for
// writes, and events.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

const (
	// Label marks the namespaces this operator serves.
	Label = "ctrlkit.io/defaults"
	// ConfigMapName is the name of the ConfigMap it keeps in each.
	ConfigMapName = "defaults"
)

// desiredData is what every defaults ConfigMap holds.
var desiredData = map[string]string{"log-level": "info", "owner": "nsdefaults"}

func main() {
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	if err := run(manager.SignalContext(context.Background()), log); err != nil {
		log.Error(err, "operator failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, log logr.Logger) error {
	cfg, err := manager.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{Name: "nsdefaults", Logger: log, HTTPAddr: os.Getenv("HTTP_ADDR")})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Run(ctx)
}

// Setup declares the informers and adds the controller to mgr.
func Setup(mgr *manager.Manager) error {
	namespaces, err := informer.For[*corev1.Namespace](mgr.Cache())
	if err != nil {
		return err
	}
	configMaps, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return err
	}
	r := &Reconciler{
		Namespaces: namespaces.Lister(),
		ConfigMaps: configMaps.Lister(),
		Client:     mgr.Client(),
		Events:     mgr.EventRecorder("nsdefaults"),
	}
	_, err = mgr.AddController("nsdefaults", r, manager.ControllerOptions{Workers: 2},
		manager.Watch{Source: namespaces, Predicates: []informer.Predicate{informer.LabelsChanged()}},
		manager.Watch{
			Source:     configMaps,
			Map:        informer.ClusterOwnerKey(schema.GroupKind{Kind: "Namespace"}),
			Predicates: []informer.Predicate{informer.ResourceVersionChanged()},
		},
	)
	return err
}

// Reconciler keeps the defaults ConfigMap of one Namespace.
type Reconciler struct {
	Namespaces informer.Lister[*corev1.Namespace]
	ConfigMaps informer.Lister[*corev1.ConfigMap]
	Client     *client.Client
	Events     record.EventRecorder
}

// Reconcile implements reconcile.Reconciler. The request names a Namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	ns, err := r.Namespaces.Get("", req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil // gone; its ConfigMap goes with it
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if ns.Labels[Label] != "true" || ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}

	cm, err := r.ConfigMaps.Get(ns.Name, ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:            ConfigMapName,
				Namespace:       ns.Name,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ns, corev1.SchemeGroupVersion.WithKind("Namespace"))},
			},
			Data: maps.Clone(desiredData),
		}
		if err := client.IgnoreAlreadyExists(r.Client.Create(ctx, cm)); err != nil {
			return reconcile.Result{}, fmt.Errorf("creating ConfigMap %s/%s: %w", ns.Name, ConfigMapName, err)
		}
		log.Info("Created defaults ConfigMap")
		r.Events.Event(ns, corev1.EventTypeNormal, "Created", "created ConfigMap "+ConfigMapName)
	case err != nil:
		return reconcile.Result{}, err
	case !maps.Equal(cm.Data, desiredData):
		cm = cm.DeepCopy() // cached objects are shared: never mutate them
		cm.Data = maps.Clone(desiredData)
		if err := r.Client.Update(ctx, cm); err != nil {
			return reconcile.Result{}, fmt.Errorf("repairing ConfigMap %s/%s: %w", ns.Name, ConfigMapName, err)
		}
		log.Info("Repaired defaults ConfigMap")
		r.Events.Event(ns, corev1.EventTypeNormal, "Repaired", "restored ConfigMap "+ConfigMapName)
	}
	return reconcile.Result{}, nil
}
