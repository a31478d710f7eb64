package registry

// GET /reliability: the share of probes an endpoint answered, per day and
// over the window, as a Wilson lower bound with the counts beside it.

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/probe"
	"github.com/ardx-dev/ardx/web"
)

// maxEntryParam is the longest entry identifier /reliability takes.
const maxEntryParam = 400

// probeMethod says what a probe of each kind does, carried in the payloads.
var probeMethod = map[string]string{
	probeKindMCP: "MCP over Streamable HTTP: server/discover or initialize, then tools/list (a 401 or 403 is auth_required, which counts as answered)",
	probeKindA2A: "GET of the agent card, parsed: it must be a JSON object with a name and a service URL",
	probeKindAPI: "HEAD of the API's base URL (never an operation): any answer below 500 counts; 401/403 is auth_required",
	probeKindURL: "conditional GET of the entry URL: 2xx or 304 counts",
}

// reliabilityEndpoint is one probed endpoint in /reliability.
type reliabilityEndpoint struct {
	Entry     string `json:"entry"`
	ProbedAs  string `json:"probedAs,omitempty"` // the server entry, for an MCP tool
	Kind      string `json:"kind"`
	Transport string `json:"transport"`
	Endpoint  string `json:"endpoint"`
	Method    string `json:"method"`
	probe.Summary
	State     string     `json:"state"` // up, down, unknown
	StateFrom *time.Time `json:"stateSince,omitempty"`
	Last      *lastProbe `json:"last"`
	Tools     *int       `json:"tools,omitempty"`
}

// lastProbe is the last probe of an endpoint.
type lastProbe struct {
	At        time.Time `json:"at"`
	Class     string    `json:"class"`
	Error     string    `json:"error,omitempty"`
	LatencyMs int64     `json:"latencyMs,omitempty"`
}

