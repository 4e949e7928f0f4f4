package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The crd section compares the two frameworks on a custom resource: a
// Website-like CRD, Site, cached by ctrlkit's informer.For[*Site] (JSON
// decoded straight into the Go type) and by controller-runtime's typed
// cache of &Site{} (its defaults), each with one controller that reconciles
// every object once.

// siteCRD is the CRD manifest, installed at the start of the section.
//
//go:embed testdata/sites.bench.ctrlkit.io.yaml
var siteCRD []byte

const sitePrefix = "site-"

func siteName(i int) string { return fmt.Sprintf("%s%05d", sitePrefix, i) }

var siteGV = schema.GroupVersion{Group: "bench.ctrlkit.io", Version: "v1"}

// Site is a website: a Deployment and a Service, in the shape of
// examples/website's Website, with a few more fields.
type Site struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SiteSpec   `json:"spec"`
	Status            SiteStatus `json:"status,omitempty"`
}

// SiteSpec is the desired state of a Site.
type SiteSpec struct {
	Image         string            `json:"image"`
	Replicas      int32             `json:"replicas,omitempty"`
	Port          int32             `json:"port,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"` // put on the site's pods
	Domain        string            `json:"domain,omitempty"`
	Path          string            `json:"path,omitempty"`
	TLSSecretName string            `json:"tlsSecretName,omitempty"`
	Owner         string            `json:"owner,omitempty"`
	Description   string            `json:"description,omitempty"`
}

