package report

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TimePoint is one point of a timeline: T seconds since the start of the measurement, V the value
// (pods/s for binding-rate timelines).
type TimePoint struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

// Geometry of the plots, in SVG user units (= CSS pixels at 100%).
const (
	plotWidth   = 720
	plotHeight  = 320
	plotLeft    = 64 // room for y tick labels and the y axis title
	plotRight   = 16
	plotTop     = 16
	plotBottom  = 48 // room for x tick labels and the x axis title
	legendRow   = 18
	seriesCount = 6 // colours in the stylesheet, .s0 … .s5
)

// plot is what the SVG template draws: everything is precomputed here so that the template only
// places numbers, and the output is deterministic.
type plot struct {
	ID             string // anchor, also the aria label's source
	Title          string
	XLabel, YLabel string
	Width, Height  int
	X0, X1, Y0, Y1 float64 // the plot area in SVG coordinates (Y0 is the top)
	XTicks, YTicks []tick
	Series         []series
	CountUnit      string // what a series' Count counts, for the legend
}

type tick struct {
	Pos   string // SVG coordinate along the axis
	Label string
}

type series struct {
	Label   string
	Class   string // colour class
	Points  string // SVG polyline points
	LegendY string // the legend sits under the x axis title, a row per series
	Count   int    // data points, for the legend
}

// XMid and YMid centre the axis titles.
func (p plot) XMid() string { return coord((p.X0 + p.X1) / 2) }
func (p plot) YMid() string { return coord((p.Y0 + p.Y1) / 2) }

// LegendLineEnd is where a legend entry's colour sample ends and its label starts.
func (p plot) LegendLineEnd() string { return coord(p.X0 + 24) }

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// orderLabels puts the comparison's old and new labels first (so they keep their colours across
// plots), then the rest alphabetically.
func orderLabels(labels []string, first ...string) []string {
	var out []string
	for _, f := range first {
		if f != "" && slices.Contains(labels, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return slices.Contains(out, l) })
	slices.Sort(rest)
	return append(out, rest...)
}

// scale maps a data range [lo, hi] onto pixels [p0, p1].
type scale struct{ lo, hi, p0, p1 float64 }

func (s scale) at(v float64) float64 { return s.p0 + (v-s.lo)/(s.hi-s.lo)*(s.p1-s.p0) }

