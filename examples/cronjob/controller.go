package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"github.com/robfig/cron/v3"
	kbatch "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// ScheduledTimeAnnotation on a Job holds the scheduled time of its run, in
// RFC 3339: the status's lastScheduleTime is rebuilt from it.
const ScheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// JobOwnerIndex files Jobs under the name of the CronJob that controls
// them, in their namespace (Lister.ByIndexInNamespace).
const JobOwnerIndex = "cronjob"

var (
	cronJobGVK = batchv1.GroupVersion.WithKind("CronJob")
	jobGVK     = kbatch.SchemeGroupVersion.WithKind("Job")
)

// Reconciler runs a CronJob's Jobs. It reads CronJobs and Jobs from
// listers and writes through the client.
type Reconciler struct {
	CronJobs informer.Lister[*batchv1.CronJob]
	Jobs     informer.Lister[*kbatch.Job]
	Client   *client.Client
	// Clock tells the time; tests pass a fake one.
	Clock clock.PassiveClock
}

// Setup declares the informers, the Jobs' owner index, and the controller
// on mgr, whose scheme must come from NewScheme. clk is the reconciler's
// clock.
func Setup(mgr *manager.Manager, clk clock.PassiveClock) error {
	cronJobs, err := informer.For[*batchv1.CronJob](mgr.Cache())
	if err != nil {
		return err
	}
	jobs, err := informer.For[*kbatch.Job](mgr.Cache())
	if err != nil {
		return err
	}
	if err := informer.AddIndex(jobs, JobOwnerIndex, jobOwner); err != nil {
		return err
	}
	r := &Reconciler{
		CronJobs: cronJobs.Lister(),
		Jobs:     jobs.Lister(),
		Client:   mgr.Client(),
		Clock:    clk,
	}
	_, err = mgr.AddController("cronjob", r, manager.ControllerOptions{},
		manager.Watch{Source: cronJobs},
		manager.Watch{Source: jobs, Map: informer.OwnerKey(cronJobGVK.GroupKind())},
	)
	return err
}

// jobOwner is the index function of JobOwnerIndex.
func jobOwner(job *kbatch.Job) []string {
	owner := metav1.GetControllerOfNoCopy(job)
	if owner == nil || owner.APIVersion != batchv1.GroupVersion.String() || owner.Kind != cronJobGVK.Kind {
		return nil
	}
	return []string{owner.Name}
}

// Reconcile implements reconcile.Reconciler; the request names a CronJob.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	cached, err := r.CronJobs.Get(req.Namespace, req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil // deleted; the garbage collector removes its Jobs
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	cronJob := cached.DeepCopy() // cached objects are shared
	children, err := r.Jobs.ByIndexInNamespace(req.Namespace, JobOwnerIndex, req.Name)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("listing child Jobs: %w", err)
	}

	var active, successful, failed []*kbatch.Job
	var mostRecent *time.Time
	for _, job := range children {
		switch jobFinished(job) {
		case "":
			active = append(active, job)
		case kbatch.JobFailed:
			failed = append(failed, job)
		case kbatch.JobComplete:
			successful = append(successful, job)
		}
		scheduled, err := scheduledTime(job)
		if err != nil {
			log.Error(err, "Unparseable scheduled time on child Job", "job", job.Name)
			continue
		}
		if scheduled != nil && (mostRecent == nil || mostRecent.Before(*scheduled)) {
			mostRecent = scheduled
		}
	}

	cronJob.Status.LastScheduleTime = nil
	if mostRecent != nil {
		cronJob.Status.LastScheduleTime = &metav1.Time{Time: *mostRecent}
	}
	cronJob.Status.Active = nil
	for _, job := range active {
		cronJob.Status.Active = append(cronJob.Status.Active, corev1.ObjectReference{
			APIVersion: jobGVK.GroupVersion().String(), Kind: jobGVK.Kind,
			Namespace: job.Namespace, Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion,
		})
	}
	log.V(1).Info("Counted child Jobs", "active", len(active), "successful", len(successful), "failed", len(failed))
	if err := r.Client.Status().Update(ctx, cronJob); err != nil {
		return reconcile.Result{}, fmt.Errorf("updating status: %w", err)
	}

	// Best effort: a Job that fails to go is deleted at a later reconcile.
	r.pruneHistory(ctx, failed, cronJob.Spec.FailedJobsHistoryLimit)
	r.pruneHistory(ctx, successful, cronJob.Spec.SuccessfulJobsHistoryLimit)

	if cronJob.Spec.Suspend != nil && *cronJob.Spec.Suspend {
		log.V(1).Info("Suspended, not scheduling")
		return reconcile.Result{}, nil
	}

	now := r.Clock.Now()
	missed, next, err := nextSchedule(cronJob, now)
	if err != nil {
		// Retrying cannot help: wait for the spec to change.
		log.Error(err, "Cannot compute the schedule")
		return reconcile.Result{}, nil
	}
	scheduled := reconcile.Result{RequeueAfter: next.Sub(now)}
	log = log.WithValues("now", now, "nextRun", next)
	if missed.IsZero() {
		log.V(1).Info("No run due, waiting for the next")
		return scheduled, nil
	}
	log = log.WithValues("currentRun", missed)
	if d := cronJob.Spec.StartingDeadlineSeconds; d != nil && missed.Add(time.Duration(*d)*time.Second).Before(now) {
		log.V(1).Info("Missed the starting deadline of the last run, waiting for the next")
		return scheduled, nil
	}

	switch cronJob.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(active) > 0 {
			log.V(1).Info("Concurrency policy forbids a run beside the active ones", "active", len(active))
			return scheduled, nil
		}
	case batchv1.ReplaceConcurrent:
		for _, job := range active {
			err := r.Client.Delete(ctx, job, client.DeleteOptions{PropagationPolicy: metav1.DeletePropagationBackground})
			if client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting active Job %s: %w", job.Name, err)
			}
		}
	}

	job, err := jobFor(cronJob, missed)
	if err != nil {
		log.Error(err, "Cannot build the Job from the template")
		return scheduled, nil
	}
	if err := r.Client.Create(ctx, job); err != nil {
		return reconcile.Result{}, fmt.Errorf("creating Job %s: %w", job.Name, err)
	}
	log.V(1).Info("Created Job", "job", job.Name)
	return scheduled, nil
}