// handleReliability handles "GET /reliability[?entry=URN]".
func (s *Service) handleReliability(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var fe fieldErrors
	fe.onlyParams(q, "GET /reliability", "entry")
	entry := ""
	if v, ok := q["entry"]; ok {
		switch {
		case len(v) > 1:
			fe.add("entry", "must be given once")
		case utf8.RuneCountInString(v[0]) > maxEntryParam:
			fe.add("entry", "must be at most "+strconv.Itoa(maxEntryParam)+" characters")
		default:
			entry = strings.TrimSpace(v[0])
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	if entry == "" {
		sv, err := s.surveyNow()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		web.WriteJSON(w, http.StatusOK, sv.reliability())
		return
	}
	out, err := s.entryReliability(entry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, out)
}

// entryReliability is the report of one entry's endpoint.
func (s *Service) entryReliability(id string) (any, error) {
	e, err := s.db.GetEntry(id)
	if errors.Is(err, kv.ErrNotFound) || err == nil && e.Owner != "" {
		return nil, s.problems.New(web.SlugNotFound, "no public entry "+strconv.Quote(id)+" in this registry")
	}
	if err != nil {
		return nil, err
	}
	ep, server, ok := endpointOf(e)
	probedAs := ""
	if !ok && server != "" {
		if se, err := s.db.GetEntry(server); err == nil && se.Owner == "" {
			ep, _, ok = endpointOf(se)
			probedAs = server
		}
	}
	if !ok {
		return map[string]any{
			"entry": id, "probed": false, "minProbes": probe.MinProbes,
			"detail": "this entry has no endpoint that can be probed (no http(s) URL, an MCP server without a streamable-http remote, or an API without a base URL)",
		}, nil
	}
	sum, err := probe.Summarize(s.db, ep.name(), s.cfg.Probe.Window, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	return reliabilityOf(id, probedAs, ep, sum), nil
}

func reliabilityOf(id, probedAs string, ep endpoint, sum probe.Summary) reliabilityEndpoint {
	out := reliabilityEndpoint{Entry: id, ProbedAs: probedAs, Kind: ep.kind, Transport: ep.transport,
		Endpoint: firstOf(ep.url, ep.cardURL), Method: probeMethod[ep.kind], Summary: sum, State: "unknown"}
	if l := sum.Last; l != nil {
		out.Last = &lastProbe{At: l.At, Class: l.Class, Error: l.Error, LatencyMs: l.LatencyMs}
		if l.State != "" {
			out.State = l.State
			since := l.Since
			out.StateFrom = &since
		}
		out.Tools = l.Tools
	}
	return out
}

// surveyTTL is how long the registry-wide aggregate is reused: it reads
// every endpoint's window, and probes land minutes apart anyway.
const surveyTTL = 30 * time.Second

// surveyCache holds the last registry-wide aggregate.
type surveyCache struct {
	mu  sync.Mutex
	at  time.Time
	val *survey
}

// kindStats aggregates the endpoints of one kind (or all).
type kindStats struct {
	Endpoints int `json:"endpoints"`
	Probed    int `json:"probed"`
	Up        int `json:"up"`
	Down      int `json:"down"`
	// Blocked endpoints resolve to addresses the SSRF guard refuses: never
	// dialled, so neither up nor down.
	Blocked int `json:"blocked"`
	Unknown int `json:"unknown"`
	// Healthy counts endpoints whose last probe was ok within 5 s (and,
	// for an MCP server, listed at least one tool).
	Healthy int `json:"healthy"`
	probe.Rate
	Latency probe.Latency `json:"latency"`
	// LastOutcomes counts each probed endpoint's last outcome class.
	LastOutcomes map[string]int `json:"lastOutcomes"`
	// Outcomes counts every probe in the window by class.
	Outcomes map[string]int64 `json:"outcomes"`
	hist     probe.Histogram
	succ     int64
	total    int64
}

func newKindStats() *kindStats {
	ks := &kindStats{LastOutcomes: map[string]int{}, Outcomes: map[string]int64{}}
	for _, c := range probe.Classes {
		ks.LastOutcomes[string(c)] = 0
		ks.Outcomes[string(c)] = 0
	}
	return ks
}

func (ks *kindStats) add(sum probe.Summary) {
	ks.Endpoints++
	ks.succ += sum.Successes
	ks.total += sum.Probes
	ks.hist.Add(sum.Histogram())
	for c, n := range sum.Outcomes {
		ks.Outcomes[c] += n
	}
	if sum.Last == nil {
		ks.Unknown++
		return
	}
	ks.Probed++
	ks.LastOutcomes[sum.Last.Class]++
	if l := sum.Last; l.Class == string(probe.ClassOK) && l.LatencyMs < 5000 && (l.Group != probeKindMCP || l.Tools != nil && *l.Tools > 0) {
		ks.Healthy++
	}
	switch {
	case sum.Last.Class == string(probe.ClassBlocked):
		ks.Blocked++
	case sum.Last.State == probe.StateUp:
		ks.Up++
	case sum.Last.State == probe.StateDown:
		ks.Down++
	default:
		ks.Unknown++
	}
}

func (ks *kindStats) finish() {
	ks.Rate = probe.NewRate(ks.succ, ks.total)
	ks.Latency = ks.hist.Latency()
}

// survey is the registry-wide aggregate of every probed endpoint.
type survey struct {
	at          time.Time
	window      int
	first, last time.Time // of the probes in the window
	all         *kindStats
	byKind      map[string]*kindStats
	byTransport map[string]*kindStats
	days        map[string]*[2]int64 // day -> successes, probes
}

// surveyNow returns the aggregate, recomputed at most every surveyTTL.
func (s *Service) surveyNow() (*survey, error) {
	c := &s.survey
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.cfg.Now()
	if c.val != nil && now.Sub(c.at) < surveyTTL && now.After(c.at) {
		return c.val, nil
	}
	sv := &survey{at: now.UTC(), window: s.cfg.Probe.Window, all: newKindStats(),
		byKind: map[string]*kindStats{}, byTransport: map[string]*kindStats{}, days: map[string]*[2]int64{}}
	for _, k := range probeKinds {
		sv.byKind[k] = newKindStats()
		err := probe.SummarizeAll(s.db, k+" ", sv.window, now, func(sum probe.Summary) bool {
			sv.add(k, sum)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	sv.all.finish()
	for _, ks := range sv.byKind {
		ks.finish()
	}
	for _, ks := range sv.byTransport {
		ks.finish()
	}
	c.at, c.val = now, sv
	return sv, nil
}

func (sv *survey) add(kind string, sum probe.Summary) {
	sv.all.add(sum)
	sv.byKind[kind].add(sum)
	if sum.Last != nil && sum.Last.Path != "" {
		tk := kind + "/" + sum.Last.Path
		if sv.byTransport[tk] == nil {
			sv.byTransport[tk] = newKindStats()
		}
		sv.byTransport[tk].add(sum)
	}
	for _, d := range sum.Days {
		c := sv.days[d.Day]
		if c == nil {
			c = &[2]int64{}
			sv.days[d.Day] = c
		}
		c[0] += d.Successes
		c[1] += d.Probes
	}
	if sum.Last != nil {
		if sv.last.IsZero() || sum.Last.At.After(sv.last) {
			sv.last = sum.Last.At
		}
	}
	if len(sum.Days) > 0 {
		if d, err := time.Parse(time.DateOnly, sum.Days[0].Day); err == nil && (sv.first.IsZero() || d.Before(sv.first)) {
			sv.first = d
		}
	}
}

// dayRates lists the window's days that had probes, oldest first.
func (sv *survey) dayRates() []dayRate {
	out := []dayRate{}
	for i := sv.window - 1; i >= 0; i-- {
		day := sv.at.AddDate(0, 0, -i).Format(time.DateOnly)
		if c := sv.days[day]; c != nil {
			out = append(out, dayRate{Day: day, Rate: probe.NewRate(c[0], c[1])})
		}
	}
	return out
}

// dayRate is one day of the registry-wide view.
type dayRate struct {
	Day string `json:"day"`
	probe.Rate
}

// reliability is the registry-wide view of /reliability.
func (sv *survey) reliability() map[string]any {
	return map[string]any{
		"scope":       "registry",
		"generatedAt": sv.at,
		"windowDays":  sv.window,
		"minProbes":   probe.MinProbes,
		"confidence":  "Wilson score lower bound at 95% (z = 1.96); answered = ok or auth_required",
		"all":         sv.all,
		"byKind":      sv.byKind,
		"days":        sv.dayRates(),
	}
}
