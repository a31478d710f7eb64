package registry

// GET /state-of-mcp: the measured share of the indexed agentic web that
// answers, from the probes' records; JSON to a machine, HTML to a browser.

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/probe"
	"github.com/ardx-dev/ardx/web"
)

// stateLimitations are what a probe can and cannot see, carried in the
// payload so that no number travels without them.
var stateLimitations = []string{
	"A probe sees what this registry's host sees: a network path, DNS view or rate limit that differs elsewhere is not seen.",
	"MCP servers are probed over Streamable HTTP only; a server offering only the older HTTP+SSE transport is not probed. No tool is ever called: a server that lists tools may still fail when one is used.",
	"An A2A agent is probed by reading its card, never by sending it a task; an API by a HEAD of its base URL, never by calling an operation; so 'answered' means reachable and well-formed, not working.",
	"auth_required counts as answered: the endpoint is there and wants a key; what it does with one is not seen.",
	"Endpoints that resolve to private or reserved addresses are never dialled (class blocked).",
	"Rates are Wilson lower bounds at 95% and are withheld under the minimum number of probes; latency percentiles are the upper bounds of histogram buckets.",
	"Operations of one API share their base URL and are probed once; counts are of distinct endpoints, not of entries.",
}

// stateOfMCP is the body of /state-of-mcp.
type stateOfMCP struct {
	GeneratedAt time.Time             `json:"generatedAt"`
	Window      stateWindow           `json:"window"`
	MinProbes   int                   `json:"minProbes"`
	Answered    string                `json:"answered"`
	Healthy     string                `json:"healthy"`
	All         *kindStats            `json:"all"`
	ByKind      map[string]*kindStats `json:"byKind"`
	ByTransport map[string]*kindStats `json:"byTransport"`
	Days        []dayRate             `json:"days"`
	Probing     stateProbing          `json:"probing"`
	Limitations []string              `json:"limitations"`
}

type stateWindow struct {
	Days       int        `json:"days"`
	FirstProbe *time.Time `json:"firstProbeDay,omitempty"`
	LastProbe  *time.Time `json:"lastProbe,omitempty"`
}

type stateProbing struct {
	// Running is false when this process does not probe (probing turned
	// off): the numbers are then what earlier runs recorded.
	Running         bool              `json:"running"`
	IntervalSeconds int               `json:"intervalSeconds"`
	DownAfter       int               `json:"downAfter"`
	Methods         map[string]string `json:"methods"`
}

func (s *Service) stateOfMCP() (stateOfMCP, error) {
	sv, err := s.surveyNow()
	if err != nil {
		return stateOfMCP{}, err
	}
	out := stateOfMCP{
		GeneratedAt: sv.at, MinProbes: probe.MinProbes,
		Window:   stateWindow{Days: sv.window},
		Answered: "share of probes that ended ok or auth_required",
		Healthy:  "last probe ok in under 5 s, and for an MCP server a non-empty tools/list",
		All:      sv.all, ByKind: sv.byKind, ByTransport: sv.byTransport, Days: sv.dayRates(),
		Probing:     stateProbing{Running: s.prober.running.Load(), IntervalSeconds: int(s.cfg.Probe.Interval / time.Second), DownAfter: s.cfg.Probe.DownAfter, Methods: probeMethod},
		Limitations: stateLimitations,
	}
	if !sv.first.IsZero() {
		f := sv.first
		out.Window.FirstProbe = &f
	}
	if !sv.last.IsZero() {
		l := sv.last
		out.Window.LastProbe = &l
	}
	return out, nil
}

// handleStateOfMCP handles "GET /state-of-mcp".
func (s *Service) handleStateOfMCP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var fe fieldErrors
	fe.onlyParams(r.URL.Query(), "GET /state-of-mcp")
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	st, err := s.stateOfMCP()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Vary", "Accept")
	if !web.WantsHTML(r) {
		web.WriteJSON(w, http.StatusOK, st)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "state-of-mcp.html", statePage(st)); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeHTMLPage(w, buf.Bytes())
}

