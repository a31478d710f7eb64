package registry

// The publisher reports: GET /demand, /analytics, /insights, /web-position,
// /usage and /adoption. The numbers come from registry/report; these
// handlers validate the query, apply the free window and negotiate JSON or
// an HTML page with a small chart.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/registry/report"
	"github.com/ardx-dev/ardx/web"
)

// The free window of the domain reports: anyone may read the last
// freeReportDays days and the top freeReportLimit rows of any domain;
// beyond that needs a key whose account owns the domain (by claim) or
// monitors it (Config.FullReports overrides the rule in tests).
const (
	freeReportDays  = 7
	freeReportLimit = 25

	defaultReportDays  = 30
	maxReportDays      = 365
	defaultReportLimit = 25
	maxReportLimit     = 200
)

// reportParams are the validated query of a domain report.
type reportParams struct {
	Domain       string
	Days         int
	Limit        int
	Metric       string
	IncludeProbe bool
}

// reportAccess tells the caller which window was served and why.
type reportAccess struct {
	// Full is true when the caller may read the whole window it asked for.
	Full           bool   `json:"full"`
	RequestedDays  int    `json:"requestedDays"`
	ServedDays     int    `json:"servedDays"`
	RequestedLimit int    `json:"requestedLimit,omitempty"`
	ServedLimit    int    `json:"servedLimit,omitempty"`
	FreeDays       int    `json:"freeDays"`
	FreeLimit      int    `json:"freeLimit"`
	Note           string `json:"note,omitempty"`
}

