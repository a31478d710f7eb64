package registry

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/web"
)

// noParams refuses any query parameter on a route that takes none (the
// onlyParams rule); it reports whether the handler may go on.
func (s *Service) noParams(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	var fe fieldErrors
	fe.onlyParams(r.URL.Query(), r.Method+" "+r.URL.Path)
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return false
	}
	return true
}

const (
	defaultStatsDays = 30
	minStatsDays     = 7
	maxStatsDays     = 90
	// maxStatsTypes bounds byType; entries of rarer types still count in
	// the total.
	maxStatsTypes = 200
)

// healthResponse is the body of GET /health.
type healthResponse struct {
	Status    string `json:"status"`
	Documents uint64 `json:"documents"`
}

// handleHealth handles "GET /health": liveness plus the index size.
func (s *Service) handleHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	// Public numbers count public entries: a private entry's existence is
	// its owner's business.
	n, err := s.ix.CountPublic(r.Context())
	if err != nil {
		s.log.Error("health: index count failed", "err", err)
		s.problems.Write(w, r, s.problems.New(web.SlugServiceUnavailable, "the search index is not answering"))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, healthResponse{Status: "ok", Documents: n})
}

// statsResponse is the body of GET /stats.
type statsResponse struct {
	Days       int             `json:"days"`
	From       string          `json:"from"` // first UTC day of the window
	To         string          `json:"to"`   // last UTC day (today)
	Entries    statsEntries    `json:"entries"`
	Searches   statsSearches   `json:"searches"`
	Federation []statsUpstream `json:"federation"`
}

type statsEntries struct {
	Total  int            `json:"total"`
	ByType map[string]int `json:"byType"`
}

type statsSearches struct {
	Total          int        `json:"total"`
	ZeroResults    int        `json:"zeroResults"`
	ZeroResultRate float64    `json:"zeroResultRate"` // zeroResults / total; 0 with no searches
	PerDay         []statsDay `json:"perDay"`
}

type statsDay struct {
	Date        string `json:"date"`
	Searches    int    `json:"searches"`
	ZeroResults int    `json:"zeroResults"`
}

// statsUpstream counts how an upstream answered federated searches in the
// window.
type statsUpstream struct {
	Upstream string `json:"upstream"`
	OK       int    `json:"ok"`
	Error    int    `json:"error"`
	Timeout  int    `json:"timeout"`
}

// handleStats handles "GET /stats?days=N": entries by type, and searches per
// day, zero-result rate and federation outcomes over the last N days (UTC,
// today included) from the demand log. Searches answered in the last moment
// may still be queued for the log.
func (s *Service) handleStats(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	days := defaultStatsDays
	var fe fieldErrors
	q := r.URL.Query()
	fe.onlyParams(q, "GET /stats", "days")
	if v, ok := q["days"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < minStatsDays || n > maxStatsDays {
			fe.add("days", "must be one integer from "+strconv.Itoa(minStatsDays)+" to "+strconv.Itoa(maxStatsDays))
		} else {
			days = n
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}

	// Counted over the index as an anonymous caller sees it, so private
	// entries and their types stay out of public numbers.
	facets, err := s.ix.Facets(r.Context(), "", nil, nil, []index.FacetRequest{{Field: "type", Limit: maxStatsTypes, MinCount: 1}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	byType := map[string]int{}
	total := facets["type"].Other
	for _, b := range facets["type"].Buckets {
		byType[b.Value] = b.Count
		total += b.Count
	}
	now := s.cfg.Now().UTC()
	from := now.AddDate(0, 0, -(days - 1))
	perDay, err := s.db.DemandDays(from, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}

	resp := statsResponse{
		Days:       days,
		From:       from.Format("2006-01-02"),
		To:         now.Format("2006-01-02"),
		Entries:    statsEntries{Total: total, ByType: byType},
		Searches:   statsSearches{PerDay: make([]statsDay, 0, len(perDay))},
		Federation: []statsUpstream{},
	}
	upIndex := map[string]int{}
	for _, up := range s.upstreams {
		upIndex[up.base] = len(resp.Federation)
		resp.Federation = append(resp.Federation, statsUpstream{Upstream: up.base})
	}
	for _, d := range perDay {
		resp.Searches.Total += d.Searches
		resp.Searches.ZeroResults += d.ZeroResults
		resp.Searches.PerDay = append(resp.Searches.PerDay, statsDay{Date: d.Date, Searches: d.Searches, ZeroResults: d.ZeroResults})
		for base, outcomes := range d.Upstreams {
			i, ok := upIndex[base]
			if !ok { // an upstream configured earlier, since removed
				i = len(resp.Federation)
				upIndex[base] = i
				resp.Federation = append(resp.Federation, statsUpstream{Upstream: base})
			}
			resp.Federation[i].OK += outcomes[outcomeOK]
			resp.Federation[i].Error += outcomes[outcomeError]
			resp.Federation[i].Timeout += outcomes[outcomeTimeout]
		}
	}
	if resp.Searches.Total > 0 {
		resp.Searches.ZeroResultRate = float64(resp.Searches.ZeroResults) / float64(resp.Searches.Total)
	}
	if resp.Entries.ByType == nil {
		resp.Entries.ByType = map[string]int{}
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// handleOpenAPI handles "GET /openapi.json".
func (s *Service) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(s.openapi)
}
