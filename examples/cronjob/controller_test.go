package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	kbatch "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
)

// The tutorial's timeouts and poll interval. Its Consistently runs for 10s;
// 2s here keeps the suite short and still spans several reconciles' worth
// of polls.
const (
	timeout  = 10 * time.Second
	duration = 2 * time.Second
	interval = 250 * time.Millisecond
)

// podTemplate is the least a Job's template needs to be admitted.
func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers:    []corev1.Container{{Name: "test-container", Image: "test-image"}},
		RestartPolicy: corev1.RestartPolicyOnFailure,
	}}
}

// The tutorial's controller test: a Job controlled by a CronJob shows in
// the CronJob's status.active.
func TestStatusActiveListsNewJobs(t *testing.T) {
	const (
		cronJobName = "test-cronjob"
		jobName     = "test-job"
	)
	ns := newNamespace(t, "cronjob") // the tutorial uses "default"
	startOperator(t, ns, clock.RealClock{})
	ctx := t.Context()

	cronJob := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: cronJobName, Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule:    "1 * * * *",
			JobTemplate: kbatch.JobTemplateSpec{Spec: kbatch.JobSpec{Template: podTemplate()}},
		},
	}
	if err := admin.Create(ctx, cronJob); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: cronJobName}
	created := &batchv1.CronJob{}
	eventually(t, timeout, interval, "the CronJob", func() error { return admin.GetFromServer(ctx, key, created) })
	if created.Spec.Schedule != "1 * * * *" {
		t.Fatalf("schedule = %q, want %q", created.Spec.Schedule, "1 * * * *")
	}

	// No Job yet, so none active.
	consistently(t, duration, interval, "status.active with no Job", func() error {
		if err := admin.GetFromServer(ctx, key, created); err != nil {
			return err
		}
		if n := len(created.Status.Active); n != 0 {
			return fmt.Errorf("%d active Jobs, want 0", n)
		}
		return nil
	})

	job := &kbatch.Job{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: ns},
		Spec:       kbatch.JobSpec{Template: podTemplate()},
		// Dropped by the API server (status is a subresource), as in the
		// tutorial: the Job has no condition, so it counts as active.
		Status: kbatch.JobStatus{Active: 2},
	}
	job.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(created, cronJobGVK)})
	if err := admin.Create(ctx, job); err != nil {
		t.Fatal(err)
	}

	eventually(t, timeout, interval, "our Job in status.active", func() error {
		if err := admin.GetFromServer(ctx, key, created); err != nil {
			return err
		}
		var names []string
		for _, ref := range created.Status.Active {
			names = append(names, ref.Name)
		}
		if !slices.Equal(names, []string{jobName}) {
			return fmt.Errorf("active Jobs %q, want [%q]", names, jobName)
		}
		return nil
	})
}

// Not in the tutorial: with the clock past a scheduled time, the operator
// creates that run's Job, named after it, annotated with it and controlled
// by the CronJob; the status then records it as the last run.
func TestScheduledRunCreatesJob(t *testing.T) {
	ns := newNamespace(t, "cronjob-run")
	ctx := t.Context()
	cronJob := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute", Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule:    "* * * * *",
			JobTemplate: kbatch.JobTemplateSpec{Spec: kbatch.JobSpec{Template: podTemplate()}},
		},
	}
	if err := admin.Create(ctx, cronJob); err != nil {
		t.Fatal(err)
	}
	// Two minutes after creation, one run at least is due; the latest is
	// the one the operator starts.
	now := cronJob.CreationTimestamp.Add(2 * time.Minute)
	want := now.Truncate(time.Minute)
	startOperator(t, ns, clocktesting.NewFakePassiveClock(now))

	jobKey := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("every-minute-%d", want.Unix())}
	job := &kbatch.Job{}
	eventually(t, timeout, interval, "the run's Job", func() error { return admin.GetFromServer(ctx, jobKey, job) })
	if got := job.Annotations[ScheduledTimeAnnotation]; got != want.UTC().Format(time.RFC3339) && got != want.Format(time.RFC3339) {
		t.Errorf("%s = %q, want %s", ScheduledTimeAnnotation, got, want.Format(time.RFC3339))
	}
	owner := metav1.GetControllerOf(job)
	if owner == nil || owner.UID != cronJob.UID || owner.Kind != "CronJob" {
		t.Errorf("controller of the Job = %+v, want the CronJob %s", owner, cronJob.UID)
	}
	eventually(t, timeout, interval, "status.lastScheduleTime", func() error {
		got := &batchv1.CronJob{}
		if err := admin.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: cronJob.Name}, got); err != nil {
			return err
		}
		if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(want) {
			return fmt.Errorf("lastScheduleTime = %v, want %v", got.Status.LastScheduleTime, want)
		}
		return nil
	})
}