// writeHTMLPage sends a self-contained page: no scripts, no external assets.
func writeHTMLPage(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// classColours are the chart's colours per outcome class (answered in
// greens, failures in warm colours, never-dialled in grey).
var classColours = map[string]string{
	string(probe.ClassOK): "#2e8b57", string(probe.ClassAuthRequired): "#8cc9a0",
	string(probe.ClassHTTPError): "#e0a030", string(probe.ClassProtocolError): "#c8553d",
	string(probe.ClassTimeout): "#8e44ad", string(probe.ClassConnect): "#5d6875",
	string(probe.ClassBlocked): "#b8c0ca", "not_probed": "#e6e9ee",
}

var kindTitles = map[string]string{
	probeKindMCP: "MCP servers", probeKindA2A: "A2A agents", probeKindAPI: "API base URLs", probeKindURL: "Other URLs",
}

// page data of templates/state-of-mcp.html.
type stateView struct {
	St       stateOfMCP
	Rows     []stateRow
	Legend   []legendItem
	Chart    template.HTML
	Bound    string
	Interval string
}

type stateRow struct {
	Title    string
	K        *kindStats
	Bound    string
	P50, P95 string
}

type legendItem struct{ Class, Colour string }

func statePage(st stateOfMCP) stateView {
	v := stateView{St: st, Bound: boundText(st.All.Rate), Interval: (time.Duration(st.Probing.IntervalSeconds) * time.Second).String()}
	classes := append(slices.Clone(probe.Classes), "not_probed")
	for _, c := range classes {
		v.Legend = append(v.Legend, legendItem{Class: string(c), Colour: classColours[string(c)]})
	}
	var svg bytes.Buffer
	const width, rowH, labelW = 640, 34, 150
	rows := append([]string{}, probeKinds...)
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" style="max-width:760px" role="img" aria-label="last probe outcome of each endpoint, by kind">`, width, rowH*len(rows)+10)
	for i, k := range rows {
		ks := st.ByKind[k]
		v.Rows = append(v.Rows, stateRow{Title: kindTitles[k], K: ks, Bound: boundText(ks.Rate), P50: msText(ks.Latency.P50Ms), P95: msText(ks.Latency.P95Ms)})
		y := i*rowH + 5
		fmt.Fprintf(&svg, `<text x="0" y="%d" font-size="14" fill="#1b1f24">%s (%d)</text>`, y+20, template.HTMLEscapeString(kindTitles[k]), ks.Endpoints)
		x := float64(labelW)
		barW := float64(width - labelW - 10)
		if ks.Endpoints == 0 {
			fmt.Fprintf(&svg, `<rect x="%d" y="%d" width="%.0f" height="24" fill="#f1f3f6" stroke="#dde2e8"/><text x="%d" y="%d" font-size="12" fill="#5d6875">none probed yet</text>`, labelW, y+4, barW, labelW+8, y+20)
			continue
		}
		for _, c := range classes {
			n := ks.LastOutcomes[string(c)]
			if c == "not_probed" {
				n = ks.Endpoints - ks.Probed
			}
			if n == 0 {
				continue
			}
			w := barW * float64(n) / float64(ks.Endpoints)
			fmt.Fprintf(&svg, `<rect x="%.1f" y="%d" width="%.1f" height="24" fill="%s"><title>%s: %d</title></rect>`, x, y+4, w, classColours[string(c)], c, n)
			if w > 28 {
				fmt.Fprintf(&svg, `<text x="%.1f" y="%d" font-size="12" fill="%s">%d</text>`, x+4, y+20, textOn(string(c)), n)
			}
			x += w
		}
	}
	svg.WriteString(`</svg>`)
	v.Chart = template.HTML(svg.String()) // built here from numbers and escaped titles only
	return v
}

func textOn(class string) string {
	switch class {
	case string(probe.ClassAuthRequired), string(probe.ClassBlocked), "not_probed", string(probe.ClassHTTPError):
		return "#1b1f24"
	}
	return "#ffffff"
}

func boundText(r probe.Rate) string {
	if r.LowerBound == nil {
		return "withheld (" + r.Withheld + ")"
	}
	return fmt.Sprintf("≥ %.1f%% (%d of %d probes)", *r.LowerBound*100, r.Successes, r.Probes)
}

func msText(ms *int64) string {
	if ms == nil {
		return "–"
	}
	return fmt.Sprintf("≤ %d ms", *ms)
}
