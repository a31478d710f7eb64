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

// barChart draws points as an SVG bar chart with its largest value and the
// first and last labels; built from numbers and escaped labels only.
func barChart(points []chartPoint, what string) template.HTML {
	const width, height, left, bottom = 720, 200, 48, 22
	var svg bytes.Buffer
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" style="max-width:760px" role="img" aria-label="%s per day">`,
		width, height, template.HTMLEscapeString(what))
	maxV := 0.0
	for _, p := range points {
		if p.Known && p.Value > maxV {
			maxV = p.Value
		}
	}
	plotH := float64(height - bottom - 10)
	fmt.Fprintf(&svg, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#5d6875"/>`, left, height-bottom, width, height-bottom)
	fmt.Fprintf(&svg, `<text x="%d" y="16" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, left-6, trimFloat(maxV))
	fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d" text-anchor="end">0</text>`, left-6, height-bottom)
	if len(points) > 0 {
		slot := float64(width-left) / float64(len(points))
		barW := max(slot*0.8, 1)
		for i, p := range points {
			x := float64(left) + float64(i)*slot + (slot-barW)/2
			if !p.Known {
				fmt.Fprintf(&svg, `<rect x="%.1f" y="%d" width="%.1f" height="3" fill="#b8c0ca"><title>%s: no figure</title></rect>`,
					x, height-bottom-3, barW, template.HTMLEscapeString(p.Label))
				continue
			}
			h := 0.0
			if maxV > 0 {
				h = plotH * p.Value / maxV
			}
			fmt.Fprintf(&svg, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2f5d8a"><title>%s: %s</title></rect>`,
				x, float64(height-bottom)-h, barW, h, template.HTMLEscapeString(p.Label), trimFloat(p.Value))
		}
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d">%s</text>`, left, height-6, template.HTMLEscapeString(points[0].Label))
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, width, height-6, template.HTMLEscapeString(points[len(points)-1].Label))
	}
	svg.WriteString(`</svg>`)
	return template.HTML(svg.String())
}

// rankChart draws ranks per day as dots on an axis with rank 1 at the
// top (lower is better); a day without a rank is a grey tick at the foot.
func rankChart(points []chartPoint, what string) template.HTML {
	const width, height, left, bottom = 720, 200, 48, 22
	var svg bytes.Buffer
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" style="max-width:760px" role="img" aria-label="%s per day">`,
		width, height, template.HTMLEscapeString(what))
	worst := 1.0
	for _, p := range points {
		if p.Known && p.Value > worst {
			worst = p.Value
		}
	}
	top, foot := 14.0, float64(height-bottom-8)
	y := func(rank float64) float64 {
		if worst == 1 {
			return top
		}
		return top + (foot-top)*(rank-1)/(worst-1)
	}
	fmt.Fprintf(&svg, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#5d6875"/>`, left, height-bottom, width, height-bottom)
	fmt.Fprintf(&svg, `<text x="%d" y="%.0f" font-size="12" fill="#39424d" text-anchor="end">rank 1</text>`, left-6, top+4)
	if worst > 1 {
		fmt.Fprintf(&svg, `<text x="%d" y="%.0f" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, left-6, foot+4, trimFloat(worst))
	}
	if len(points) > 0 {
		slot := float64(width-left) / float64(len(points))
		for i, p := range points {
			x := float64(left) + float64(i)*slot + slot/2
			if !p.Known {
				fmt.Fprintf(&svg, `<rect x="%.1f" y="%d" width="%.1f" height="3" fill="#b8c0ca"><title>%s: not returned</title></rect>`,
					x-max(slot*0.4, 0.5), height-bottom-3, max(slot*0.8, 1), template.HTMLEscapeString(p.Label))
				continue
			}
			fmt.Fprintf(&svg, `<circle cx="%.1f" cy="%.1f" r="5" fill="#2f5d8a"><title>%s: rank %s</title></circle>`,
				x, y(p.Value), template.HTMLEscapeString(p.Label), trimFloat(p.Value))
		}
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d">%s</text>`, left, height-6, template.HTMLEscapeString(points[0].Label))
		fmt.Fprintf(&svg, `<text x="%d" y="%d" font-size="12" fill="#39424d" text-anchor="end">%s</text>`, width, height-6, template.HTMLEscapeString(points[len(points)-1].Label))
	}
	svg.WriteString(`</svg>`)
	return template.HTML(svg.String())
}

func trimFloat(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}
