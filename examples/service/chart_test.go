package main

import (
	"fmt"
	"html"
	"os"
	"sort"
	"strings"
	"time"
)

// mark is a moment the chart shows as a vertical line: onset, promotions, faults.
type mark struct {
	At    time.Time
	Label string
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// writeChart draws per-node reads/s and writes/s (each node while it is a master) in two
// panels over the run, with the marks, as an SVG file.
func writeChart(path string, s *sampler, start, end time.Time, marks []mark) error {
	const w, ph, left, top, gap = 1100, 260, 70, 30, 50
	bin := 500 * time.Millisecond
	nbins := int(end.Sub(start)/bin) + 1
	nodes := append([]string(nil), s.nodes...)
	sort.Strings(nodes)
	series := map[string][2][]float64{}
	var peak [2]float64
	for _, n := range nodes {
		var r, wr []float64
		for b := range nbins {
			from := start.Add(time.Duration(b) * bin)
			dr, dw := s.delta(from, from.Add(bin))
			r = append(r, float64(dr[n])/bin.Seconds())
			wr = append(wr, float64(dw[n])/bin.Seconds())
			peak[0], peak[1] = max(peak[0], r[b]), max(peak[1], wr[b])
		}
		series[n] = [2][]float64{r, wr}
	}
	x := func(t time.Time) float64 {
		return left + float64(w-left-20)*t.Sub(start).Seconds()/end.Sub(start).Seconds()
	}
	var b strings.Builder
	height := top + 2*ph + gap + 60 + 14*len(marks)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, height)
	for p, title := range []string{"reads/s per node (as master)", "writes/s per node (as master)"} {
		y0 := float64(top + p*(ph+gap))
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-size="13">%s</text>`+"\n", left, y0-8, title)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, w-left-20, ph)
		fmt.Fprintf(&b, `<text x="5" y="%.0f">%.0f</text><text x="5" y="%.0f">0</text>`+"\n", y0+10, peak[p], y0+ph)
		for i, n := range nodes {
			var pts []string
			for k, v := range series[n][p] {
				t := start.Add(time.Duration(k) * bin)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(t), y0+float64(ph)*(1-v/max(peak[p], 1))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.3" points="%s"/>`+"\n", palette[i%len(palette)], strings.Join(pts, " "))
		}
		for _, m := range marks {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#555" stroke-dasharray="3,3"/>`+"\n", x(m.At), x(m.At), y0, y0+ph)
		}
	}
	y := top + 2*ph + gap + 10
	for i, n := range nodes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", left+i*170, y, palette[i%len(palette)], html.EscapeString(n))
	}
	for i, m := range marks {
		fmt.Fprintf(&b, `<text x="%d" y="%d">%5.1fs  %s</text>`+"\n", left, y+20+14*i, m.At.Sub(start).Seconds(), html.EscapeString(m.Label))
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
