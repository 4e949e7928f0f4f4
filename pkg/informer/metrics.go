package informer

import "github.com/prometheus/client_golang/prometheus"

var cacheObjectsDesc = prometheus.NewDesc("ctrlkit_cache_objects",
	"Number of objects each declared informer's cache holds, counted at scrape time; "+
		"it rises from 0 as the informer's initial list is delivered. "+
		`'informer' names the informer as in logs, e.g. "configmaps.v1 (*v1.ConfigMap)".`,
	[]string{"informer"}, nil)

var decodeErrorsDesc = prometheus.NewDesc("ctrlkit_cache_decode_errors_total",
	"Objects of a custom type that the informer's list could not decode into the Go type and left out of the cache, "+
		"counted each time a list meets them; a watch event that does not decode makes the informer list again. "+
		`'informer' names the informer as in logs, e.g. "websites.v1alpha1.example.com (*v1alpha1.Website)".`,
	[]string{"informer"}, nil)

// Collector reports the cache's two families, computed at each scrape so
// they cost nothing between scrapes; a manager registers it on its
// registry. Collecting calls no API server and is safe for concurrent use.
//   - ctrlkit_cache_objects{informer}: how many objects each declared
//     informer's cache holds, counted from its store. Every declared
//     informer has a series from its declaration on: 0 until the Cache
//     starts, then rising as its initial list is delivered.
//   - ctrlkit_cache_decode_errors_total{informer}: the objects of a custom
//     type that a list of its informer did not decode into the Go type and
//     left out of the cache, each time a list met them (see the package
//     doc). Every informer of a custom Go type declared with a
//     Clients.Config has a series, 0 from its declaration.
//
// The label is the informer's Source.Name.
func (c *Cache) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Cache }

func (o collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheObjectsDesc
	ch <- decodeErrorsDesc
}

func (o collector) Collect(ch chan<- prometheus.Metric) {
	errs := &o.c.typed.errs
	errs.mu.Lock()
	counts := make(map[string]uint64, len(errs.counts))
	for name, n := range errs.counts {
		counts[name] = n.Load()
	}
	errs.mu.Unlock()
	for name, n := range counts {
		ch <- prometheus.MustNewConstMetric(decodeErrorsDesc, prometheus.CounterValue, float64(n), name)
	}
	for _, s := range o.c.Informers() {
		m, err := prometheus.NewConstMetric(cacheObjectsDesc, prometheus.GaugeValue, float64(s.Len()), s.Name())
		if err != nil {
			m = prometheus.NewInvalidMetric(cacheObjectsDesc, err) // fails the scrape with err, not the process
		}
		ch <- m
	}
}