// SiteStatus is the observed state of a Site.
type SiteStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	URL                string             `json:"url,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// SiteList is a list of Sites.
type SiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Site `json:"items"`
}

// DeepCopyInto copies s into out.
func (s *Site) DeepCopyInto(out *Site) {
	*out = *s
	out.TypeMeta = s.TypeMeta
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if s.Spec.Labels != nil {
		out.Spec.Labels = make(map[string]string, len(s.Spec.Labels))
		for k, v := range s.Spec.Labels {
			out.Spec.Labels[k] = v
		}
	}
	if s.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(s.Status.Conditions))
		for i := range s.Status.Conditions {
			s.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (s *Site) DeepCopyObject() runtime.Object {
	if s == nil {
		return nil
	}
	out := new(Site)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies l into out.
func (l *SiteList) DeepCopyInto(out *SiteList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Site, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *SiteList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(SiteList)
	l.DeepCopyInto(out)
	return out
}

// siteScheme is client-go's types and Site, for both frameworks' managers
// in the crd section and the seeding client.
var siteScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(siteGV, &Site{}, &SiteList{})
	metav1.AddToGroupVersion(s, siteGV)
	return s
})

// installSiteCRD installs the Site CRD and waits until the API server
// serves it (envtest's InstallCRDs, from a copy of the embedded manifest).
func installSiteCRD(cfg *rest.Config) error {
	dir, err := os.MkdirTemp("", "bench-e2e-crd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "sites.yaml"), siteCRD, 0o644); err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: time.Minute, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return fmt.Errorf("installing the Site CRD: %w", err)
	}
	return nil
}

// benchSite is the i-th Site, without status; those below half carry
// halfLabel.
func benchSite(i, half int) *Site {
	labels := map[string]string{
		"app": "bench", "app.kubernetes.io/name": "site", "app.kubernetes.io/instance": siteName(i),
		"app.kubernetes.io/managed-by": "bench", "team": "web",
	}
	if i < half {
		labels[halfLabel] = "true"
	}
	return &Site{
		ObjectMeta: metav1.ObjectMeta{
			Name: siteName(i), Namespace: nsName(i), Labels: labels,
			Annotations: map[string]string{"bench.ctrlkit.io/config-hash": "sha256:" + strings.Repeat("5e", 32)},
		},
		Spec: SiteSpec{
			Image:    "registry.example.com/web/nginx:1.27.3",
			Replicas: 2,
			Port:     8080,
			Labels: map[string]string{
				"app.kubernetes.io/name": "site", "app.kubernetes.io/instance": siteName(i), "app.kubernetes.io/component": "web",
				"app.kubernetes.io/part-of": "bench-sites", "tier": "frontend", "team": "web",
			},
			Domain:        fmt.Sprintf("%s.sites.example.com", siteName(i)),
			Path:          "/",
			TLSSecretName: siteName(i) + "-tls",
			Owner:         "web-team@example.com",
			Description:   "A static site served by nginx behind a Service, published under its domain; created by the ctrlkit end-to-end benchmark.",
		},
	}
}

// siteStatus is the status the seeding writes: observed, served, two
// conditions.
func siteStatus(s *Site) SiteStatus {
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	return SiteStatus{
		ObservedGeneration: s.Generation,
		URL:                fmt.Sprintf("http://%s.%s.svc.cluster.local:%d%s", s.Name, s.Namespace, s.Spec.Port, s.Spec.Path),
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: s.Generation, LastTransitionTime: at,
				Reason: "DeploymentAvailable", Message: fmt.Sprintf("Deployment %s has 2 of 2 replicas available", s.Name)},
			{Type: "Progressing", Status: metav1.ConditionFalse, ObservedGeneration: s.Generation, LastTransitionTime: at,
				Reason: "RolloutComplete", Message: fmt.Sprintf("Deployment %s rolled out image %s", s.Name, s.Spec.Image)},
		},
	}
}

// seedSites creates n Sites, spread over the namespaces (those below n/2
// carry halfLabel), and writes each one's status through the status
// subresource. Sites that exist already are kept, without a new status. It
// returns the size of the first Site as its status write returned it.
func seedSites(ctx context.Context, cfg *rest.Config, n int) (seeded, podSize, error) {
	var size podSize
	c, err := crclient.New(unlimited(cfg), crclient.Options{Scheme: siteScheme()})
	if err != nil {
		return seeded{}, size, err
	}
	t := time.Now()
	err = createAll(0, n, func(i int) error {
		s := benchSite(i, n/2)
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("creating Site %s/%s: %w", s.Namespace, s.Name, err)
		}
		s.Status = siteStatus(s)
		if err := c.Status().Update(ctx, s); err != nil {
			return fmt.Errorf("writing the status of Site %s/%s: %w", s.Namespace, s.Name, err)
		}
		if i == 0 {
			size.full = jsonLen(s)
			s.ManagedFields = nil
			size.stripped = jsonLen(s)
		}
		return nil
	})
	return seeded{what: "Sites (with status)", from: 0, to: n, took: time.Since(t)}, size, err
}

// crdRound is what one framework measured in one round of the crd section.
type crdRound struct {
	cold coldResult // over all the Sites
	heap heapPair   // half and full cache; full is cold's heap
}

// crdPhase installs the CRD, creates the Sites and measures every
// framework's cold start and heap over them, A/B alternating.
func crdPhase(ctx context.Context, cfg *rest.Config, c config, res *results) error {
	if err := installSiteCRD(cfg); err != nil {
		return err
	}
	n := c.crdN
	s, size, err := seedSites(ctx, cfg, n)
	if err != nil {
		return err
	}
	res.seeded = append(res.seeded, s)
	res.siteSize = size
	res.logf("%v; one Site is %d B as JSON, %d B without managedFields", s, size.full, size.stripped)
	for round := range c.rounds {
		for _, fw := range order(round) {
			half, err := coldOnly(ctx, cfg, fw, setup{kind: sites, selector: halfLabel + "=true"}, n/2, sitePrefix)
			if err != nil {
				return fmt.Errorf("round %d, %s, half cache: %w", round+1, fw.name, err)
			}
			full, err := coldOnly(ctx, cfg, fw, setup{kind: sites}, n, sitePrefix)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, fw.name, err)
			}
			r := crdRound{cold: full, heap: heapPair{half: half.heap, full: full.heap}}
			res.crd[fw.name] = append(res.crd[fw.name], r)
			res.logf("round %d %-18s Sites N=%d sync %.3fs  all reconciled %.3fs  cpu/1k objects %.3fs  heap/object %.0f B (slope %.0f B)",
				round+1, fw.name, n, full.sync.Seconds(), full.all.Seconds(), full.cpuPer1k, full.heap/float64(n), r.heap.slope(n))
		}
	}
	return nil
}

// The crd section's targets (issue: typed decode of custom types), on the
// median of the per-round ratios ctrlkit ÷ controller-runtime.
const (
	crdTargetSync = 0.8
	crdTargetCPU  = 0.8
	crdTargetHeap = 1.0
)

// crdSections is the crd section's table: cold start and heap, then the
// targets.
func crdSections(c config, res *results) []section {
	m := res.crd
	if len(m[frameworks[0].name]) == 0 {
		return nil
	}
	n := c.crdN
	rounds := len(m[frameworks[0].name])
	cold := make(map[string][]coldResult)
	for name, rs := range m {
		cold[name] = each(rs, func(r crdRound) coldResult { return r.cold })
	}
	slope := func(r crdRound) float64 { return r.heap.slope(n) }
	rows := append(coldRows(cold, n),
		pair(m, fmt.Sprintf("heap per object, slope %d → %d (B)", n/2, n), "%.0f", false, slope))
	title := fmt.Sprintf("Custom resource: cold start and heap, %d Sites (%.1f KB as JSON without managedFields, %.1f KB with; %d rounds)",
		n, float64(res.siteSize.stripped)/1000, float64(res.siteSize.full)/1000, rounds)
	get := func(f func(coldResult) float64) func(crdRound) float64 {
		return func(r crdRound) float64 { return f(r.cold) }
	}
	targets := section{title: "Targets: custom resource vs controller-runtime's typed cache (median of the per-round ratios ctrlkit ÷ controller-runtime)", rows: []row{
		ratioTarget(m, fmt.Sprintf("cache synced (s) ≤ %.1f×", crdTargetSync), "%.3f", crdTargetSync, get(func(r coldResult) float64 { return r.sync.Seconds() })),
		ratioTarget(m, fmt.Sprintf("process CPU s per 1,000 objects ≤ %.1f×", crdTargetCPU), "%.3f", crdTargetCPU, get(func(r coldResult) float64 { return r.cpuPer1k })),
		ratioTarget(m, fmt.Sprintf("heap per object, slope (B) ≤ %.1f×", crdTargetHeap), "%.0f", crdTargetHeap, slope),
	}}
	return []section{{title, rows}, targets}
}

// ratioTarget is a target row on the ratio ctrlkit ÷ controller-runtime:
// both frameworks' values, and in the ratio cell whether the median of the
// per-round ratios meets target and in how many rounds the ratio did.
func ratioTarget[T any](m map[string][]T, name, format string, target float64, f func(T) float64) row {
	a, b := each(m[frameworks[0].name], f), each(m[frameworks[1].name], f)
	var ratios []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			ratios = append(ratios, a[i]/b[i])
		}
	}
	verdict := "–"
	if len(ratios) > 0 {
		ok := 0
		for _, r := range ratios {
			if r <= target {
				ok++
			}
		}
		verdict = "not met"
		if median(ratios) <= target {
			verdict = "met"
		}
		verdict = fmt.Sprintf("%s: %s; %d of %d rounds", verdict, spread("%.2f×", ratios), ok, len(ratios))
	}
	return row{name: name, text: []string{spread(format, a), spread(format, b), verdict}}
}
