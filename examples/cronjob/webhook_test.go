package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	batchv1 "github.com/ctrlkit/ctrlkit/examples/cronjob/api/v1"
)

// The tutorial's webhook tests, case for case: they call the defaulter and
// the validator directly.

const (
	validCronJobName = "valid-cronjob-name"
	tooLongName      = "this-name-is-way-too-long-and-should-fail-validation-because-it-is-way-too-long"
	schedule         = "*/5 * * * *"
)

// newCronJob is the tutorial's BeforeEach object.
func newCronJob() *batchv1.CronJob {
	return &batchv1.CronJob{Spec: batchv1.CronJobSpec{
		Schedule:                   schedule,
		ConcurrencyPolicy:          batchv1.AllowConcurrent,
		SuccessfulJobsHistoryLimit: new(int32(3)),
		FailedJobsHistoryLimit:     new(int32(1)),
	}}
}

func newDefaulter() *Defaulter {
	return &Defaulter{
		ConcurrencyPolicy:          batchv1.AllowConcurrent,
		Suspend:                    false,
		SuccessfulJobsHistoryLimit: 3,
		FailedJobsHistoryLimit:     1,
	}
}

func TestDefaulterAppliesDefaultsToEmptyFields(t *testing.T) {
	obj := newCronJob()
	obj.Spec.ConcurrencyPolicy = ""
	obj.Spec.Suspend = nil
	obj.Spec.SuccessfulJobsHistoryLimit = nil
	obj.Spec.FailedJobsHistoryLimit = nil
	if err := newDefaulter().Default(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent {
		t.Errorf("concurrencyPolicy = %q, want %q", obj.Spec.ConcurrencyPolicy, batchv1.AllowConcurrent)
	}
	if obj.Spec.Suspend == nil || *obj.Spec.Suspend {
		t.Errorf("suspend = %v, want false", obj.Spec.Suspend)
	}
	if l := obj.Spec.SuccessfulJobsHistoryLimit; l == nil || *l != 3 {
		t.Errorf("successfulJobsHistoryLimit = %v, want 3", l)
	}
	if l := obj.Spec.FailedJobsHistoryLimit; l == nil || *l != 1 {
		t.Errorf("failedJobsHistoryLimit = %v, want 1", l)
	}
}

func TestDefaulterKeepsFieldsSet(t *testing.T) {
	obj := newCronJob()
	obj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	obj.Spec.Suspend = new(true)
	obj.Spec.SuccessfulJobsHistoryLimit = new(int32(5))
	obj.Spec.FailedJobsHistoryLimit = new(int32(2))
	if err := newDefaulter().Default(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy = %q, want %q", obj.Spec.ConcurrencyPolicy, batchv1.ForbidConcurrent)
	}
	if !*obj.Spec.Suspend {
		t.Error("suspend = false, want true")
	}
	if l := *obj.Spec.SuccessfulJobsHistoryLimit; l != 5 {
		t.Errorf("successfulJobsHistoryLimit = %d, want 5", l)
	}
	if l := *obj.Spec.FailedJobsHistoryLimit; l != 2 {
		t.Errorf("failedJobsHistoryLimit = %d, want 2", l)
	}
}

func TestValidateCreate(t *testing.T) {
	for _, tc := range []struct {
		name, cronJob, schedule string
		wantErr                 string // empty: admitted
	}{
		{"name too long", tooLongName, schedule, "must be no more than 52 characters"},
		{"valid name", validCronJobName, schedule, ""},
		// robfig/cron v3's message; the tutorial's v1 said "Expected
		// exactly 5 fields, found 1: invalid-cron-schedule".
		{"invalid schedule", validCronJobName, "invalid-cron-schedule", "expected exactly 5 fields, found 1: [invalid-cron-schedule]"},
		{"valid schedule", validCronJobName, schedule, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newCronJob()
			obj.Name, obj.Spec.Schedule = tc.cronJob, tc.schedule
			_, err := Validator{}.ValidateCreate(t.Context(), obj)
			checkErr(t, err, tc.wantErr)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	oldObj := newCronJob()
	oldObj.Name = validCronJobName

	t.Run("invalid name and spec", func(t *testing.T) {
		obj := newCronJob()
		obj.Name, obj.Spec.Schedule = tooLongName, "invalid-cron-schedule"
		_, err := Validator{}.ValidateUpdate(t.Context(), oldObj, obj)
		checkErr(t, err, "must be no more than 52 characters")
		checkErr(t, err, "expected exactly 5 fields")
	})
	t.Run("valid name and spec", func(t *testing.T) {
		obj := newCronJob()
		obj.Name, obj.Spec.Schedule = "valid-cronjob-name-updated", "0 0 * * *"
		_, err := Validator{}.ValidateUpdate(t.Context(), oldObj, obj)
		checkErr(t, err, "")
	})
}

// checkErr fails unless err contains want, or is nil when want is empty.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error %v, want none", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one containing %q", err, want)
	}
}

// Not in the tutorial: the handlers SetupWebhooks registers answer
// AdmissionReviews, the defaulter with a patch of the defaults and the
// validator with a denial.
func TestWebhookHandlers(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	handlers := registrar{}
	if err := SetupWebhooks(handlers, scheme); err != nil {
		t.Fatal(err)
	}
	def, val := handlers[DefaultingPath], handlers[ValidatingPath]
	if def == nil || val == nil {
		t.Fatalf("registered %v, want %s and %s", slices.Collect(maps.Keys(handlers)), DefaultingPath, ValidatingPath)
	}

	obj := &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.GroupVersion.String(), Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: validCronJobName, Namespace: "default"},
		Spec:       batchv1.CronJobSpec{Schedule: schedule},
	}
	resp := review(t, def, obj)
	if !resp.Allowed {
		t.Fatalf("defaulting denied: %+v", resp.Result)
	}
	var patch []struct {
		Op, Path string
		Value    any
	}
	if err := json.Unmarshal(resp.Patch, &patch); err != nil {
		t.Fatalf("patch %s: %v", resp.Patch, err)
	}
	paths := map[string]bool{}
	for _, op := range patch {
		paths[op.Path] = true
	}
	for _, p := range []string{"/spec/concurrencyPolicy", "/spec/suspend", "/spec/successfulJobsHistoryLimit", "/spec/failedJobsHistoryLimit"} {
		if !paths[p] {
			t.Errorf("patch %s does not set %s", resp.Patch, p)
		}
	}

	obj.Spec.Schedule = "invalid-cron-schedule"
	resp = review(t, val, obj)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "expected exactly 5 fields") {
		t.Errorf("validating %q: allowed %v, result %+v; want a denial naming the schedule", obj.Spec.Schedule, resp.Allowed, resp.Result)
	}
}

// registrar records what SetupWebhooks registers.
type registrar map[string]http.Handler

func (r registrar) Register(path string, h http.Handler) error {
	r[path] = h
	return nil
}

// review sends obj to h in a create AdmissionReview and returns the
// response.
func review(t *testing.T, h http.Handler, obj *batchv1.CronJob) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "1",
			Kind:      metav1.GroupVersionKind{Group: batchv1.GroupVersion.Group, Version: batchv1.GroupVersion.Version, Kind: "CronJob"},
			Resource:  metav1.GroupVersionResource{Group: batchv1.GroupVersion.Group, Version: batchv1.GroupVersion.Version, Resource: "cronjobs"},
			Name:      obj.Name,
			Namespace: obj.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body.Bytes(), err)
	}
	return out.Response
}
