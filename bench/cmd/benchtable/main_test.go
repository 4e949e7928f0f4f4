package main

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		name string
		want key
		ok   bool
	}{
		{"BenchmarkQueue/serial/ctrlkit/metrics=off-2", key{"serial", "ctrlkit", "off"}, true},
		{"BenchmarkQueue/serial/client-go/metrics=on", key{"serial", "client-go", "on"}, true},
		{"BenchmarkLatency/controller-runtime/metrics=on-8", key{"latency", "controller-runtime", "on"}, true},
		{"BenchmarkLatencyLong/client-go/metrics=on-2", key{"latency-long", "client-go", "on"}, true},
		{"BenchmarkQueue/serial/ctrlkit-2", key{}, false},
		{"BenchmarkOther-2", key{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseName(tt.name)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("parseName(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
}

const sample = `goos: linux
cpu: Test CPU
BenchmarkQueue/serial/ctrlkit/metrics=off-2         	    2000	       200.0 ns/op	   5000000 items/s	       0 B/op	       0 allocs/op
BenchmarkQueue/serial/ctrlkit/metrics=off-2         	    2000	       100.0 ns/op	   5000000 items/s	       0 B/op	       0 allocs/op
BenchmarkQueue/serial/ctrlkit/metrics=off-2         	    2000	       150.0 ns/op	   5000000 items/s	       0 B/op	       0 allocs/op
BenchmarkQueue/serial/ctrlkit/metrics=on-2          	    2000	       300.0 ns/op	   2000000 items/s	       0 B/op	       0 allocs/op
BenchmarkQueue/serial/client-go/metrics=off-2       	    2000	       300.0 ns/op	   4000000 items/s	      16 B/op	       1 allocs/op
BenchmarkQueue/serial/client-go/metrics=on-2        	    2000	       600.0 ns/op	   1000000 items/s	      16 B/op	       1 allocs/op
BenchmarkQueue/serial/controller-runtime/metrics=on-2        	    2000	       3000 ns/op	   1000000 items/s	      16 B/op	       1 allocs/op
BenchmarkQueue/workers/ctrlkit/metrics=off-2 	    2000	       100.0 ns/op
BenchmarkQueue/workers/client-go/metrics=off-2 	    2000	       200.0 ns/op
BenchmarkQueue/workers/ctrlkit/metrics=off-2 	    2000	       400.0 ns/op
BenchmarkQueue/workers/client-go/metrics=off-2 	    2000	       400.0 ns/op
BenchmarkLatency/ctrlkit/metrics=off-2 	       1	2600000000 ns/op	         2.500 drain-s	         1.200 max-ms	         1.000 p50-ms	         1.100 p99-ms
--- BENCH: BenchmarkQueue/serial
PASS
`

func TestRender(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.get(key{"serial", "ctrlkit", "off"}, "ns/op"); got != 150 {
		t.Errorf("median ns/op = %v, want 150", got)
	}
	var b strings.Builder
	render(&b, r)
	out := b.String()
	for _, want := range []string{
		"cpu: Test CPU",
		"| serial | off | ctrlkit | 150 | ±33% | 0.50× | 5000000 | 0 | 0 |", // unequal runs: ratio of medians
		"| serial | on | controller-runtime | 3000 | ±0% | 5.00× |",
		"| workers | off | ctrlkit | 250 | ±60% | 0.75× |", // paired: median of 0.5 and 1.0
		"| ctrlkit | off | 1.00 | 1.10 | 1.20 | 2.50 |",
		"| ctrlkit off ≤ 1.0× client-go off | serial | 0.50× | yes |",
		"| ctrlkit on ≤ 0.8× client-go on | serial | 0.50× | yes |",
		"| ctrlkit on ≥ 5× faster than controller-runtime on | serial | 10.00× | yes |",
		"| 0 allocs/op in steady Add+Get+Done (metrics off) | serial | 0 | yes |",
		"| latency p99 ≤ 10 ms (metrics off) | latency | 1.10 ms | yes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "long backlog") || strings.Contains(out, "long drain") {
		t.Errorf("output has long-drain rows without BenchmarkLatencyLong results:\n%s", out)
	}
}

// longSample is BenchmarkLatencyLong's output, with its log lines, after a
// short latency result.
const longSample = `cpu: Test CPU
BenchmarkLatency/ctrlkit/metrics=on-2 	       1	2600000000 ns/op	         2.500 drain-s	         1.200 max-ms	         1.000 p50-ms	         1.100 p99-ms
BenchmarkLatencyLong/ctrlkit/metrics=on-2 	       1	26000000000 ns/op	         4.000 bound-max-ms	         3.500 bound-p99-ms	       520.0 changes	        25.60 drain-s	        10.12 key-ms	        12.00 max-ms	         0.5000 p50-ms	         3.000 p99-ms	         9.500 worst5s-p99-ms
--- BENCH: BenchmarkLatencyLong/ctrlkit/metrics=on-2
    latency_bench_test.go:123: changes added at  0s- 5s: 100, p99 2.00 ms, max 12.00 ms
BenchmarkLatencyLong/client-go/metrics=on-2 	       1	26000000000 ns/op	     25000 bound-max-ms	     24000 bound-p99-ms	       519.0 changes	        25.70 drain-s	        10.13 key-ms	     25100 max-ms	     12000 p50-ms	     24500 p99-ms	     25000 worst5s-p99-ms
BenchmarkLatencyLong/controller-runtime/metrics=on-2 	       1	26000000000 ns/op	       30.00 bound-max-ms	        11.00 bound-p99-ms	       521.0 changes	        25.80 drain-s	        30.00 max-ms	         0.6000 p50-ms	        10.50 p99-ms	        15.00 worst5s-p99-ms
PASS
`

func TestRenderLong(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   []string
		absent []string
	}{{
		name: "met",
		in:   longSample,
		want: []string{
			"### Latency of a changed key over a long drain",
			"| queue | metrics | p50 ms | p99 ms | max ms | p99 after 5 s ms | max after 5 s ms | worst 5 s p99 ms | changes | key ms | drain s |",
			"| ctrlkit | on | 0.50 | 3.00 | 12.00 | 3.50 | 4.00 | 9.50 | 520 | 10.12 | 25.60 |",
			"| client-go | on | 12000.00 | 24500.00 | 25100.00 | 24000.00 | 25000.00 | 25000.00 | 519 | 10.13 | 25.70 |",
			"| controller-runtime | on | 0.60 | 10.50 | 30.00 | 11.00 | 30.00 | 15.00 | 521 | n/a | 25.80 |",
			"| latency p99 ≤ 10 ms at every point of the drain (long backlog) | latency-long | 9.50 ms | yes |",
			// The short case keeps its own table and target.
			"| ctrlkit | on | 1.00 | 1.10 | 1.20 | 2.50 |",
			"| latency p99 ≤ 10 ms (metrics on) | latency | 1.10 ms | yes |",
		},
		absent: []string{
			"| latency-long | on | ctrlkit |",                 // not a throughput row
			"| ctrlkit | on | 0.50 | 3.00 | 12.00 | n/a |",    // not a short latency row
			"ctrlkit off ≤ 1.0× client-go off | latency-long", // no ratio targets for it
		},
	}, {
		name: "not met",
		in:   strings.Replace(longSample, "9.500 worst5s-p99-ms", "10.01 worst5s-p99-ms", 1),
		want: []string{
			"| latency p99 ≤ 10 ms at every point of the drain (long backlog) | latency-long | 10.01 ms | **no** |",
		},
	}, {
		name: "no change after the bound",
		in:   strings.Replace(longSample, "         4.000 bound-max-ms	         3.500 bound-p99-ms", "", 1),
		want: []string{
			"| ctrlkit | on | 0.50 | 3.00 | 12.00 | n/a | n/a | 9.50 | 520 | 10.12 | 25.60 |",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			render(&b, r)
			out := b.String()
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for _, bad := range tt.absent {
				if strings.Contains(out, bad) {
					t.Errorf("output has %q:\n%s", bad, out)
				}
			}
		})
	}
}
