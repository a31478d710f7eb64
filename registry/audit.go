package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/web"
)

// POST /audit {domain} reports where a domain stands: where its manifest was
// found, which entries are valid, which this registry holds, how many of its
// identifiers every other registry holds (each configured upstream, and the
// allowed discovered ones, asked with federation=none and a publisher
// filter), and at what rank this registry returns each entry for its own
// representative queries. Positions and counts only; nothing is stored.

const (
	auditTimeout = 40 * time.Second
	// auditRankDepth is how deep a representative query's ranking is read.
	auditRankDepth = 100
	// maxAuditQueries bounds the local searches of one audit.
	maxAuditQueries = 200
	// maxCoverageProbes bounds the searches sent to each registry: one by
	// domain, then one per entry not yet seen, by its displayName.
	maxCoverageProbes = 10
	coverageTimeout   = 8 * time.Second
)

// auditResponse is the body of POST /audit.
type auditResponse struct {
	Domain   string          `json:"domain"`
	Manifest auditManifest   `json:"manifest"`
	Summary  auditSummary    `json:"summary"`
	Entries  []auditEntry    `json:"entries"`
	Coverage []auditCoverage `json:"coverage"`
}

type auditManifest struct {
	Found      bool             `json:"found"`
	URL        string           `json:"url"`
	Mechanism  string           `json:"mechanism,omitempty"` // how it was discovered
	LegacyPath bool             `json:"legacyPath"`
	Tried      []ingest.Attempt `json:"tried,omitempty"` // every location looked at
	Status     int              `json:"status,omitempty"`
	SHA256     string           `json:"sha256,omitempty"`
	FetchedAt  *time.Time       `json:"fetchedAt,omitempty"`
	Code       string           `json:"code,omitempty"`
	Error      string           `json:"error,omitempty"`
}

type auditSummary struct {
	Entries int `json:"entries"` // valid and invalid entries of the manifest (or held entries without one)
	Valid   int `json:"valid"`
	Invalid int `json:"invalid"`
	Indexed int `json:"indexed"` // held by this registry
}

type auditEntry struct {
	Identifier string      `json:"identifier,omitempty"`
	Pointer    string      `json:"pointer,omitempty"`
	Valid      bool        `json:"valid"`
	Problems   []string    `json:"problems,omitempty"`
	Indexed    bool        `json:"indexed"`
	Ranks      []auditRank `json:"ranks,omitempty"`
}

// auditRank is the entry's position here for one of its representative
// queries; Rank is null when it is not in the top 100.
type auditRank struct {
	Query       string `json:"query"`
	Rank        *int   `json:"rank"`
	NotInTop100 bool   `json:"notInTop100,omitempty"`
}

// auditCoverage is one registry's holding of the domain's identifiers.
type auditCoverage struct {
	Registry   string `json:"registry"`
	This       bool   `json:"this,omitempty"`
	Discovered bool   `json:"discovered,omitempty"`
	Reached    bool   `json:"reached"`
	Error      string `json:"error,omitempty"`
	Holds      int    `json:"holds"` // how many of the domain's identifiers it returned
	Of         int    `json:"of"`
	Queries    int    `json:"queries"` // searches it was sent
}

// handleAudit handles "POST /audit".
func (s *Service) handleAudit(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "an audit request", "domain")
	domain := domainMember(m, &fe)
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), auditTimeout)
	defer cancel()
	resp, err := s.audit(ctx, domain)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// auditTarget is one identifier the audit follows, with its queries and
// displayName (for coverage probes).
type auditTarget struct {
	id          string
	displayName string
	queries     []string
}

