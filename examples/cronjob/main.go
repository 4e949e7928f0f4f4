// Command cronjob is the kubebuilder book's CronJob operator ported from
// controller-runtime to ctrlkit: a CronJob (batch.tutorial.kubebuilder.io/v1)
// runs its JobTemplate as a Job on a cron schedule, keeps a bounded history
// of finished Jobs, and reports its running Jobs and last run in its
// status. It also serves the defaulting and validating webhooks of the
// tutorial when WEBHOOK_CERT_DIR names a directory with tls.crt and tls.key.
//
// See README.md for what maps to what, and ../../docs/migration.md.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// Name is the operator's name: its field manager and user agent.
const Name = "cronjob-operator"

func main() {
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
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
	opts := manager.Options{
		Name:     Name,
		Logger:   log,
		Scheme:   scheme,
		HTTPAddr: os.Getenv("HTTP_ADDR"),
	}
	if dir := os.Getenv("WEBHOOK_CERT_DIR"); dir != "" {
		cert, err := certs.NewFiles(certs.FilesOptions{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")})
		if err != nil {
			return err
		}
		opts.Webhook = &manager.WebhookOptions{Certificate: cert}
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := Setup(mgr, clock.RealClock{}); err != nil {
		return err
	}
	if mgr.Webhooks() != nil {
		if err := SetupWebhooks(mgr.Webhooks(), scheme); err != nil {
			return err
		}
	}
	return mgr.Run(ctx)
}

// NewScheme returns client-go's types and the CronJob types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := batchv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
