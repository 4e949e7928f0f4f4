package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// cdfLine is one distribution of a CDF chart.
type cdfLine struct {
	label, color, dash string
	ms                 []float64 // sorted
}

const colorA, colorB = "#1f77b4", "#ff7f0e"

// newLine pools ds over rounds into a sorted line, values below minMs
// clamped to it.
func newLine(label string, fi, style int, ds ...[]time.Duration) cdfLine {
	l := cdfLine{label: label, color: colorA}
	if fi == 1 {
		l.color = colorB
	}
	if style > 0 {
		l.dash = fmt.Sprintf(` stroke-dasharray="%d,4"`, 8-2*min(style, 3))
	}
	for _, d := range ds {
		for _, v := range d {
			l.ms = append(l.ms, max(ms(v), minMs))
		}
	}
	slices.Sort(l.ms)
	return l
}

// minMs is the left end of the charts' log axis.
const minMs = 0.1

// churnSVG draws the CDF of the churn latencies from the write's request,
// pooled over rounds, one line per framework and rate.
func churnSVG(c config, res *results) string {
	var lines []cdfLine
	for fi, fw := range frameworks {
		for ri, rate := range c.rates {
			var ds [][]time.Duration
			for _, r := range res.main[fw.name] {
				ds = append(ds, r.churn[ri].fromSent)
			}
			lines = append(lines, newLine(fmt.Sprintf("%s %d/s", fw.name, rate), fi, ri, ds...))
		}
	}
	title := fmt.Sprintf("Churn: write sent → Reconcile start, CDF (%d ConfigMaps, %d rounds pooled)", c.sizes[0], c.rounds)
	return cdfSVG(title, "latency (ms, log scale; ≤ 0.1 shown at 0.1)", lines)
}

// stormSVG draws the CDF of the storm latencies from the write's response,
// pooled over rounds: for every Reconcile cost, every update and those
// acknowledged before the backlog drained.
func stormSVG(c config, res *results) string {
	var lines []cdfLine
	for fi, fw := range frameworks {
		for ci, cost := range c.storm.costs {
			var all, during [][]time.Duration
			for _, r := range res.main[fw.name] {
				if ci < len(r.storms) {
					all = append(all, r.storms[ci].all.fromResp)
					during = append(during, r.storms[ci].during.fromResp)
				}
			}
			lines = append(lines, newLine(fmt.Sprintf("%s %v all", fw.name, cost), fi, 2*ci, all...),
				newLine(fmt.Sprintf("%s %v in backlog", fw.name, cost), fi, 2*ci+1, during...))
		}
	}
	costs := make([]string, len(c.storm.costs))
	for i, cost := range c.storm.costs {
		costs[i] = cost.String()
	}
	title := fmt.Sprintf("Restart storm: update → Reconcile start, CDF (%d ConfigMaps, %s/Reconcile, updates at %d/s across the drain; %d rounds)",
		c.sizes[0], strings.Join(costs, " and "), c.storm.rate, c.rounds)
	return cdfSVG(title, "latency from the update's response (ms, log scale; ≤ 0.1 shown at 0.1)", lines)
}

// cdfSVG draws lines as CDFs on a log time axis.
func cdfSVG(title, xLabel string, lines []cdfLine) string {
	const (
		width, height         = 960, 440
		left, right, top, bot = 70, 340, 40, 60
		plotW, plotH          = width - left - right, height - top - bot
		legend                = 18
	)
	maxMs := 1.0
	for _, l := range lines {
		if len(l.ms) > 0 {
			maxMs = max(maxMs, l.ms[len(l.ms)-1])
		}
	}
	decades := math.Ceil(math.Log10(maxMs / minMs))
	x := func(v float64) float64 { return left + plotW*math.Log10(v/minMs)/decades }
	y := func(f float64) float64 { return top + plotH*(1-f) }

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="%d" y="22" font-size="13">%s</text>`+"\n", 16, title)
	for d := 0.0; d <= decades; d++ {
		v := minMs * math.Pow(10, d)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(v), top, x(v), top+plotH)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), top+plotH+16, v)
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} { // 0.99 would sit on 1's label
		fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(f), left+plotW, y(f))
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, y(f)+4, f)
	}
	fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", left+plotW/2, height-18, xLabel)
	fmt.Fprintf(&sb, `<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">fraction of writes</text>`+"\n", top+plotH/2, top+plotH/2)
	for i, l := range lines {
		if len(l.ms) > 0 {
			var st steps
			n := float64(len(l.ms))
			st.add(x(l.ms[0]), y(0))
			for j, v := range l.ms {
				st.add(x(v), y(float64(j)/n))
				st.add(x(v), y(float64(j+1)/n))
			}
			fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", l.color, l.dash, st.String())
		}
		ly := top + 10 + i*legend
		fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+plotW+12, ly, left+plotW+40, ly, l.color, l.dash)
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%s (n=%d)</text>`+"\n", left+plotW+46, ly+4, l.label, len(l.ms))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// steps is a CDF's polyline, kept small: points are rounded to half a
// pixel, repeats are dropped, and a point in the middle of a horizontal or
// vertical run is dropped, so tens of thousands of samples draw the same
// picture with a few thousand points.
type steps struct{ pts [][2]float64 }

func (s *steps) add(px, py float64) {
	p := [2]float64{math.Round(px*2) / 2, math.Round(py*2) / 2}
	n := len(s.pts)
	if n > 0 && s.pts[n-1] == p {
		return
	}
	if n >= 2 {
		a, b := s.pts[n-2], s.pts[n-1]
		if (a[0] == b[0] && b[0] == p[0]) || (a[1] == b[1] && b[1] == p[1]) {
			s.pts[n-1] = p // extend the run
			return
		}
	}
	s.pts = append(s.pts, p)
}

func (s *steps) String() string {
	var sb strings.Builder
	for i, p := range s.pts {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%.1f,%.1f", p[0], p[1])
	}
	return sb.String()
}