// pruneHistory deletes the oldest of jobs (by start time, unstarted first)
// beyond limit; nil keeps them all. Failures are logged, not retried.
func (r *Reconciler) pruneHistory(ctx context.Context, jobs []*kbatch.Job, limit *int32) {
	if limit == nil {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	sort.Slice(jobs, func(i, j int) bool {
		if jobs[i].Status.StartTime == nil {
			return jobs[j].Status.StartTime != nil
		}
		return jobs[i].Status.StartTime.Before(jobs[j].Status.StartTime)
	})
	for i, job := range jobs {
		if int32(i) >= int32(len(jobs))-*limit {
			break
		}
		err := r.Client.Delete(ctx, job, client.DeleteOptions{PropagationPolicy: metav1.DeletePropagationBackground})
		if client.IgnoreNotFound(err) != nil {
			log.Error(err, "Cannot delete old Job", "job", job.Name)
			continue
		}
		log.Info("Deleted old Job", "job", job.Name)
	}
}

// jobFinished returns JobComplete or JobFailed when job has that condition
// true, and "" while it runs.
func jobFinished(job *kbatch.Job) kbatch.JobConditionType {
	for _, c := range job.Status.Conditions {
		if (c.Type == kbatch.JobComplete || c.Type == kbatch.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// scheduledTime reads ScheduledTimeAnnotation; nil when job has none.
func scheduledTime(job *kbatch.Job) (*time.Time, error) {
	raw := job.Annotations[ScheduledTimeAnnotation]
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// maxMissedRuns bounds the runs nextSchedule walks through: more means a
// wrong clock or a controller down for long, and a startingDeadlineSeconds
// is needed.
const maxMissedRuns = 100

// nextSchedule returns the latest run due at or before now that has not
// run (zero if none), counting from the last run or the CronJob's
// creation, no earlier than the starting deadline, and the next run after
// now.
func nextSchedule(cronJob *batchv1.CronJob, now time.Time) (missed, next time.Time, err error) {
	sched, err := cron.ParseStandard(cronJob.Spec.Schedule)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("unparseable schedule %q: %w", cronJob.Spec.Schedule, err)
	}
	earliest := cronJob.CreationTimestamp.Time
	if cronJob.Status.LastScheduleTime != nil {
		earliest = cronJob.Status.LastScheduleTime.Time
	}
	if d := cronJob.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	if earliest.After(now) {
		return time.Time{}, sched.Next(now), nil
	}
	starts := 0
	for t := sched.Next(earliest); !t.After(now); t = sched.Next(t) {
		missed = t
		if starts++; starts > maxMissedRuns {
			return time.Time{}, time.Time{}, fmt.Errorf("more than %d missed start times: set or decrease spec.startingDeadlineSeconds, or check clock skew", maxMissedRuns)
		}
	}
	return missed, sched.Next(now), nil
}

// jobFor is the Job of cronJob's run scheduled at t. Its name is the same
// for the same t, so that a run is never created twice.
func jobFor(cronJob *batchv1.CronJob, t time.Time) (*kbatch.Job, error) {
	job := &kbatch.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%d", cronJob.Name, t.Unix()),
			Namespace:   cronJob.Namespace,
			Labels:      map[string]string{},
			Annotations: map[string]string{},
		},
		Spec: *cronJob.Spec.JobTemplate.Spec.DeepCopy(),
	}
	for k, v := range cronJob.Spec.JobTemplate.Annotations {
		job.Annotations[k] = v
	}
	job.Annotations[ScheduledTimeAnnotation] = t.Format(time.RFC3339)
	for k, v := range cronJob.Spec.JobTemplate.Labels {
		job.Labels[k] = v
	}
	if err := objects.SetControllerReference(cronJob, job, cronJobGVK); err != nil {
		return nil, err
	}
	return job, nil
}
