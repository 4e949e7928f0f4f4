package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// cfg points at no cluster: New never contacts the API server.
var cfg = &rest.Config{Host: "https://cluster.invalid:6443"}

func TestNewValidatesOptions(t *testing.T) {
	notAGatherer := prometheus.WrapRegistererWith(prometheus.Labels{"op": "x"}, prometheus.NewRegistry())
	tests := []struct {
		name string
		opts manager.Options
		want []string // substrings of the error; none means success
	}{
		{name: "zero value"},
		{name: "valid fields", opts: manager.Options{
			Name:                 "my-operator",
			HTTPAddr:             "127.0.0.1:0",
			Registry:             prometheus.NewRegistry(),
			CacheSyncTimeout:     time.Second,
			SyncProgressInterval: time.Second,
			ShutdownTimeout:      time.Second,
		}},
		{name: "HTTPAddr with empty host", opts: manager.Options{HTTPAddr: ":8080"}},
		{
			name: "negative CacheSyncTimeout",
			opts: manager.Options{CacheSyncTimeout: -time.Second},
			want: []string{"Options.CacheSyncTimeout is -1s", "positive duration"},
		},
		{
			name: "negative ShutdownTimeout",
			opts: manager.Options{ShutdownTimeout: -time.Second},
			want: []string{"Options.ShutdownTimeout is -1s"},
		},
		{
			name: "negative SyncProgressInterval",
			opts: manager.Options{SyncProgressInterval: -time.Second},
			want: []string{"Options.SyncProgressInterval is -1s"},
		},
		{
			name: "negative Informers.Resync",
			opts: manager.Options{Informers: informer.Options{Resync: -time.Second}},
			want: []string{"Options.Informers.Resync is -1s"},
		},
		{
			name: "scheme in Informers",
			opts: manager.Options{Informers: informer.Options{Scheme: runtime.NewScheme()}},
			want: []string{"Options.Informers.Scheme is set", "set Options.Scheme instead"},
		},
		{
			name: "HTTPAddr without port",
			opts: manager.Options{HTTPAddr: "8080"},
			want: []string{`Options.HTTPAddr is "8080"`, "host:port"},
		},
		{
			name: "HTTPAddr host without port",
			opts: manager.Options{HTTPAddr: "localhost"},
			want: []string{`Options.HTTPAddr is "localhost"`},
		},
		{
			name: "Registry that is not a Gatherer",
			opts: manager.Options{Registry: notAGatherer},
			want: []string{"Options.Registry", "prometheus.Gatherer"},
		},
		{
			name: "every bad field is named at once",
			opts: manager.Options{CacheSyncTimeout: -1, ShutdownTimeout: -1, HTTPAddr: "nope"},
			want: []string{"Options.CacheSyncTimeout", "Options.ShutdownTimeout", "Options.HTTPAddr"},
		},
		{
			name: "invalid informer options",
			opts: manager.Options{Informers: informer.Options{ResyncByType: map[runtime.Object]time.Duration{&corev1.ConfigMapList{}: time.Second}}},
			want: []string{"Options.ResyncByType"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := manager.New(cfg, tt.opts)
			if len(tt.want) == 0 {
				if err != nil || m == nil {
					t.Fatalf("New = %v, %v; want a manager", m, err)
				}
				return
			}
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if m != nil {
				t.Error("New returned a manager with an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestNewNilConfig(t *testing.T) {
	m, err := manager.New(nil, manager.Options{})
	if err == nil || m != nil {
		t.Fatalf("New(nil) = %v, %v; want an error", m, err)
	}
	if !strings.Contains(err.Error(), "rest config is nil") {
		t.Errorf("error %q does not say the config is nil", err)
	}
}

// TestNewDoesNotChangeConfig checks that raising QPS and Burst works on a
// copy of the caller's config.
func TestNewDoesNotChangeConfig(t *testing.T) {
	c := &rest.Config{Host: cfg.Host}
	if _, err := manager.New(c, manager.Options{Name: "op"}); err != nil {
		t.Fatal(err)
	}
	if c.QPS != 0 || c.Burst != 0 || c.UserAgent != "" {
		t.Errorf("New changed the caller's config: QPS %v, Burst %v, UserAgent %q", c.QPS, c.Burst, c.UserAgent)
	}
}
