package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestStepsThinsWithoutMovingTheCurve: 30,000 samples draw with a few
// thousand points, which start and end where the unthinned curve does, and
// the ends stay where the unthinned curve's are.
func TestStepsThinsWithoutMovingTheCurve(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ds []time.Duration
	for range 30000 {
		ds = append(ds, time.Duration(r.ExpFloat64()*float64(3*time.Millisecond)))
	}
	l := newLine("x", 0, 0, ds)
	svg := cdfSVG("t", "x", []cdfLine{l})
	i := strings.Index(svg, `points="`)
	pts := strings.Fields(svg[i+len(`points="`) : i+strings.Index(svg[i:], `"/>`)])
	if len(pts) > 3000 {
		t.Errorf("%d points for %d samples, want the curve thinned to at most 3000", len(pts), len(ds))
	}
	if len(pts) < 10 {
		t.Fatalf("%d points: the curve is gone", len(pts))
	}
	if !strings.HasSuffix(pts[0], ",380.0") { // y(0) = top+plotH
		t.Errorf("curve starts at %s, want fraction 0 (y=380.0)", pts[0])
	}
	if !strings.HasSuffix(pts[len(pts)-1], ",40.0") { // y(1) = top
		t.Errorf("curve ends at %s, want fraction 1 (y=40.0)", pts[len(pts)-1])
	}
}
