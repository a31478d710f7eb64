package registry

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/safety"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// GET /tool-safety counts and quotes what stored MCP tool descriptions tell
// a model to do (registry/safety's deterministic rules) and lists the tools
// whose description changed after they were first seen (tool.changed
// events of the change feed). It is not a score, a badge or a ranking
// signal: nothing here reaches search.

// ChangeToolChanged is the change-feed kind the crawler records when a
// tool's description hash differs from the one pinned at its last crawl.
const ChangeToolChanged = ingest.ChangeToolChanged

const (
	defaultSafetyLimit = safety.DefaultExamples
	maxSafetyLimit     = safety.MaxExamples
	// safetyNotice travels with every answer so that no reader mistakes
	// the counts for a verdict.
	safetyNotice = "Counts and excerpts of what tool descriptions tell a model to do, found by deterministic lexical rules. " +
		"Not a score, badge or ranking signal, and never part of search relevance; lexical rules miss most semantic poisoning, so no finding does not mean safe."
)

// safetyCache holds the scan of every stored tool, valid while the kv change
// sequence has not moved: entries change only through the change feed, so
// an unchanged sequence means unchanged tools.
type safetyCache struct {
	mu         sync.Mutex
	valid      bool
	seq        uint64
	tools      []safety.ToolFindings
	rugPulls   []kv.Change // newest first
	computedAt time.Time
}

// toolSafetyResponse is the body of GET /tool-safety.
type toolSafetyResponse struct {
	Notice            string               `json:"notice"`
	Domain            string               `json:"domain,omitempty"`
	Rule              string               `json:"rule,omitempty"`
	Tools             int                  `json:"tools"`
	ToolsWithFindings int                  `json:"toolsWithFindings"`
	Rules             []safety.RuleSummary `json:"rules"`
	RugPulls          rugPullReport        `json:"rugPulls"`
	ChangeSeq         uint64               `json:"changeSeq"`
	ComputedAt        time.Time            `json:"computedAt"`
	KnownRules        []safety.RuleInfo    `json:"knownRules"`
}

// rugPullReport lists tools whose description changed since last seen.
type rugPullReport struct {
	Count int           `json:"count"`
	Items []rugPullItem `json:"items"`
}

type rugPullItem struct {
	Identifier string    `json:"identifier"`
	Publisher  string    `json:"publisher"`
	Time       time.Time `json:"time"`
	Seq        uint64    `json:"seq"`
}

