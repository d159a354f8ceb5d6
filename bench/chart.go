package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeChart draws two panels into one PNG: the Redis commands each cluster node executed
// per 100 reads under each strategy (a load that does not depend on the machine's speed), and the source loads of the mass-expiry run per mode.
func writeChart(path string, cfg config, nodes []string, runs []runResult, exp []expiryResult) error {
	top := plot.New()
	top.Title.Text = fmt.Sprintf("Load per cluster node: Redis commands per 100 reads — Zipf(%.2f) over %d keys + one key at %.0f%% of reads",
		cfg.alpha, cfg.keys, cfg.share*100)
	top.Y.Label.Text = "commands per 100 reads"
	top.Legend.Top = true
	top.Legend.Left = true
	top.Legend.XOffs = vg.Millimeter * 4
	var peak float64
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = fmt.Sprintf("%s (skew %.2f)", r.strategy, r.skew)
	}
	w := vg.Points(18)
	for n, addr := range nodes {
		vals := make(plotter.Values, len(runs))
		for i, r := range runs {
			vals[i] = 100 * float64(r.perNode[n]) / float64(max(r.reads, 1))
			peak = max(peak, vals[i])
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(n)
		b.Offset = w * vg.Length(float64(n)-float64(len(nodes)-1)/2)
		top.Add(b)
		top.Legend.Add("node "+addr, b)
	}
	top.NominalX(names...)
	top.Y.Min, top.Y.Max = 0, peak*1.35

	bottom := plot.New()
	bottom.Title.Text = fmt.Sprintf("Mass expiry: source loads for %d hot keys missing at once, read by %d instances x %d readers",
		cfg.expiryKeys+1, cfg.expiryInstances, cfg.expiryReaders)
	bottom.Y.Label.Text = "source loads"
	vals := make(plotter.Values, len(exp))
	labels := make([]string, len(exp))
	for i, e := range exp {
		vals[i] = float64(e.sourceLoads)
		labels[i] = fmt.Sprintf("%s (%d)", e.mode, e.sourceLoads)
	}
	b, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return err
	}
	b.LineStyle.Width = 0
	b.Color = plotutil.Color(3)
	bottom.Add(b)
	bottom.NominalX(labels...)

	img := vgimg.New(11*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
