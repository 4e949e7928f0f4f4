package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
)

// Not in the tutorial, which tests the schedule only through envtest:
// nextSchedule on its own, at chosen times.
func TestNextSchedule(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	at := func(h, m int) time.Time { return time.Date(2026, 1, 1, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name       string
		schedule   string
		last       *time.Time
		deadline   *int64
		now        time.Time
		wantMissed time.Time // zero: none due
		wantNext   time.Time
		wantErr    bool
	}{
		{name: "none due yet", schedule: "*/5 * * * *", now: at(10, 3), wantNext: at(10, 5)},
		{name: "one due", schedule: "*/5 * * * *", now: at(10, 7), wantMissed: at(10, 5), wantNext: at(10, 10)},
		{name: "latest of several", schedule: "*/5 * * * *", now: at(10, 17), wantMissed: at(10, 15), wantNext: at(10, 20)},
		{name: "counted from the last run", schedule: "*/5 * * * *", last: new(at(10, 15)), now: at(10, 17), wantNext: at(10, 20)},
		{name: "deadline leaves the run out", schedule: "0 * * * *", deadline: new(int64(60)), now: at(11, 2), wantNext: at(12, 0)},
		{name: "deadline keeps the run", schedule: "0 * * * *", deadline: new(int64(600)), now: at(11, 2), wantMissed: at(11, 0), wantNext: at(12, 0)},
		{name: "created in the future", schedule: "* * * * *", now: at(9, 0), wantNext: at(9, 1)},
		{name: "too many missed", schedule: "* * * * *", now: at(12, 0), wantErr: true},
		{name: "unparseable", schedule: "every minute", now: at(10, 1), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
				Spec:       batchv1.CronJobSpec{Schedule: tc.schedule, StartingDeadlineSeconds: tc.deadline},
			}
			if tc.last != nil {
				cj.Status.LastScheduleTime = &metav1.Time{Time: *tc.last}
			}
			missed, next, err := nextSchedule(cj, tc.now)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("nextSchedule = %v, %v, want an error", missed, next)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !missed.Equal(tc.wantMissed) || !next.Equal(tc.wantNext) {
				t.Errorf("nextSchedule = %v, %v, want %v, %v", missed, next, tc.wantMissed, tc.wantNext)
			}
		})
	}
}
