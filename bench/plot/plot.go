// Package plot draws the benchmark's figures with gonum.org/v1/plot.
//
// WriteFailover draws crash-failover latency: one column per series (an
// algorithm or implementation at a cluster size), with its p50, p90 and
// maximum as marks joined by a line, on a logarithmic millisecond axis so
// that clusters a hundred times apart stay readable side by side.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// MaxSeries bounds the columns of one figure.
const MaxSeries = 64

// ErrSeries reports series that cannot be drawn.
var ErrSeries = errors.New("plot: bad series")

// Series is one column of the failover figure.
type Series struct {
	// Name labels the column, e.g. "bully 5" or "raft 150ms 5".
	Name string
	// P50, P90 and Max are the failover quantiles; all positive, with
	// P50 <= P90 <= Max.
	P50, P90, Max time.Duration
}

// Figure size: the width grows with the number of series.
const (
	height       = 14 * vg.Centimeter
	minWidth     = 14 * vg.Centimeter
	columnWidth  = 2.6 * vg.Centimeter
	captionSpace = 0.8 * vg.Centimeter
)

// WriteFailover writes an SVG of the crash-failover latency of series to
// path, with caption (e.g. the machine and date) under the plot.
func WriteFailover(path, caption string, series []Series) error {
	if filepath.Ext(path) != ".svg" {
		return fmt.Errorf("plot: %s: want a .svg file", path)
	}
	if err := check(series); err != nil {
		return err
	}
	p, err := failoverPlot(series)
	if err != nil {
		return err
	}
	width := max(minWidth, columnWidth*vg.Length(len(series)))
	canvas := vgsvg.New(width, height)
	drawFailover(draw.New(canvas), p, caption)

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	return f.Close()
}

// drawFailover draws p and, below it, the caption on a white background.
func drawFailover(dc draw.Canvas, p *gplot.Plot, caption string) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, 0, 0, captionSpace, 0))
	if caption == "" {
		return
	}
	style := p.Title.TextStyle
	style.Font = font.From(gplot.DefaultFont, 9)
	style.Color = color.Gray{Y: 0x40}
	style.XAlign, style.YAlign = draw.XLeft, draw.YCenter
	dc.FillText(style, vg.Point{X: dc.Min.X + 0.3*vg.Centimeter, Y: dc.Min.Y + captionSpace/2}, oneLine(caption))
}

func check(series []Series) error {
	if len(series) == 0 {
		return fmt.Errorf("%w: none", ErrSeries)
	}
	if len(series) > MaxSeries {
		return fmt.Errorf("%w: %d series, at most %d", ErrSeries, len(series), MaxSeries)
	}
	seen := map[string]bool{}
	for i, s := range series {
		if strings.TrimSpace(s.Name) == "" {
			return fmt.Errorf("%w: series %d has no name", ErrSeries, i)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: %q appears twice", ErrSeries, s.Name)
		}
		seen[s.Name] = true
		if s.P50 <= 0 {
			return fmt.Errorf("%w: %q: P50 %s is not positive", ErrSeries, s.Name, s.P50)
		}
		if s.P90 < s.P50 || s.Max < s.P90 {
			return fmt.Errorf("%w: %q: want P50 <= P90 <= Max, got %s, %s, %s", ErrSeries, s.Name, s.P50, s.P90, s.Max)
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// marks are the quantiles drawn per column.
var marks = []struct {
	name  string
	value func(Series) time.Duration
	glyph draw.GlyphDrawer
	color color.Color
}{
	{"p50", func(s Series) time.Duration { return s.P50 }, draw.CircleGlyph{}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	{"p90", func(s Series) time.Duration { return s.P90 }, draw.TriangleGlyph{}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	{"max", func(s Series) time.Duration { return s.Max }, draw.CrossGlyph{}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
}

func failoverPlot(series []Series) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = "Crash failover: kill the leader, until every survivor names the new one"
	p.X.Label.Text = "cluster (algorithm, size)"
	// Slanted, the long names of neighbouring columns do not overlap.
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	p.Y.Label.Text = "failover (ms, log scale)"
	p.Y.Scale = gplot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Title.Padding = 0.3 * vg.Centimeter
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = 0.3*vg.Centimeter, -0.2*vg.Centimeter

	names := make([]string, len(series))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		names[i] = s.Name
		lo, hi = math.Min(lo, ms(s.P50)), math.Max(hi, ms(s.Max))
		span, err := plotter.NewLine(plotter.XYs{{X: float64(i), Y: ms(s.P50)}, {X: float64(i), Y: ms(s.Max)}})
		if err != nil {
			return nil, err
		}
		span.Color = color.Gray{Y: 0xa0}
		span.Width = vg.Points(1.5)
		p.Add(span)
	}
	for _, m := range marks {
		xys := make(plotter.XYs, len(series))
		for i, s := range series {
			xys[i] = plotter.XY{X: float64(i), Y: ms(m.value(s))}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Shape: m.glyph, Color: m.color, Radius: vg.Points(4)}
		p.Add(sc)
		p.Legend.Add(m.name, sc)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(names...)
	// Room above for the legend, below for the lowest mark.
	p.Y.Min, p.Y.Max = lo/2, hi*4
	return p, nil
}

// oneLine keeps a caption on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// logTicks marks 1, 2 and 5 times each power of ten, labelled, and the
// other integer multiples unlabelled.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []gplot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []gplot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for k := 1; k <= 9; k++ {
			v := float64(k) * base
			if v < lo || v > hi {
				continue
			}
			t := gplot.Tick{Value: v}
			if k == 1 || k == 2 || k == 5 {
				t.Label = fmt.Sprintf("%g", v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
