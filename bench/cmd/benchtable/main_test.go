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
		"| ctrlkit on ≤ 1.3× ctrlkit off | serial | 2.00× | **no** |",
		"| ctrlkit on ≥ 5× faster than controller-runtime on | serial | 10.00× | yes |",
		"| 0 allocs/op in steady Add+Get+Done (metrics off) | serial | 0 | yes |",
		"| latency p99 ≤ 10 ms (metrics off) | latency | 1.10 ms | yes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
