package shard

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sharding families of a Replica (Replica.Collector):
//   - ctrlkit_shard_members{ring}: the live members, as the sharder (or,
//     in the server-side mode, the coordinator) sees them; set on the
//     replica that runs it.
//   - ctrlkit_shard_labels_total{ring,action}: the labels the sharder
//     wrote: assign (an object given to a member) or drain (a live owner
//     asked to hand one over).
//   - ctrlkit_shard_handovers_total{ring,controller}: the keys this
//     replica handed over, and ctrlkit_shard_handover_seconds their time
//     from the drain label (label mode) or the new target epoch
//     (server-side mode) seen to the key's last Reconcile returned.
//   - ctrlkit_shard_epoch{ring}: the committed ring epoch this replica
//     follows, in the server-side mode.
//   - ctrlkit_shard_keys{ring,controller}: the keys this replica owns,
//     counted from its primary informer at scrape time.
type metrics struct {
	ring            string
	members         prometheus.Gauge
	labels          *prometheus.CounterVec
	handovers       *prometheus.CounterVec
	handoverSeconds *prometheus.HistogramVec
	epoch           prometheus.Gauge
	keys            *prometheus.Desc
	r               *Replica
}

func newMetrics(r *Replica) *metrics {
	constLabels := prometheus.Labels{"ring": r.ring}
	return &metrics{
		ring: r.ring,
		r:    r,
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctrlkit_shard_members", ConstLabels: constLabels,
			Help: "Live members of the sharding ring, as the sharder sees them (set on the replica that runs the sharder)."}),
		labels: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrlkit_shard_labels_total", ConstLabels: constLabels,
			Help: "Labels the sharder wrote: assign gives an object to a member, drain asks its live owner to hand it over."}, []string{"action"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrlkit_shard_handovers_total", ConstLabels: constLabels,
			Help: "Keys this replica handed over: drained by the sharder (label mode), or in ranges a new ring epoch gives another member (server-side mode)."}, []string{"controller"}),
		handoverSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ctrlkit_shard_handover_seconds", ConstLabels: constLabels,
			Help:    "Time from this replica seeing a key's drain label, or the ring epoch that takes it away, to its handover (its last Reconcile of the key included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"controller"}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctrlkit_shard_epoch", ConstLabels: constLabels,
			Help: "The committed ring epoch this replica follows (server-side mode)."}),
		keys: prometheus.NewDesc("ctrlkit_shard_keys", "Keys this replica owns: the objects of the sharded controller's primary informer, at scrape time.",
			[]string{"controller"}, constLabels),
	}
}

func (s *metrics) Describe(ch chan<- *prometheus.Desc) {
	s.members.Describe(ch)
	s.labels.Describe(ch)
	s.handovers.Describe(ch)
	s.handoverSeconds.Describe(ch)
	s.epoch.Describe(ch)
	ch <- s.keys
}

func (s *metrics) Collect(ch chan<- prometheus.Metric) {
	s.members.Collect(ch)
	s.labels.Collect(ch)
	s.handovers.Collect(ch)
	s.handoverSeconds.Collect(ch)
	s.epoch.Collect(ch)
	for _, c := range s.r.controllers() {
		ch <- prometheus.MustNewConstMetric(s.keys, prometheus.GaugeValue, float64(c.drainer.primary.Len()), c.ctrl.Name())
	}
}

// Members and Labelled make metrics the Sharder's Observer.
func (s *metrics) Members(live []string) { s.members.Set(float64(len(live))) }

func (s *metrics) Labelled(a Action) { s.labels.WithLabelValues(a.String()).Inc() }
