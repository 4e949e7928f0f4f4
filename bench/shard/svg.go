package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// panel is one plot of the chart: x is the number of replicas, 1 to xMax.
type panel struct {
	x0, y0, w, h int // the plot area
	xMax, yMax   float64
	sb           *strings.Builder
}

func (p panel) px(x float64) float64 { return float64(p.x0) + float64(p.w)*(x-1)/(p.xMax-1) }
func (p panel) py(y float64) float64 { return float64(p.y0) + float64(p.h)*(1-y/p.yMax) }

// axes draws the frame, the grid and the labels.
func (p panel) axes(title, yLabel string, yStep float64) {
	sb := p.sb
	fmt.Fprintf(sb, `<text x="%d" y="%d" font-size="13">%s</text>`+"\n", p.x0, p.y0-12, title)
	for i := 0; float64(i)*yStep <= p.yMax+1e-9; i++ {
		y := float64(i) * yStep
		fmt.Fprintf(sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", p.x0, p.py(y), p.x0+p.w, p.py(y))
		fmt.Fprintf(sb, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", p.x0-6, p.py(y)+4, strconv.FormatFloat(math.Round(y*1000)/1000, 'f', -1, 64))
	}
	for x := 1.0; x <= p.xMax; x++ {
		fmt.Fprintf(sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", p.px(x), p.y0, p.px(x), p.y0+p.h)
		fmt.Fprintf(sb, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", p.px(x), p.y0+p.h+16, x)
	}
	fmt.Fprintf(sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", p.x0, p.y0, p.w, p.h)
	fmt.Fprintf(sb, `<text x="%d" y="%d" text-anchor="middle">replicas (N)</text>`+"\n", p.x0+p.w/2, p.y0+p.h+34)
	cy := p.y0 + p.h/2
	fmt.Fprintf(sb, `<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">%s</text>`+"\n", p.x0-38, cy, p.x0-38, cy, yLabel)
}

// curve draws f over [1, xMax].
func (p panel) curve(f func(float64) float64, color, dash string) {
	var pts []string
	for i := 0; i <= 80; i++ {
		x := 1 + (p.xMax-1)*float64(i)/80
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.px(x), p.py(min(f(x), p.yMax))))
	}
	fmt.Fprintf(p.sb, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s" points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
}

// series draws points joined by a line; hollow draws open circles.
func (p panel) series(xs, ys []float64, color string, hollow bool, line bool) {
	var pts []string
	for i := range xs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.px(xs[i]), p.py(min(ys[i], p.yMax))))
	}
	if line && len(pts) > 1 {
		fmt.Fprintf(p.sb, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
	}
	fill := color
	if hollow {
		fill = "white"
	}
	for i := range xs {
		fmt.Fprintf(p.sb, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" stroke="%s" stroke-width="2"/>`+"\n", p.px(xs[i]), p.py(min(ys[i], p.yMax)), fill, color)
	}
}

// legend writes entries from (x, y) down.
func legend(sb *strings.Builder, x, y int, entries [][3]string) {
	for i, e := range entries { // label, color, style: a dash array ("" solid), "o" a dot, "O" a ring, "bar", or "none" (text only)
		ly := y + i*18
		switch {
		case e[2] == "none":
		case e[2] == "bar":
			fmt.Fprintf(sb, `<rect x="%d" y="%d" width="10" height="14" fill="%s" opacity="0.6"/>`+"\n", x+9, ly-7, e[1])
		case e[2] == "o" || e[2] == "O":
			fill := e[1]
			if e[2] == "O" {
				fill = "white"
			}
			fmt.Fprintf(sb, `<circle cx="%d" cy="%d" r="4.5" fill="%s" stroke="%s" stroke-width="2"/>`+"\n", x+14, ly, fill, e[1])
		default:
			fmt.Fprintf(sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", x, ly, x+28, ly, e[1], e[2])
		}
		fmt.Fprintf(sb, `<text x="%d" y="%d">%s</text>`+"\n", x+34, ly+4, e[0])
	}
}

const (
	colorOurs   = "#1f77b4"
	colorThesis = "#ff7f0e"
	colorTarget = "#d62728"
	colorIdeal  = "#888"
)

// chart is bench/results/shard.svg: capacity and the sharded type's heap
// per replica, both relative to the singleton, against N, with the
// targets, the ideal and the thesis's figures.
func chart(c config, res *results) string {
	const width, height = 1180, 500
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="16" y="22" font-size="14">ctrlkit sharding: %d ConfigMaps, replicas as processes, %d workers × %v Reconcile each (make bench-shard)</text>`+"\n",
		c.n, c.workers, c.cost)
	xMax := 5.0 // the thesis's anchor is at 5 instances
	if len(res.stages) > 0 {
		xMax = max(xMax, float64(res.stages[len(res.stages)-1].n))
	}

	var xs, caps, sharders, otherXs, others []float64
	baseName := "the singleton"
	if len(res.stages) > 0 {
		base := baselineOf(res)
		baseName = base.name
		for _, s := range res.stages {
			j := judge(s, base, res.idleSharded, c.n)
			xs = append(xs, float64(s.n))
			caps = append(caps, j.capRatio*float64(s.n))
			sharders = append(sharders, j.sharderRatio)
			if j.hasOthers {
				otherXs = append(otherXs, float64(s.n))
				others = append(others, j.worstOthers)
			}
		}
	}

	capP := panel{x0: 70, y0: 70, w: 330, h: 300, xMax: xMax, yMax: xMax, sb: &sb}
	capP.axes("capacity ÷ the singleton's (p99 queue time ≤ 1 s)", "× the singleton", 1)
	capP.curve(func(x float64) float64 { return x }, colorIdeal, "4,4")
	capP.curve(func(x float64) float64 { return capacityTarget * x }, colorTarget, "8,4")
	capP.series([]float64{1, 5}, []float64{1, float64(thesisChanges5) / thesisChanges1}, colorThesis, false, true)
	capP.series([]float64{5}, []float64{float64(thesisObjects5) / thesisObjects1}, colorThesis, true, false)
	capP.series(xs, caps, colorOurs, false, true)

	// The heap axis reaches past the highest point: the sharder's replica
	// may hold more than the singleton without sharding.
	yMax, yStep := 1.4, 0.2
	if top := slices.Max(append([]float64{0}, sharders...)); top > 1.3 {
		yStep = 0.5
		yMax = math.Ceil((top+0.1)/yStep) * yStep
	}
	heapP := panel{x0: 520, y0: 70, w: 330, h: 300, xMax: xMax, yMax: yMax, sb: &sb}
	heapP.axes("sharded type's heap per replica ÷ the singleton's", "× the singleton", yStep)
	heapP.curve(func(x float64) float64 { return 1 / x }, colorIdeal, "4,4")
	heapP.curve(func(x float64) float64 { return heapTarget / x }, colorTarget, "8,4")
	lo, hi := float64(thesisShardMiBLo)/thesisSingletonMiB, float64(thesisShard)/thesisSingletonMiB
	fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="10" height="%.1f" fill="%s" opacity="0.6"/>`+"\n", heapP.px(3)-5, heapP.py(hi), heapP.py(lo)-heapP.py(hi), colorThesis)
	heapP.series(xs, sharders, colorOurs, false, true)
	heapP.series(otherXs, others, colorOurs, true, true)
	legend(&sb, 900, 80, [][3]string{
		{"ctrlkit (right: the replica", colorOurs, "o"},
		{"running the sharder)", "", "none"},
		{"ctrlkit, right: the other", colorOurs, "O"},
		{"replicas (the highest)", "", "none"},
		{fmt.Sprintf("target (0.8·N; %.1f/N)", heapTarget), colorTarget, "8,4"},
		{"ideal (N; 1/N)", colorIdeal, "4,4"},
		{"thesis: changes/s", colorThesis, "o"},
		{"thesis: objects", colorThesis, "O"},
		{"thesis: MiB per shard", colorThesis, "bar"},
		{"of 3, ÷ singleton's", "", "none"},
	})
	notes := []string{
		fmt.Sprintf("The singleton: %s. Left: the highest update rate whose p99 queue time (informer event → Reconcile start) stays ≤ 1 s.", baseName),
		"Right: heap in use after GC less an idle replica's; the replica running the sharder also watches the ring's unlabelled objects.",
		fmt.Sprintf("Thesis (timebertt/kubernetes-controller-sharding): 1 → 5 instances, %s → %s objects and %d → %d changes/s at its SLOs; %d MiB singleton vs %d–%d MiB per shard with 3 shards.",
			comma(thesisObjects1), comma(thesisObjects5), thesisChanges1, thesisChanges5, thesisSingletonMiB, thesisShardMiBLo, thesisShard),
	}
	for i, n := range notes {
		fmt.Fprintf(&sb, `<text x="16" y="%d" fill="#555">%s</text>`+"\n", height-58+i*18, n)
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
