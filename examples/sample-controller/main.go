// Command sample-controller is kubernetes/sample-controller's Foo controller
// written on ctrlkit, to be read side by side with the classic: every Foo
// (samplecontroller.k8s.io/v1alpha1) gets a Deployment named by its
// spec.deploymentName, owned by the Foo and scaled to its spec.replicas,
// and the Foo's status.availableReplicas follows the Deployment's.
//
// Reads come from ctrlkit listers; Deployments are written with the
// clientset and the Foo status with the dynamic client, so no generated
// clientset, informers or listers are needed.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

func main() {
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	if err := run(manager.SignalContext(context.Background()), log); err != nil {
		log.Error(err, "Error running controller")
		os.Exit(1)
	}
}

func run(ctx context.Context, log logr.Logger) error {
	cfg, err := manager.GetConfig() // $KUBECONFIG, ~/.kube/config or in-cluster
	if err != nil {
		return err
	}
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Name:     controllerAgentName,
		Logger:   log,
		HTTPAddr: os.Getenv("HTTP_ADDR"), // e.g. ":8080" for /metrics, /healthz, /readyz
		Scheme:   scheme, Informers: informer.Options{Resync: 30 * time.Second},
	})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Run(ctx)
}
