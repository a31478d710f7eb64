package registry

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"

	"github.com/ardx-dev/ardx/web"
)

// reportPage is what templates/report.html shows of any report: a few
// facts, a chart of a daily series, tables and notes. Each report maps its
// payload onto it; the JSON form carries the same numbers.
type reportPage struct {
	Title    string
	Subtitle string
	Facts    []reportFact
	Chart    template.HTML
	Caption  string
	Tables   []reportTable
	Notes    []string
	JSONPath string
}

type reportFact struct{ Label, Value string }

type reportTable struct {
	Title   string
	Head    []string
	Rows    [][]string
	Numeric []bool // per column: right-aligned
	Empty   string // shown when Rows is empty
}

// serveReport writes v as JSON, or page(v) as HTML to a browser.
func (s *Service) serveReport(w http.ResponseWriter, r *http.Request, v any, page func() reportPage) {
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "no-cache")
	if !web.WantsHTML(r) {
		web.WriteJSON(w, http.StatusOK, v)
		return
	}
	p := page()
	p.JSONPath = r.URL.RequestURI()
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "report.html", p); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeHTMLPage(w, buf.Bytes())
}

// chartPoint is one bar of a daily chart.
type chartPoint struct {
	Label string
	Value float64
	Known bool // false: no figure that day (drawn as a gap, never as zero)
}

// The size of a daily chart's drawing: plot left of chartLeft are the value
// labels, below chartBottom the first and last day.
const chartW, chartH, chartLeft, chartBottom = 720, 200, 48, 22

// yLabel is a value label at height y of a chart.
type yLabel struct {
	y    float64
	text string
}

// dayChart draws a daily chart: the axis, the value labels, one slot a
// point drawn by mark (x is the slot's left edge), the first and last day.
// It is built from numbers and escaped labels only.
func dayChart(points []chartPoint, what string, labels []yLabel, mark func(svg *bytes.Buffer, x, slot float64, p chartPoint)) template.HTML {
	var svg bytes.Buffer
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" style="max-width:760px" role="img" aria-label="%s per day">`,
		chartW, chartH, template.HTMLEscapeString(what))
	fmt.Fprintf(&svg, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#5d6875"/>`, chartLeft, chartH-chartBottom, chartW, chartH-chartBottom)
	for _, l := range labels {
		fmt.Fprintf(&svg, `<text x="%d" y="%.0f" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, chartLeft-6, l.y, template.HTMLEscapeString(l.text))
	}
	if len(points) > 0 {
		slot := float64(chartW-chartLeft) / float64(len(points))
		for i, p := range points {
			mark(&svg, float64(chartLeft)+float64(i)*slot, slot, p)
		}
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d">%s</text>`, chartLeft, chartH-6, template.HTMLEscapeString(points[0].Label))
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, chartW, chartH-6, template.HTMLEscapeString(points[len(points)-1].Label))
	}
	svg.WriteString(`</svg>`)
	return template.HTML(svg.String())
}

// maxKnown is the largest known value of points, at least floor.
func maxKnown(points []chartPoint, floor float64) float64 {
	for _, p := range points {
		if p.Known && p.Value > floor {
			floor = p.Value
		}
	}
	return floor
}

// gapMark is a day without a figure: a grey tick at the foot, never a
// zero that was not measured.
func gapMark(svg *bytes.Buffer, x, slot float64, p chartPoint, why string) {
	w := max(slot*0.8, 1)
	fmt.Fprintf(svg, `<rect x="%.1f" y="%d" width="%.1f" height="3" fill="#b8c0ca"><title>%s: %s</title></rect>`,
		x+(slot-w)/2, chartH-chartBottom-3, w, template.HTMLEscapeString(p.Label), why)
}

// barChart draws points as bars from zero to the largest value.
func barChart(points []chartPoint, what string) template.HTML {
	maxV := maxKnown(points, 0)
	plotH := float64(chartH - chartBottom - 10)
	labels := []yLabel{{16, trimFloat(maxV)}, {chartH - chartBottom, "0"}}
	return dayChart(points, what, labels, func(svg *bytes.Buffer, x, slot float64, p chartPoint) {
		if !p.Known {
			gapMark(svg, x, slot, p, "no figure")
			return
		}
		h := 0.0
		if maxV > 0 {
			h = plotH * p.Value / maxV
		}
		w := max(slot*0.8, 1)
		fmt.Fprintf(svg, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2f5d8a"><title>%s: %s</title></rect>`,
			x+(slot-w)/2, float64(chartH-chartBottom)-h, w, h, template.HTMLEscapeString(p.Label), trimFloat(p.Value))
	})
}

// rankChart draws ranks as dots with rank 1 at the top (lower is better).
func rankChart(points []chartPoint, what string) template.HTML {
	worst := maxKnown(points, 1)
	top, foot := 14.0, float64(chartH-chartBottom-8)
	labels := []yLabel{{top + 4, "rank 1"}}
	if worst > 1 {
		labels = append(labels, yLabel{foot + 4, trimFloat(worst)})
	}
	return dayChart(points, what, labels, func(svg *bytes.Buffer, x, slot float64, p chartPoint) {
		if !p.Known {
			gapMark(svg, x, slot, p, "not returned")
			return
		}
		y := top
		if worst > 1 {
			y = top + (foot-top)*(p.Value-1)/(worst-1)
		}
		fmt.Fprintf(svg, `<circle cx="%.1f" cy="%.1f" r="5" fill="#2f5d8a"><title>%s: rank %s</title></circle>`,
			x+slot/2, y, template.HTMLEscapeString(p.Label), trimFloat(p.Value))
	})
}

func trimFloat(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}