// niceTicks covers [lo, hi] with about n ticks at steps of 1, 2 or 5 times a power of ten, so tick
// labels are round numbers; it returns the widened range and the tick values.
func niceTicks(lo, hi float64, n int) (float64, float64, []float64, float64) {
	if !(hi > lo) {
		if lo == 0 {
			hi = 1
		} else {
			lo, hi = lo-math.Abs(lo)/2, hi+math.Abs(hi)/2
		}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	// The usual thresholds pick the round step nearest to raw (geometrically).
	var step float64
	switch r := raw / mag; {
	case r < 1.5:
		step = mag
	case r < 3:
		step = 2 * mag
	case r < 7:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	first, last := math.Floor(lo/step+1e-9), math.Ceil(hi/step-1e-9)
	var ticks []float64
	for i := first; i <= last; i++ {
		ticks = append(ticks, i*step)
	}
	return first * step, last * step, ticks, step
}

func tickLabel(v, step float64) string {
	if v == 0 {
		return "0" // also for -0, which 'f' formatting would print as "-0"
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func newPlot(id, title, xlabel, ylabel, countUnit string) plot {
	return plot{ID: id, Title: title, XLabel: xlabel, YLabel: ylabel, CountUnit: countUnit, Width: plotWidth, Height: plotHeight,
		X0: plotLeft, X1: plotWidth - plotRight, Y0: plotTop, Y1: plotHeight - plotBottom}
}

// axes sets the ticks and returns the scales for data ranges [xlo, xhi] × [ylo, yhi].
func (p *plot) axes(xlo, xhi, ylo, yhi float64, yticks []float64, ystep float64) (scale, scale) {
	xlo, xhi, xticks, xstep := niceTicks(xlo, xhi, 8)
	if yticks == nil {
		ylo, yhi, yticks, ystep = niceTicks(ylo, yhi, 5)
	}
	xs := scale{xlo, xhi, p.X0, p.X1}
	ys := scale{ylo, yhi, p.Y1, p.Y0}
	for _, t := range xticks {
		p.XTicks = append(p.XTicks, tick{coord(xs.at(t)), tickLabel(t, xstep)})
	}
	for _, t := range yticks {
		p.YTicks = append(p.YTicks, tick{coord(ys.at(t)), tickLabel(t, ystep)})
	}
	return xs, ys
}

func (p *plot) addSeries(label string, pts [][2]float64, count int, xs, ys scale) {
	var b strings.Builder
	for i, pt := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(coord(xs.at(pt[0])) + "," + coord(ys.at(pt[1])))
	}
	i := len(p.Series)
	p.Series = append(p.Series, series{Label: label, Class: "s" + strconv.Itoa(i%seriesCount), Points: b.String(),
		LegendY: coord(plotHeight + float64(i)*legendRow + legendRow/2), Count: count})
	p.Height = plotHeight + (i+1)*legendRow + 4
}

func finitePoint(x, y float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && !math.IsNaN(y) && !math.IsInf(y, 0)
}

// timelinePlot draws each label's timeline as a polyline, time on x and the value on y, both axes
// from 0 (rates and elapsed time are never negative, and a zero baseline keeps drops honest).
func timelinePlot(timelines map[string][]TimePoint, first ...string) *plot {
	clean := map[string][]TimePoint{}
	xhi, yhi, xlo, ylo := 0.0, 0.0, 0.0, 0.0
	for l, pts := range timelines {
		for _, pt := range pts {
			if finitePoint(pt.T, pt.V) {
				clean[l] = append(clean[l], pt)
				xlo, xhi, ylo, yhi = min(xlo, pt.T), max(xhi, pt.T), min(ylo, pt.V), max(yhi, pt.V)
			}
		}
	}
	if len(clean) == 0 {
		return nil
	}
	p := newPlot("binding-rate", "Binding rate over time", "time since start (s)", "pods/s", "points")
	xs, ys := p.axes(xlo, xhi, ylo, yhi, nil, 0)
	for _, l := range orderLabels(slices.Collect(maps.Keys(clean)), first...) {
		pts := slices.Clone(clean[l])
		slices.SortStableFunc(pts, func(a, b TimePoint) int { return cmp.Compare(a.T, b.T) })
		xy := make([][2]float64, len(pts))
		for i, pt := range pts {
			xy[i] = [2]float64{pt.T, pt.V}
		}
		p.addSeries(l, xy, len(pts), xs, ys)
	}
	return &p
}

// cdfPlot draws each label's empirical CDF as a step line: the fraction of samples at or below x.
func cdfPlot(samples map[string][]float64, first ...string) *plot {
	clean := map[string][]float64{}
	xlo, xhi := 0.0, 0.0
	for l, vs := range samples {
		for _, v := range vs {
			if finitePoint(v, 0) {
				clean[l] = append(clean[l], v)
				xlo, xhi = min(xlo, v), max(xhi, v)
			}
		}
	}
	if len(clean) == 0 {
		return nil
	}
	p := newPlot("gang-latency", "Gang latency CDF", "gang latency (s)", "fraction of gangs", "gangs")
	xs, ys := p.axes(xlo, xhi, 0, 1, []float64{0, 0.25, 0.5, 0.75, 1}, 0.01)
	for _, l := range orderLabels(slices.Collect(maps.Keys(clean)), first...) {
		vs := slices.Clone(clean[l])
		slices.Sort(vs)
		n := float64(len(vs))
		xy := [][2]float64{{xs.lo, 0}}
		for i, v := range vs {
			xy = append(xy, [2]float64{v, float64(i) / n}, [2]float64{v, float64(i+1) / n})
		}
		xy = append(xy, [2]float64{xs.hi, 1})
		p.addSeries(l, xy, len(vs), xs, ys)
	}
	return &p
}
