package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"github.com/celebrity-go/celebrity"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeTSChart draws per-node Redis commands per second over time, with markers for the
// celebrity's onset and fade, each instance's promotion and demotion, and the skew below.
func writeTSChart(path string, cfg config, ts tsConfig, nodes []string, r *tsResult) error {
	top := plot.New()
	top.Title.Text = fmt.Sprintf("Closed loop: per-node Redis commands/s — %d instances, celebrity at %.0f%% of reads from t=%.0fs to t=%.0fs",
		cfg.instances, cfg.share*100, ts.onset.Seconds(), ts.fade.Seconds())
	top.X.Label.Text = "time (s)"
	top.Y.Label.Text = "commands/s"
	top.Legend.Top = true
	var peak float64
	for n, addr := range nodes {
		pts := make(plotter.XYs, len(r.samples))
		for i, s := range r.samples {
			pts[i].X, pts[i].Y = s.at.Seconds(), s.perS[n]
			peak = max(peak, s.perS[n])
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(n)
		l.Width = vg.Points(1.2)
		top.Add(l)
		top.Legend.Add("node "+addr, l)
	}
	vline := func(p *plot.Plot, x, y float64, c color.Color, label string) error {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: y}})
		if err != nil {
			return err
		}
		l.Color = c
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		if label != "" {
			p.Legend.Add(label, l)
		}
		return nil
	}
	grey := color.RGBA{120, 120, 120, 255}
	if err := vline(top, ts.onset.Seconds(), peak*1.1, grey, fmt.Sprintf("onset t=%.0fs / fade t=%.0fs", ts.onset.Seconds(), ts.fade.Seconds())); err != nil {
		return err
	}
	if err := vline(top, ts.fade.Seconds(), peak*1.1, grey, ""); err != nil {
		return err
	}
	var promo, demo plotter.XYs
	for _, ev := range r.events {
		y := peak * (1.02 + 0.08*float64(ev.instance)/float64(max(cfg.instances, 1)))
		if ev.kind == celebrity.EventPromoted {
			promo = append(promo, plotter.XY{X: ev.at.Seconds(), Y: y})
		} else {
			demo = append(demo, plotter.XY{X: ev.at.Seconds(), Y: y})
		}
	}
	for _, m := range []struct {
		pts   plotter.XYs
		c     color.Color
		label string
	}{{promo, color.RGBA{0, 150, 0, 255}, "promotion applied (one mark per instance)"},
		{demo, color.RGBA{200, 0, 0, 255}, "demotion applied (one mark per instance)"}} {
		if len(m.pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(m.pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = m.c
		sc.GlyphStyle.Radius = vg.Points(1.5)
		top.Add(sc)
		top.Legend.Add(m.label, sc)
	}
	top.Y.Min, top.Y.Max = 0, peak*1.25

	bottom := plot.New()
	bottom.Title.Text = fmt.Sprintf("Skew (busiest node / mean) per 1 s window; naive run with the celebrity: %.2f", r.naiveSkew)
	bottom.X.Label.Text = "time (s)"
	bottom.Y.Label.Text = "max/mean"
	pts := make(plotter.XYs, len(r.samples))
	for i, s := range r.samples {
		pts[i].X, pts[i].Y = s.at.Seconds(), windowSkew(r.samples, i, 2)
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	bottom.Add(l)
	ref, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1.2}, {X: ts.duration.Seconds(), Y: 1.2}})
	if err != nil {
		return err
	}
	ref.Color = grey
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	bottom.Add(ref)
	bottom.Legend.Add("target 1.2", ref)
	bottom.Y.Min = 1

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
