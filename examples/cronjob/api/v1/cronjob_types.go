package v1

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CronJobSpec is the desired state of a CronJob.
type CronJobSpec struct {
	// Schedule says when to run, in the five fields of cron.
	// +kubebuilder:validation:MinLength=0
	// +required
	Schedule string `json:"schedule"`

	// StartingDeadlineSeconds is how late a run may start after its
	// scheduled time; a run that would start later is skipped.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// ConcurrencyPolicy says what happens when a run is due while an
	// earlier one is still active.
	// +optional
	// +kubebuilder:default:=Allow
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Suspend stops new runs while true; runs already started go on.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// JobTemplate is the Job each run creates.
	// +required
	JobTemplate batchv1.JobTemplateSpec `json:"jobTemplate"`

	// SuccessfulJobsHistoryLimit is how many completed Jobs to keep; nil
	// keeps them all.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit is how many failed Jobs to keep; nil keeps
	// them all.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// ConcurrencyPolicy is what to do with a run that is due while another is
// active. Empty means AllowConcurrent.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent starts the new run beside the active ones.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent skips the new run.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent deletes the active runs and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// CronJobStatus is the observed state of a CronJob, rebuilt from its Jobs
// at every reconcile.
type CronJobStatus struct {
	// Active refers to the Jobs still running.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Active []corev1.ObjectReference `json:"active,omitempty"`

	// LastScheduleTime is the scheduled time of the latest run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// Conditions describe the CronJob's state; the controller sets none.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CronJob runs a Job on a cron schedule.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type CronJob struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// +required
	Spec CronJobSpec `json:"spec"`

	// +optional
	Status CronJobStatus `json:"status,omitempty,omitzero"`
}

// CronJobList is a list of CronJobs.
//
// +kubebuilder:object:root=true
type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronJob `json:"items"`
}