// parseReport validates a domain report's query: what lists the route's
// parameters besides domain and days. A nil problem means go on.
func (s *Service) parseReport(w http.ResponseWriter, r *http.Request, route string, extra ...string) (reportParams, bool) {
	p := reportParams{Days: defaultReportDays, Limit: defaultReportLimit}
	q := r.URL.Query()
	var fe fieldErrors
	fe.onlyParams(q, route, append([]string{"domain", "days"}, extra...)...)
	if v, ok := q["domain"]; ok && v[0] != "" {
		d, msg := parseDomain(v[0])
		if msg == "" && len(d) < 3 {
			msg = "must be at least 3 characters"
		}
		if msg != "" {
			fe.add("domain", msg)
		}
		p.Domain = d
	} else if !ok {
		fe.add("domain", "is required: the publisher's domain name, such as example.com")
	}
	intParam := func(name string, lo, hi int, dst *int) {
		if v, ok := q[name]; ok && v[0] != "" {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < lo || n > hi {
				fe.add(name, "must be one integer from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
				return
			}
			*dst = n
		}
	}
	intParam("days", 1, maxReportDays, &p.Days)
	for _, e := range extra {
		switch e {
		case "limit":
			intParam("limit", 1, maxReportLimit, &p.Limit)
		case "include_probe":
			n := 0
			intParam("include_probe", 0, 1, &n)
			p.IncludeProbe = n == 1
		case "metric":
			p.Metric = q.Get("metric")
		}
	}
	if pr := fe.problem(s.problems); pr != nil {
		s.problems.Write(w, r, pr)
		return p, false
	}
	return p, true
}

// fullReports reports whether r may read domain's reports past the free
// window: its key's account holds domain by claim or has a live monitoring
// of it.
func (s *Service) fullReports(r *http.Request, domain string) bool {
	if s.cfg.FullReports != nil {
		return s.cfg.FullReports(r, domain)
	}
	c := s.caller(r)
	return c != nil && (c.HoldsByClaim(domain) || s.monitor.Watching(c.AccountID, domain))
}

// reportWindow clips p to the free window unless the caller may read more.
func (s *Service) reportWindow(r *http.Request, p *reportParams, withLimit bool) reportAccess {
	a := reportAccess{Full: s.fullReports(r, p.Domain),
		RequestedDays: p.Days, FreeDays: freeReportDays, FreeLimit: freeReportLimit}
	if withLimit {
		a.RequestedLimit = p.Limit
	}
	if !a.Full {
		clipped := p.Days > freeReportDays || withLimit && p.Limit > freeReportLimit
		p.Days = min(p.Days, freeReportDays)
		if withLimit {
			p.Limit = min(p.Limit, freeReportLimit)
		}
		if clipped {
			a.Note = "This is the free window (the last " + strconv.Itoa(freeReportDays) + " days, the top " +
				strconv.Itoa(freeReportLimit) + "); the full window needs a key that monitors or owns " + p.Domain +
				" (POST /monitoring/start or the ownership claim)"
		}
	}
	a.ServedDays = p.Days
	if withLimit {
		a.ServedLimit = p.Limit
	}
	return a
}

// window is the last days UTC days, today included.
func (s *Service) window(days int, includeProbe bool) report.Window {
	to := report.DayOf(s.cfg.Now())
	return report.Window{From: to - report.Day(days-1), To: to, IncludeProbe: includeProbe}
}

// demandResponse is the body of GET /demand.
type demandResponse struct {
	report.DemandReport
	Access reportAccess `json:"access"`
	Notes  []string     `json:"notes"`
}

var demandNotes = []string{
	"Counts are exact: every answered search is counted when it is committed to the demand log, a few milliseconds after its answer.",
	"Nothing about who asked is stored: no address, key or user agent. Query texts are counted in lower case with spaces collapsed and shown as first asked.",
	"Traffic the registry generates itself (probes, benchmark runs, web-position checks) is left out unless include_probe=1.",
	"Private entries are never counted in reports.",
	"At most 1,000 distinct query texts are kept per domain per day; searches with further texts count in otherQueries.",
}

// handleDemand handles "GET /demand".
func (s *Service) handleDemand(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := s.parseReport(w, r, "GET /demand", "limit", "include_probe")
	if !ok {
		return
	}
	acc := s.reportWindow(r, &p, true)
	rep, err := report.Demand(s.db, p.Domain, s.window(p.Days, p.IncludeProbe), p.Limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body := demandResponse{DemandReport: rep, Access: acc, Notes: demandNotes}
	s.serveReport(w, r, body, func() reportPage { return demandPage(body) })
}

func demandPage(d demandResponse) reportPage {
	p := reportPage{
		Title:    "Demand for " + d.Domain,
		Subtitle: fmt.Sprintf("Which of its entries this registry returned, at what rank, and for what, %s to %s (%d days).", d.From, d.To, d.Days),
		Facts: []reportFact{
			{"searches that returned its entries", strconv.FormatInt(d.Searches, 10)},
			{"appearances in results", strconv.FormatInt(d.Appearances, 10)},
			{"on the first page", fmt.Sprintf("%.0f%%", d.FirstPageShare*100)},
			{"entries returned", strconv.Itoa(d.EntriesTotal)},
		},
		Caption: "Searches that returned its entries, per day",
		Notes:   append(slices.Clone(d.Notes), accessNote(d.Access)),
	}
	p.Chart = barChart(dayPoints(d.PerDay), "searches")
	entries := reportTable{Title: "Entries", Head: []string{"entry", "returned", "best rank", "first page"},
		Numeric: []bool{false, true, true, true}, Empty: "None of its entries was returned in this window."}
	for _, e := range d.Entries {
		entries.Rows = append(entries.Rows, []string{e.Identifier, strconv.FormatInt(e.Returned, 10), strconv.FormatInt(e.BestRank, 10), fmt.Sprintf("%.0f%%", e.FirstPageShare*100)})
	}
	queries := reportTable{Title: "What was asked", Head: []string{"query", "searches", "best rank", "mean best rank"},
		Numeric: []bool{false, true, true, true}, Empty: "No search returned its entries in this window."}
	for _, q := range d.Queries {
		queries.Rows = append(queries.Rows, []string{q.Text, strconv.FormatInt(q.Searches, 10), strconv.FormatInt(q.BestRank, 10), fmt.Sprintf("%.1f", q.MeanBestRank)})
	}
	ranks := reportTable{Title: "Ranks of its appearances", Head: []string{"rank", "appearances"}, Numeric: []bool{false, true}}
	for _, rc := range d.Ranks {
		ranks.Rows = append(ranks.Rows, []string{rc.Ranks, strconv.FormatInt(rc.Count, 10)})
	}
	p.Tables = []reportTable{entries, queries, ranks}
	return p
}

func dayPoints(days []report.DayCount) []chartPoint {
	out := make([]chartPoint, len(days))
	for i, d := range days {
		out[i] = chartPoint{Label: d.Date, Value: float64(d.Searches), Known: true}
	}
	return out
}

func accessNote(a reportAccess) string {
	if a.Full {
		return "Full window."
	}
	if a.Note != "" {
		return a.Note + "."
	}
	return fmt.Sprintf("Free window: up to the last %d days and the top %d rows.", a.FreeDays, a.FreeLimit)
}

// analyticsResponse is the body of GET /analytics.
type analyticsResponse struct {
	Domain         string            `json:"domain"`
	From           string            `json:"from"`
	To             string            `json:"to"`
	Days           int               `json:"days"`
	EntriesIndexed int               `json:"entriesIndexed"`
	Categories     []string          `json:"categories"`
	PerDay         []report.DayCount `json:"perDay"`
	ZeroResults    analyticsZero     `json:"zeroResultQueries"`
	Probes         analyticsProbes   `json:"probes"`
	Access         reportAccess      `json:"access"`
}

type analyticsZero struct {
	Total   int                `json:"total"`
	Queries []report.ZeroQuery `json:"queries"`
}

// analyticsProbes is what the probes saw of the domain's endpoints.
type analyticsProbes struct {
	Endpoints int                   `json:"endpoints"`
	Up        int                   `json:"up"`
	Down      int                   `json:"down"`
	Unknown   int                   `json:"unknown"`
	Entries   []reliabilityEndpoint `json:"entries"`
	// Unprobed counts entries without an endpoint a probe can call.
	Unprobed int `json:"unprobed"`
}

// maxAnalyticsEntries bounds the entries whose probes /analytics reads.
const maxAnalyticsEntries = 100

// handleAnalytics handles "GET /analytics".
func (s *Service) handleAnalytics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := s.parseReport(w, r, "GET /analytics")
	if !ok {
		return
	}
	acc := s.reportWindow(r, &p, false)
	win := s.window(p.Days, false)
	out := analyticsResponse{Domain: p.Domain, From: win.From.String(), To: win.To.String(), Days: win.Days(), Access: acc,
		Categories: []string{}, Probes: analyticsProbes{Entries: []reliabilityEndpoint{}}}
	var err error
	if out.PerDay, err = report.DomainDays(s.db, p.Domain, win); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Categories: the tags and capabilities of its public entries.
	pub := index.Filter{"publisher": {p.Domain}}
	facets, err := s.ix.Facets(r.Context(), "", pub, nil, []index.FacetRequest{{Field: "tags", Limit: 50, MinCount: 1}, {Field: "capabilities", Limit: 50, MinCount: 1}, {Field: "type", Limit: 20, MinCount: 1}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, b := range facets["type"].Buckets {
		out.EntriesIndexed += b.Count
	}
	out.EntriesIndexed += facets["type"].Other
	for _, f := range []string{"tags", "capabilities"} {
		for _, b := range facets[f].Buckets {
			if !slices.Contains(out.Categories, b.Value) {
				out.Categories = append(out.Categories, b.Value)
			}
		}
	}
	if out.ZeroResults.Queries, out.ZeroResults.Total, err = report.ZeroResultQueries(s.db, win, out.Categories, freeReportLimit); err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.ix.List(r.Context(), index.ListRequest{Publishers: []string{p.Domain}, Size: maxAnalyticsEntries})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, id := range list.IDs {
		rel, err := s.entryReliability(id)
		if err != nil {
			continue // removed meanwhile
		}
		ep, ok := rel.(reliabilityEndpoint)
		if !ok {
			out.Probes.Unprobed++
			continue
		}
		out.Probes.Endpoints++
		switch ep.State {
		case "up":
			out.Probes.Up++
		case "down":
			out.Probes.Down++
		default:
			out.Probes.Unknown++
		}
		out.Probes.Entries = append(out.Probes.Entries, ep)
	}
	s.serveReport(w, r, out, func() reportPage { return analyticsPage(out) })
}

func analyticsPage(a analyticsResponse) reportPage {
	p := reportPage{
		Title:    "Analytics for " + a.Domain,
		Subtitle: fmt.Sprintf("Its entries in this registry, %s to %s (%d days).", a.From, a.To, a.Days),
		Facts: []reportFact{
			{"entries indexed", strconv.Itoa(a.EntriesIndexed)},
			{"endpoints up", fmt.Sprintf("%d of %d", a.Probes.Up, a.Probes.Endpoints)},
			{"endpoints down", strconv.Itoa(a.Probes.Down)},
			{"zero-result queries in its categories", strconv.Itoa(a.ZeroResults.Total)},
		},
		Caption: "Searches that returned its entries, per day",
		Chart:   barChart(dayPoints(a.PerDay), "searches"),
		Notes: []string{
			"Probe traffic is left out. Categories are the tags and capabilities of its public entries.",
			"A probe sees what this registry's host sees; see /state-of-mcp for what a probe cannot see.",
			accessNote(a.Access),
		},
	}
	trend := reportTable{Title: "Rank trend", Head: []string{"day", "searches", "mean best rank"}, Numeric: []bool{false, true, true}}
	for _, d := range a.PerDay {
		if d.Searches > 0 {
			trend.Rows = append(trend.Rows, []string{d.Date, strconv.FormatInt(d.Searches, 10), fmt.Sprintf("%.1f", d.MeanBestRank)})
		}
	}
	trend.Empty = "No search returned its entries in this window."
	zero := reportTable{Title: "Zero-result queries in its categories", Head: []string{"query", "searches", "names"}, Numeric: []bool{false, true, false},
		Empty: "None in this window."}
	for _, z := range a.ZeroResults.Queries {
		zero.Rows = append(zero.Rows, []string{z.Text, strconv.FormatInt(z.Searches, 10), strings.Join(z.Matched, ", ")})
	}
	probes := reportTable{Title: "What the probes saw", Head: []string{"entry", "endpoint", "state", "last probe"}, Numeric: []bool{false, false, false, false},
		Empty: "No endpoint of its entries is probed."}
	for _, e := range a.Probes.Entries {
		last := "–"
		if e.Last != nil {
			last = e.Last.Class + " " + e.Last.At.Format("2006-01-02 15:04")
		}
		probes.Rows = append(probes.Rows, []string{e.Entry, e.Endpoint, e.State, last})
	}
	p.Tables = []reportTable{trend, zero, probes}
	return p
}

// insightsResponse is the body of GET /insights.
type insightsResponse struct {
	report.InsightsReport
	Access reportAccess `json:"access"`
	Notes  []string     `json:"notes"`
}

// handleInsights handles "GET /insights".
func (s *Service) handleInsights(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := s.parseReport(w, r, "GET /insights")
	if !ok {
		return
	}
	acc := s.reportWindow(r, &p, false)
	rep, err := report.Insights(s.db, p.Domain, s.window(p.Days, false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := insightsResponse{InsightsReport: rep, Access: acc, Notes: []string{
		"Positions only: the best rank of its entries for each of its top queries, per day, and the publishers whose public entries ranked above it (named by domain).",
		"Private entries are never counted. Probe traffic is left out.",
		"rankedAbove keeps up to 16 publishers per query and block of days; the publisher \"\" (shown as others) counts the rest.",
	}}
	s.serveReport(w, r, out, func() reportPage { return insightsPage(out) })
}

func insightsPage(in insightsResponse) reportPage {
	p := reportPage{
		Title:    "Insights for " + in.Domain,
		Subtitle: fmt.Sprintf("Its rank for its top queries and who ranks above it, %s to %s (%d days).", in.From, in.To, in.Days),
		Notes:    append(slices.Clone(in.Notes), accessNote(in.Access)),
	}
	if len(in.Queries) > 0 {
		q := in.Queries[0]
		pts := make([]chartPoint, len(q.Days))
		for i, d := range q.Days {
			pts[i] = chartPoint{Label: d.Date, Value: float64(d.BestRank), Known: d.Searches > 0}
		}
		p.Chart = rankChart(pts, "best rank")
		p.Caption = "Best rank per day for “" + q.Text + "” (rank 1 at the top; a grey tick: not returned that day)"
	}
	tq := reportTable{Title: "Top queries", Head: []string{"query", "searches", "best rank", "ranked above it"}, Numeric: []bool{false, true, true, false},
		Empty: "No search returned its entries in this window."}
	for _, q := range in.Queries {
		var above []string
		for _, a := range q.RankedAbove[:min(5, len(q.RankedAbove))] {
			name := a.Publisher
			if name == "" {
				name = "others"
			}
			above = append(above, fmt.Sprintf("%s (%d)", name, a.Searches))
		}
		tq.Rows = append(tq.Rows, []string{q.Text, strconv.FormatInt(q.Searches, 10), strconv.FormatInt(q.BestRank, 10), strings.Join(above, ", ")})
	}
	p.Tables = []reportTable{tq}
	return p
}

// ReportSources are the third-party interfaces of /usage and /web-position.
type ReportSources struct {
	// Usage names the public APIs /usage reads (report.DefaultUsageConfig
	// for the public ones); an empty base URL turns that source off.
	Usage report.UsageConfig
	// WebSearch is the web-search provider of /web-position; an empty
	// endpoint configures none, and the report says so.
	WebSearch report.WebSearchConfig
}

// checkSources refuses base URLs that are not absolute http(s) URLs.
func (rs ReportSources) check() error {
	for name, raw := range map[string]string{
		"usage GitHub base": rs.Usage.GitHubBase, "usage npm base": rs.Usage.NPMBase,
		"usage PyPI base": rs.Usage.PyPIBase, "usage Docker base": rs.Usage.DockerBase,
		"web-search endpoint": rs.WebSearch.Endpoint,
	} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
			return fmt.Errorf("registry: %s %q must be an absolute http(s) URL without query or fragment", name, raw)
		}
	}
	return nil
}

// domainBodies returns the bodies of domain's public entries (at most
// maxAnalyticsEntries), read from kv.
func (s *Service) domainBodies(ctx context.Context, domain string) ([]json.RawMessage, error) {
	list, err := s.ix.List(ctx, index.ListRequest{Publishers: []string{domain}, Size: maxAnalyticsEntries})
	if err != nil {
		return nil, err
	}
	entries, err := s.db.GetEntries(list.IDs)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(entries))
	for _, id := range list.IDs {
		if e, ok := entries[id]; ok && e.Owner == "" {
			out = append(out, e.Body)
		}
	}
	return out, nil
}

// usageResponse is the body of GET /usage.
type usageResponse struct {
	Domain  string            `json:"domain"`
	Metric  string            `json:"metric"`
	Metrics []string          `json:"metrics"`
	Days    int               `json:"days"`
	Targets []string          `json:"targets"`
	Today   []report.Figure   `json:"today"`
	History []report.UsageDay `json:"history"`
	Access  reportAccess      `json:"access"`
	Notes   []string          `json:"notes"`
}

// handleUsage handles "GET /usage".
func (s *Service) handleUsage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := s.parseReport(w, r, "GET /usage", "metric")
	if !ok {
		return
	}
	if p.Metric == "" {
		p.Metric = report.MetricStars
	}
	if !slices.Contains(report.Metrics, p.Metric) {
		s.problems.Write(w, r, s.problems.Invalid("metric: must be one of "+strings.Join(report.Metrics, ", "),
			web.FieldError{Field: "metric", Message: "must be one of " + strings.Join(report.Metrics, ", ")}))
		return
	}
	acc := s.reportWindow(r, &p, false)
	bodies, err := s.domainBodies(r.Context(), p.Domain)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := usageResponse{Domain: p.Domain, Metric: p.Metric, Metrics: report.Metrics, Days: p.Days, Access: acc,
		Targets: report.Targets(bodies, p.Metric), Today: []report.Figure{}, History: []report.UsageDay{},
		Notes: []string{
			"Counts published by third parties, read from their public interfaces with the source and time of each figure. Not demand, and not modelled.",
			"A figure that could not be read is unavailable (value null), never zero.",
			"Targets are the repositories and packages the domain's public entries name (URLs, and an MCP server's packages).",
		}}
	if out.Targets == nil {
		out.Targets = []string{}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if out.Today, err = s.usageSources.Read(ctx, p.Domain, p.Metric, out.Targets); err != nil {
		s.writeError(w, r, err)
		return
	}
	hist, err := s.usageSources.History(p.Domain, p.Metric, s.window(p.Days, false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if hist != nil {
		out.History = hist
	}
	s.serveReport(w, r, out, func() reportPage { return usagePage(out) })
}

func usagePage(u usageResponse) reportPage {
	p := reportPage{
		Title:    "Usage of " + u.Domain + ": " + u.Metric,
		Subtitle: "Counts published by third parties about what the domain's entries name; not demand.",
		Notes:    append(slices.Clone(u.Notes), "Other metrics: "+strings.Join(u.Metrics, ", ")+".", accessNote(u.Access)),
	}
	if len(u.Targets) > 0 {
		target := u.Targets[0]
		var pts []chartPoint
		for _, d := range u.History {
			pt := chartPoint{Label: d.Date}
			for _, f := range d.Figures {
				if f.Target == target && f.Available && f.Value != nil {
					pt.Value, pt.Known = float64(*f.Value), true
				}
			}
			pts = append(pts, pt)
		}
		p.Chart = barChart(pts, u.Metric)
		p.Caption = u.Metric + " of " + target + " per day recorded (grey: unavailable)"
	}
	t := reportTable{Title: "Today", Head: []string{"target", "figure", "source", "read at"}, Numeric: []bool{false, true, false, false},
		Empty: "The domain's public entries name nothing this metric can be read for."}
	for _, f := range u.Today {
		v := "unavailable: " + f.Reason
		if f.Available && f.Value != nil {
			v = strconv.FormatInt(*f.Value, 10)
		}
		t.Rows = append(t.Rows, []string{f.Target, v, f.Source, f.At.Format("2006-01-02 15:04 UTC")})
	}
	p.Tables = []reportTable{t}
	return p
}

// webPositionResponse is the body of GET /web-position.
type webPositionResponse struct {
	Domain     string            `json:"domain"`
	Days       int               `json:"days"`
	Configured bool              `json:"providerConfigured"`
	Provider   string            `json:"provider,omitempty"`
	Depth      int               `json:"depth"`
	Phrasings  []string          `json:"phrasings"`
	Today      []report.WebCheck `json:"today"`
	History    []report.WebCheck `json:"history"`
	Access     reportAccess      `json:"access"`
	Notes      []string          `json:"notes"`
}

// handleWebPosition handles "GET /web-position".
func (s *Service) handleWebPosition(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := s.parseReport(w, r, "GET /web-position")
	if !ok {
		return
	}
	acc := s.reportWindow(r, &p, false)
	out := webPositionResponse{Domain: p.Domain, Days: p.Days, Configured: s.webpos.Configured(), Provider: s.webpos.Provider(),
		Depth: report.WebDepth, Access: acc, Phrasings: []string{}, Today: []report.WebCheck{}, History: []report.WebCheck{},
		Notes: []string{
			"Positions only: the rank of the first web result on the domain or a subdomain among the provider's first results, per phrasing and day; no search volume.",
			"Phrasings are the representative queries of the domain's public entries and its top demand queries of the last 30 days.",
			"A phrasing not checked (no provider, a failed call, this registry's rate limit) has no position: unavailable is not 'not found'.",
		}}
	bodies, err := s.domainBodies(r.Context(), p.Domain)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out.Phrasings = s.phrasings(p.Domain, bodies)
	if !out.Configured {
		out.Notes = append([]string{"No web-search provider is configured on this registry (--web-search-url), so nothing was checked and no position is known."}, out.Notes...)
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		defer cancel()
		if out.Today, err = s.webpos.Check(ctx, p.Domain, out.Phrasings); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	hist, err := s.webpos.History(p.Domain, s.window(p.Days, false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if hist != nil {
		out.History = hist
	}
	s.serveReport(w, r, out, func() reportPage { return webPositionPage(out) })
}

// phrasings are the domain's tracked phrasings: its entries'
// representative queries, then its top demand queries.
func (s *Service) phrasings(domain string, bodies []json.RawMessage) []string {
	var out []string
	seen := map[string]bool{}
	add := func(q string) {
		n := report.NormalizeQuery(q)
		if n != "" && !seen[n] && len(out) < 10 {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, b := range bodies {
		var v struct {
			RQ []string `json:"representativeQueries"`
		}
		if json.Unmarshal(b, &v) == nil {
			for _, q := range v.RQ[:min(2, len(v.RQ))] {
				if len(out) < 5 {
					add(q)
				}
			}
		}
	}
	if d, err := report.Demand(s.db, domain, s.window(30, false), 10); err == nil {
		for _, q := range d.Queries {
			add(q.Text)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func webPositionPage(wp webPositionResponse) reportPage {
	p := reportPage{
		Title:    "Web position of " + wp.Domain,
		Subtitle: "Where the domain ranks on the open web for its tracked phrasings.",
		Notes:    append(slices.Clone(wp.Notes), accessNote(wp.Access)),
	}
	if wp.Configured {
		p.Facts = []reportFact{{"provider", wp.Provider}, {"phrasings tracked", strconv.Itoa(len(wp.Phrasings))}}
	} else {
		p.Facts = []reportFact{{"provider", "none configured"}, {"phrasings tracked", strconv.Itoa(len(wp.Phrasings))}}
	}
	t := reportTable{Title: "Today", Head: []string{"phrasing", "position", "checked"}, Numeric: []bool{false, true, false}, Empty: "Nothing checked today."}
	if !wp.Configured {
		t.Empty = "No web-search provider is configured on this registry, so no phrasing is checked and no position is known."
	}
	for _, c := range wp.Today {
		pos := "unavailable: " + c.Reason
		if c.Checked {
			pos = "not in the first " + strconv.Itoa(wp.Depth)
			if c.Position != nil {
				pos = strconv.Itoa(*c.Position)
			}
		}
		at := "–"
		if !c.At.IsZero() {
			at = c.At.Format("2006-01-02 15:04 UTC")
		}
		t.Rows = append(t.Rows, []string{c.Phrase, pos, at})
	}
	h := reportTable{Title: "Recorded positions", Head: []string{"day", "phrasing", "position"}, Numeric: []bool{false, false, true}, Empty: "No position recorded in this window."}
	for _, c := range wp.History {
		pos := "not in the first " + strconv.Itoa(wp.Depth)
		if c.Position != nil {
			pos = strconv.Itoa(*c.Position)
		}
		h.Rows = append(h.Rows, []string{c.Date, c.Phrase, pos})
	}
	p.Tables = []reportTable{t, h}
	return p
}

// adoptionResponse is the body of GET /adoption.
type adoptionResponse struct {
	Current report.Adoption   `json:"current"`
	History []report.Adoption `json:"history"`
	Notes   []string          `json:"notes"`
}

// adoptionEvery is how often /adoption recounts the index.
const adoptionEvery = time.Hour

// adoptionCache keeps the last count; a recount reads every entry.
type adoptionCache struct {
	mu   sync.Mutex
	last report.Adoption
	stop context.CancelFunc // of StartAdoptionSnapshots; nil when not started
}

// currentAdoption is the last count of the index, recounted (and stored
// as the day's snapshot) when it is an hour old or from another day.
func (s *Service) currentAdoption() (report.Adoption, error) {
	now := s.cfg.Now()
	s.adoption.mu.Lock()
	defer s.adoption.mu.Unlock()
	cur := s.adoption.last
	if !cur.TakenAt.IsZero() && now.Sub(cur.TakenAt) < adoptionEvery && cur.Date == report.DayOf(now).String() {
		return cur, nil
	}
	cur, err := report.ComputeAdoption(s.db, now)
	if err == nil {
		err = report.SaveAdoption(s.db, cur)
	}
	if err != nil {
		return report.Adoption{}, err
	}
	s.adoption.last = cur
	return cur, nil
}

// StartAdoptionSnapshots counts adoption across the index every hour until
// ctx ends or Close, so every day has its snapshot even when nobody asks
// /adoption that day. The first count waits a minute, out of start-up's way.
func (s *Service) StartAdoptionSnapshots(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	s.adoption.mu.Lock()
	s.adoption.stop = cancel
	s.adoption.mu.Unlock()
	go func() {
		wait := time.Minute
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = adoptionEvery
			if _, err := s.currentAdoption(); err != nil {
				s.log.Error("adoption snapshot failed", "err", err)
			}
		}
	}()
}

// handleAdoption handles "GET /adoption".
func (s *Service) handleAdoption(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	cur, err := s.currentAdoption()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hist, err := report.AdoptionHistory(s.db, s.window(maxReportDays, false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := adoptionResponse{Current: cur, History: hist, Notes: []string{
		"Counts of the public entries of this index; private entries are not counted.",
		"ardJson counts publishers with an entry read from /.well-known/ard.json; legacyOnly those read only from /.well-known/ai-catalog.json.",
		"MCP auth is what a live exchange saw (required, none), unknown without one. One snapshot a day is kept (the last of the day), recounted at most hourly, also when nobody asks.",
	}}
	s.serveReport(w, r, out, func() reportPage { return adoptionPage(out) })
}

func adoptionPage(a adoptionResponse) reportPage {
	c := a.Current
	p := reportPage{
		Title:    "Adoption across the index",
		Subtitle: fmt.Sprintf("What the %d public entries of %d publishers publish, as of %s.", c.Entries, c.Publishers.Total, c.TakenAt.Format("2006-01-02 15:04 UTC")),
		Facts: []reportFact{
			{"publishers with ard.json", strconv.Itoa(c.Publishers.ARD)},
			{"only the legacy path", strconv.Itoa(c.Publishers.LegacyOnly)},
			{"MCP servers", strconv.Itoa(c.MCP.Total)},
			{"A2A cards", strconv.Itoa(c.A2ACards)},
			{"OpenAPI operations", strconv.Itoa(c.OpenAPI)},
		},
		Caption: "Publishers with ard.json, per daily snapshot",
		Notes:   a.Notes,
	}
	pts := make([]chartPoint, len(a.History))
	for i, h := range a.History {
		pts[i] = chartPoint{Label: h.Date, Value: float64(h.Publishers.ARD), Known: true}
	}
	p.Chart = barChart(pts, "publishers with ard.json")
	t := reportTable{Title: "Figures", Head: []string{"what", "entries", "publishers"}, Numeric: []bool{false, true, true}}
	t.Rows = [][]string{
		{"llms.txt", strconv.Itoa(c.LLMsTxt.Entries), strconv.Itoa(c.LLMsTxt.Publishers)},
		{"trust manifests", strconv.Itoa(c.Trust.Entries), strconv.Itoa(c.Trust.Publishers)},
		{"representative queries", strconv.Itoa(c.RepQueries.Entries), strconv.Itoa(c.RepQueries.Publishers)},
	}
	mcp := reportTable{Title: "MCP servers by transport and auth", Head: []string{"", "servers"}, Numeric: []bool{false, true}}
	for _, k := range slices.Sorted(maps.Keys(c.MCP.ByTransport)) {
		mcp.Rows = append(mcp.Rows, []string{"transport " + k, strconv.Itoa(c.MCP.ByTransport[k])})
	}
	for _, k := range slices.Sorted(maps.Keys(c.MCP.ByAuth)) {
		mcp.Rows = append(mcp.Rows, []string{"auth " + k, strconv.Itoa(c.MCP.ByAuth[k])})
	}
	mcp.Empty = "No MCP server is indexed."
	p.Tables = []reportTable{t, mcp}
	return p
}