func (s *Service) audit(ctx context.Context, domain string) (*auditResponse, error) {
	resp := &auditResponse{Domain: domain, Entries: []auditEntry{}, Coverage: []auditCoverage{}}
	held, err := s.heldByPublisher(ctx, domain)
	if err != nil {
		return nil, err
	}

	var targets []auditTarget
	disc, ferr := ingest.Discover(ctx, s.fetcher, domain)
	res := disc.Result
	resp.Manifest.URL = "https://" + domain + ingest.WellKnownARD
	resp.Manifest.Tried = disc.Tried
	if ferr != nil || res == nil {
		resp.Manifest.Code, resp.Manifest.Error = "manifest.not-found", "no ARD manifest found by any discovery mechanism"
		if ferr != nil && !errors.Is(ferr, ingest.ErrNoManifest) {
			resp.Manifest.Code, resp.Manifest.Error = describeFetchError(ferr)
		}
	} else {
		t := res.FetchedAt.UTC()
		resp.Manifest = auditManifest{Found: true, URL: res.URL, Mechanism: disc.Mechanism, LegacyPath: disc.Legacy,
			Status: res.Status, SHA256: res.SHA256, FetchedAt: &t, Tried: disc.Tried}
		parsed, problems := ingest.ParseManifest(res.Body)
		byPointer := map[string][]string{}
		for _, p := range problems {
			if p.Severity == ingest.SeverityError {
				ptr := p.Pointer
				if i, ok := entryIndex(ptr); ok {
					ptr = "/entries/" + itoa(i)
				}
				byPointer[ptr] = append(byPointer[ptr], p.Message)
			}
		}
		valid := map[string]bool{}
		for _, pe := range parsed.Entries {
			ae := auditEntry{Identifier: pe.ID, Pointer: pe.Pointer, Valid: true}
			if !ingest.PublisherAllowed(pe.Publisher, domain) {
				ae.Valid = false
				ae.Problems = append(ae.Problems, "publisher "+pe.Publisher+" is not "+domain+": registries reject it as squatting")
			}
			_, ae.Indexed = held[pe.ID]
			resp.Entries = append(resp.Entries, ae)
			if ae.Valid {
				valid[pe.ID] = true
				targets = append(targets, targetOf(pe.ID, pe.Body))
			}
		}
		// Rejected entries, with the identifier they carry when it parses.
		ptrs := make([]string, 0, len(byPointer))
		for p := range byPointer {
			ptrs = append(ptrs, p)
		}
		sort.Strings(ptrs)
		for _, ptr := range ptrs {
			ae := auditEntry{Pointer: ptr, Valid: false, Problems: byPointer[ptr]}
			for _, p := range problems {
				if p.Pointer == ptr && p.Identifier != "" {
					ae.Identifier = p.Identifier
					break
				}
			}
			if ae.Identifier != "" && !valid[ae.Identifier] {
				// A rejected duplicate of a valid entry is not what the
				// index holds; the valid one is.
				_, ae.Indexed = held[ae.Identifier]
			}
			resp.Entries = append(resp.Entries, ae)
		}
	}
	if !resp.Manifest.Found {
		// Without a manifest, audit what this registry holds of the domain.
		ids := make([]string, 0, len(held))
		for id := range held {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			resp.Entries = append(resp.Entries, auditEntry{Identifier: id, Valid: true, Indexed: true})
			targets = append(targets, targetOf(id, held[id].Body))
		}
	}

	// Ranks here for each valid entry's own representative queries.
	budget := maxAuditQueries
	rankOf := map[string][]auditRank{}
	for _, t := range targets {
		for _, q := range t.queries {
			if budget == 0 {
				break
			}
			budget--
			rankOf[t.id] = append(rankOf[t.id], s.localRank(ctx, q, t.id))
		}
	}
	for i := range resp.Entries {
		e := &resp.Entries[i]
		if e.Valid {
			e.Ranks = rankOf[e.Identifier]
		}
		resp.Summary.Entries++
		if e.Valid {
			resp.Summary.Valid++
		} else {
			resp.Summary.Invalid++
		}
		if e.Indexed {
			resp.Summary.Indexed++
		}
	}

	// Coverage: this registry, then every other one.
	mine := auditCoverage{Registry: s.cfg.PublicURL, This: true, Reached: true, Of: len(targets)}
	for _, t := range targets {
		if _, ok := held[t.id]; ok {
			mine.Holds++
		}
	}
	resp.Coverage = append(resp.Coverage, mine)
	ups := s.federationTargets(ctx)
	cov := make([]auditCoverage, len(ups))
	var wg sync.WaitGroup
	for i, up := range ups {
		wg.Go(func() { cov[i] = s.coverageAt(ctx, up, domain, targets) })
	}
	wg.Wait()
	resp.Coverage = append(resp.Coverage, cov...)
	return resp, nil
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// targetOf reads what the audit needs of an entry body.
func targetOf(id string, body []byte) auditTarget {
	var e struct {
		DisplayName           string   `json:"displayName"`
		RepresentativeQueries []string `json:"representativeQueries"`
	}
	_ = json.Unmarshal(body, &e)
	t := auditTarget{id: id, displayName: e.DisplayName}
	for _, q := range e.RepresentativeQueries {
		if q = strings.TrimSpace(q); q != "" && len(q) <= maxTextLen {
			t.queries = append(t.queries, q)
		}
	}
	return t
}

// localRank is id's 1-based rank for q in this index's top 100.
func (s *Service) localRank(ctx context.Context, q, id string) auditRank {
	ar := auditRank{Query: q, NotInTop100: true}
	res, err := s.ix.Search(ctx, index.SearchRequest{Text: q, Size: auditRankDepth})
	if err != nil {
		return ar
	}
	for i, h := range res.Hits {
		if h.ID == id {
			n := i + 1
			ar.Rank, ar.NotInTop100 = &n, false
			break
		}
	}
	return ar
}

// coverageAt asks one registry which of targets it holds: first a search
// for the domain, then one per identifier still unseen (by displayName),
// each with federation=none and a publisher filter.
func (s *Service) coverageAt(ctx context.Context, up upstream, domain string, targets []auditTarget) auditCoverage {
	c := auditCoverage{Registry: up.base, Discovered: up.kind == kindDiscovered, Of: len(targets)}
	want := map[string]bool{}
	for _, t := range targets {
		want[t.id] = true
	}
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(ctx, coverageTimeout)
	defer cancel()
	type probe struct{ text, id string }
	probes := []probe{{text: domain}}
	for _, t := range targets {
		if len(probes) == maxCoverageProbes {
			break
		}
		if t.displayName != "" && len(t.displayName) <= maxTextLen {
			probes = append(probes, probe{text: t.displayName, id: t.id})
		}
	}
	for i, p := range probes {
		if len(seen) == len(want) || p.id != "" && seen[p.id] {
			continue
		}
		filter := index.Filter{"publisher": {domain}}
		body, _ := json.Marshal(upstreamRequest{
			Query:      upstreamQuery{Text: p.text, Filter: wireFilter(filter)},
			Federation: fedNone,
			PageSize:   maxSearchLimit,
		})
		c.Queries++
		items, _, err := s.fetchUpstream(ctx, up, body, maxSearchLimit, filter)
		if err != nil {
			if !c.Reached {
				c.Error = err.Error()
			}
			if i == 0 {
				return c // the registry does not answer: no point asking more
			}
			continue
		}
		c.Reached, c.Error = true, ""
		for _, it := range items {
			id, _, msg := ingest.NormalizeIdentifier(it.id)
			if msg == "" && want[id] {
				seen[id] = true
			}
		}
	}
	c.Holds = len(seen)
	return c
}