// handleToolSafety handles "GET /tool-safety?domain&rule&limit".
func (s *Service) handleToolSafety(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var fe fieldErrors
	fe.onlyParams(q, "GET /tool-safety", "domain", "rule", "limit")
	var domain, rule string
	limit := defaultSafetyLimit
	if v, ok := q["domain"]; ok && v[0] != "" {
		d, msg := parseDomain(v[0])
		if msg != "" {
			fe.add("domain", msg)
		}
		domain = d
	}
	if v, ok := q["rule"]; ok && v[0] != "" {
		rule = v[0]
		known := false
		var ids []string
		for _, ri := range safety.Rules() {
			ids = append(ids, ri.ID)
			known = known || ri.ID == rule
		}
		if !known {
			fe.add("rule", "must be one of "+strings.Join(ids, ", "))
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxSafetyLimit {
			fe.add("limit", "must be one integer from 1 to "+strconv.Itoa(maxSafetyLimit)+" (examples per rule, and rug pulls listed)")
		} else {
			limit = n
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}

	tools, rugPulls, seq, at, err := s.safetyScan()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rep := safety.Summarize(tools, safety.Filter{Domain: domain, Rule: rule, MaxExamples: limit})
	resp := toolSafetyResponse{
		Notice:            safetyNotice,
		Domain:            domain,
		Rule:              rule,
		Tools:             rep.Tools,
		ToolsWithFindings: rep.ToolsWithFindings,
		Rules:             rep.Rules,
		RugPulls:          rugPullReport{Items: []rugPullItem{}},
		ChangeSeq:         seq,
		ComputedAt:        at,
		KnownRules:        safety.Rules(),
	}
	if resp.Rules == nil {
		resp.Rules = []safety.RuleSummary{}
	}
	for _, c := range rugPulls {
		pub := c.Publisher
		if pub == "" {
			pub = publisherOf(c.ID)
		}
		if domain != "" && !withinDomain(pub, domain) {
			continue
		}
		resp.RugPulls.Count++
		if len(resp.RugPulls.Items) < limit {
			resp.RugPulls.Items = append(resp.RugPulls.Items, rugPullItem{Identifier: c.ID, Publisher: pub, Time: c.Time, Seq: c.Seq})
		}
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// safetyScan returns the scan of every stored tool and the tool.changed
// events, recomputing them only when the change sequence has moved. Callers
// share one computation: the mutex is held while it runs.
func (s *Service) safetyScan() ([]safety.ToolFindings, []kv.Change, uint64, time.Time, error) {
	seq, err := s.db.LastChangeSeq()
	if err != nil {
		return nil, nil, 0, time.Time{}, err
	}
	c := &s.safety
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.seq == seq {
		return c.tools, c.rugPulls, c.seq, c.computedAt, nil
	}
	tools, err := s.scanStoredTools()
	if err != nil {
		return nil, nil, 0, time.Time{}, err
	}
	var rugPulls []kv.Change
	if c.valid && seq > c.seq {
		// Only the new events need reading; older ones are kept.
		fresh, err := s.db.Changes(c.seq, 0)
		if err != nil {
			return nil, nil, 0, time.Time{}, err
		}
		rugPulls = append(filterToolChanged(fresh), c.rugPulls...)
	} else {
		all, err := s.db.Changes(0, 0)
		if err != nil {
			return nil, nil, 0, time.Time{}, err
		}
		rugPulls = filterToolChanged(all)
	}
	c.valid, c.seq, c.tools, c.rugPulls, c.computedAt = true, seq, tools, rugPulls, s.cfg.Now().UTC()
	return c.tools, c.rugPulls, c.seq, c.computedAt, nil
}

// filterToolChanged keeps tool.changed events, newest first.
func filterToolChanged(events []kv.Change) []kv.Change {
	var out []kv.Change
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == ChangeToolChanged {
			out = append(out, events[i])
		}
	}
	return out
}

// storedToolForScan is what the scan reads of a tool entry.
type storedToolForScan struct {
	Identifier  string `json:"identifier"`
	Type        string `json:"type"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	Data        struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations json.RawMessage `json:"annotations"`
		Tool        string          `json:"tool"`
		Endpoint    string          `json:"endpoint"`
		Server      json.RawMessage `json:"server"`
		Meta        map[string]struct {
			Instructions string `json:"instructions"`
		} `json:"_meta"`
	} `json:"data"`
}

// scanStoredTools scans every public MCP tool entry, with the instructions
// its server sent (kept on the server entry's card under _meta).
func (s *Service) scanStoredTools() ([]safety.ToolFindings, error) {
	type pending struct {
		domain, server string
		tool           safety.Tool
	}
	var tools []pending
	instructions := map[string]string{} // server identifier -> instructions
	err := s.db.ForEachEntry(func(e kv.Entry) error {
		if e.Owner != "" {
			return nil
		}
		typ := e.Type()
		if typ != sources.TypeMCPTool && typ != sources.TypeMCPServer {
			return nil
		}
		var st storedToolForScan
		if json.Unmarshal(e.Body, &st) != nil {
			return nil
		}
		if typ == sources.TypeMCPServer {
			if obs, ok := st.Data.Meta["dev.ardx/observed"]; ok && obs.Instructions != "" {
				instructions[e.ID] = obs.Instructions
			}
			return nil
		}
		var link toolServerLink
		if len(st.Data.Server) > 0 && st.Data.Server[0] == '{' {
			_ = json.Unmarshal(st.Data.Server, &link)
		}
		server := firstOf(link.Identifier, link.Endpoint, st.Data.Endpoint, e.ID)
		tools = append(tools, pending{
			domain: publisherOf(e.ID),
			server: server,
			tool: safety.Tool{
				Server:      server,
				Name:        firstOf(st.Data.Name, link.Tool, st.Data.Tool, st.DisplayName),
				Title:       st.Data.Title,
				Description: firstOf(st.Data.Description, st.Description),
				InputSchema: st.Data.InputSchema,
				Annotations: st.Data.Annotations,
			},
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]safety.ToolFindings, 0, len(tools))
	for _, p := range tools {
		p.tool.Instructions = instructions[p.server]
		out = append(out, safety.ToolFindings{Domain: p.domain, Server: p.server, Tool: p.tool.Name, Findings: safety.Scan(p.tool)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		return a.Tool < b.Tool
	})
	return out, nil
}
