package main

import (
	"context"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// The paths of the webhooks, those of the tutorial's webhook
// configurations.
const (
	DefaultingPath = "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob"
	ValidatingPath = "/validate-batch-tutorial-kubebuilder-io-v1-cronjob"
)

// Registrar is where SetupWebhooks registers its handlers:
// a *webhook.Server (manager.Manager.Webhooks) in production.
type Registrar interface {
	Register(path string, h http.Handler) error
}

// SetupWebhooks registers the CronJob's defaulting and validating webhooks
// on srv; scheme must know the CronJob (NewScheme).
func SetupWebhooks(srv Registrar, scheme *runtime.Scheme) error {
	def, err := webhook.NewDefaulting[*batchv1.CronJob](scheme, &Defaulter{
		ConcurrencyPolicy:          batchv1.AllowConcurrent,
		Suspend:                    false,
		SuccessfulJobsHistoryLimit: 3,
		FailedJobsHistoryLimit:     1,
	})
	if err != nil {
		return err
	}
	val, err := webhook.NewValidating[*batchv1.CronJob](scheme, Validator{})
	if err != nil {
		return err
	}
	if err := srv.Register(DefaultingPath, def); err != nil {
		return err
	}
	return srv.Register(ValidatingPath, val)
}

// Defaulter fills in the optional fields of a CronJob's spec left unset,
// with its own values.
type Defaulter struct {
	ConcurrencyPolicy          batchv1.ConcurrencyPolicy
	Suspend                    bool
	SuccessfulJobsHistoryLimit int32
	FailedJobsHistoryLimit     int32
}

var _ webhook.Defaulter[*batchv1.CronJob] = (*Defaulter)(nil)

// Default implements webhook.Defaulter.
func (d *Defaulter) Default(ctx context.Context, cronJob *batchv1.CronJob) error {
	logr.FromContextOrDiscard(ctx).V(1).Info("Defaulting CronJob", "name", cronJob.Name)
	spec := &cronJob.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = d.ConcurrencyPolicy
	}
	if spec.Suspend == nil {
		spec.Suspend = new(d.Suspend)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = new(d.SuccessfulJobsHistoryLimit)
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = new(d.FailedJobsHistoryLimit)
	}
	return nil
}

// Validator admits a CronJob whose name leaves room for a Job's suffix and
// whose schedule parses.
type Validator struct{}

var _ webhook.Validator[*batchv1.CronJob] = Validator{}

// ValidateCreate implements webhook.Validator.
func (Validator) ValidateCreate(_ context.Context, cronJob *batchv1.CronJob) (webhook.Warnings, error) {
	return nil, validateCronJob(cronJob)
}

// ValidateUpdate implements webhook.Validator.
func (Validator) ValidateUpdate(_ context.Context, _, cronJob *batchv1.CronJob) (webhook.Warnings, error) {
	return nil, validateCronJob(cronJob)
}

// ValidateDelete implements webhook.Validator: every deletion is admitted.
func (Validator) ValidateDelete(context.Context, *batchv1.CronJob) (webhook.Warnings, error) {
	return nil, nil
}

// maxNameLength leaves room, in a Job's 63-character name, for the "-" and
// the ten-digit Unix time jobFor appends.
const maxNameLength = validation.DNS1035LabelMaxLength - 11

// validateCronJob returns an Invalid error listing what is wrong, or nil.
func validateCronJob(cronJob *batchv1.CronJob) error {
	var errs field.ErrorList
	if len(cronJob.Name) > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cronJob.Name, "must be no more than 52 characters"))
	}
	if _, err := cron.ParseStandard(cronJob.Spec.Schedule); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "schedule"), cronJob.Spec.Schedule, err.Error()))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(cronJobGVK.GroupKind(), cronJob.Name, errs)
}

var _ Registrar = (*webhook.Server)(nil)
