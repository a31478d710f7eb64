package registry

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// GET/POST /tools search the callable half of the index only: MCP tools and
// API operations. Each result carries what a caller needs to call it (an
// operation's method, path, base URL and auth; a tool's endpoint, transport
// and name), so an agent can go from a capability to a call in one request.

// toolTypes are the entry types /tools searches.
var toolTypes = []string{sources.TypeMCPTool, sources.TypeOpenAPIOperation}

const (
	defaultToolsLimit = 20
	maxToolsLimit     = 100
	// maxIndexTools bounds the HTML capability index; past it the page says
	// how many more there are and points at the search.
	maxIndexTools = 5000
	// maxIndexDescription clips descriptions on the HTML page.
	maxIndexDescription = 280
)

// Result kinds of /tools.
const (
	kindMCPTool      = "mcp-tool"
	kindAPIOperation = "api-operation"
)

//go:embed templates/*.html
var templateFS embed.FS

// pageTemplates are the server-rendered pages of the registry.
var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"clip": func(s string) string { return clipRunes(s, maxIndexDescription) },
}).ParseFS(templateFS, "templates/*.html"))

// toolsRequest is a validated /tools query.
type toolsRequest struct {
	Q          string
	Limit      int
	WithSchema bool
	Filter     index.Filter
}

// toolsResponse is the JSON body of /tools.
type toolsResponse struct {
	Query   string     `json:"q"`
	Total   uint64     `json:"total"`
	Results []toolItem `json:"results"`
}

// toolItem is one callable result.
type toolItem struct {
	Identifier  string          `json:"identifier"`
	DisplayName string          `json:"displayName"`
	Description string          `json:"description,omitempty"`
	Type        string          `json:"type"`
	Kind        string          `json:"kind"` // mcp-tool or api-operation
	Publisher   string          `json:"publisher"`
	Score       int             `json:"score"`
	Source      string          `json:"source"`
	Tags        []string        `json:"tags,omitempty"`
	Visibility  string          `json:"visibility"` // public or private, as on search results
	Call        toolCall        `json:"call"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// toolCall is how to call a result. An API operation fills method, path,
// baseUrl (the first server), servers and auth; an MCP tool fills endpoint,
// transport, tool and server.
type toolCall struct {
	Method           string          `json:"method,omitempty"`
	Path             string          `json:"path,omitempty"`
	BaseURL          string          `json:"baseUrl,omitempty"`
	Servers          []string        `json:"servers,omitempty"`
	Auth             json.RawMessage `json:"auth,omitempty"`
	AuthAlternatives json.RawMessage `json:"authAlternatives,omitempty"`
	Parameters       []toolParam     `json:"parameters,omitempty"`
	Endpoint         string          `json:"endpoint,omitempty"`
	Transport        string          `json:"transport,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Server           string          `json:"server,omitempty"`
}

type toolParam struct {
	Name     string `json:"name"`
	In       string `json:"in"`
	Required bool   `json:"required,omitempty"`
}

// storedTool is the union of the inline data of an operation entry and of a
// tool entry, read leniently: a tool's server link may be nested (as
// registry/sources writes it) or flat.
type storedTool struct {
	Identifier  string   `json:"identifier"`
	DisplayName string   `json:"displayName"`
	Description string   `json:"description"`
	Type        string   `json:"type"`
	Tags        []string `json:"tags"`
	Data        struct {
		Method           string          `json:"method"`
		Path             string          `json:"path"`
		Servers          []string        `json:"servers"`
		Auth             json.RawMessage `json:"auth"`
		AuthAlternatives json.RawMessage `json:"authAlternatives"`
		Parameters       []toolParam     `json:"parameters"`
		RequestBody      *struct {
			ContentType string          `json:"contentType"`
			Required    bool            `json:"required"`
			Schema      json.RawMessage `json:"schema"`
		} `json:"requestBody"`

		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Endpoint    string          `json:"endpoint"`
		Transport   string          `json:"transport"`
		Tool        string          `json:"tool"`
		Server      json.RawMessage `json:"server"`
	} `json:"data"`
}

type toolServerLink struct {
	Identifier string `json:"identifier"`
	Endpoint   string `json:"endpoint"`
	Transport  string `json:"transport"`
	Tool       string `json:"tool"`
}

// handleToolsGet handles "GET /tools": with q the JSON search, without q
// the HTML capability index.
func (s *Service) handleToolsGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var fe fieldErrors
	fe.onlyParams(q, "GET /tools", "q", "limit", "withSchema")
	req := toolsRequest{Limit: defaultToolsLimit}
	if v, ok := q["q"]; ok {
		if len(v[0]) > maxTextLen {
			fe.add("q", "must be at most "+strconv.Itoa(maxTextLen)+" bytes")
		} else {
			req.Q = strings.TrimSpace(v[0])
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxToolsLimit {
			fe.add("limit", "must be one integer from 1 to "+strconv.Itoa(maxToolsLimit))
		} else {
			req.Limit = n
		}
	}
	if v, ok := q["withSchema"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			fe.add("withSchema", "must be true or false")
		} else {
			req.WithSchema = b
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	if req.Q == "" {
		s.writeToolsIndex(w, r)
		return
	}
	s.answerTools(w, r, req)
}

// handleToolsPost handles "POST /tools" with {q, limit, withSchema, filter}.
// An empty q lists tools in identifier order.
func (s *Service) handleToolsPost(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, p := s.parseToolsPost(m)
	if p != nil {
		s.problems.Write(w, r, p)
		return
	}
	s.answerTools(w, r, req)
}

// parseToolsPost validates a POST /tools body.
func (s *Service) parseToolsPost(m map[string]json.RawMessage) (toolsRequest, *web.Problem) {
	var fe fieldErrors
	req := toolsRequest{Limit: defaultToolsLimit}
	fe.onlyMembers(m, "", "a tools request", "q", "limit", "withSchema", "filter")
	if raw, ok := m["q"]; ok && !isNull(raw) {
		q, ok := rawString(raw)
		switch {
		case !ok:
			fe.add("q", "must be a string")
		case len(q) > maxTextLen:
			fe.add("q", "must be at most "+strconv.Itoa(maxTextLen)+" bytes")
		default:
			req.Q = strings.TrimSpace(q)
		}
	}
	if raw, ok := m["limit"]; ok && !isNull(raw) {
		n, ok := rawInt(raw)
		if !ok || n < 1 || n > maxToolsLimit {
			fe.add("limit", "must be an integer from 1 to "+strconv.Itoa(maxToolsLimit))
		} else {
			req.Limit = n
		}
	}
	if raw, ok := m["withSchema"]; ok && !isNull(raw) {
		switch string(raw) {
		case "true":
			req.WithSchema = true
		case "false":
		default:
			fe.add("withSchema", "must be a boolean")
		}
	}
	if raw, ok := m["filter"]; ok && !isNull(raw) {
		var sub fieldErrors
		req.Filter = parseFilter(raw, &sub)
		for _, e := range sub {
			fe.add("filter"+strings.TrimPrefix(e.Field, "query.filter"), e.Message)
		}
		for _, t := range req.Filter["type"] {
			if t != sources.TypeMCPTool && t != sources.TypeOpenAPIOperation {
				fe.add("filter.type", "/tools searches only "+strings.Join(toolTypes, " and ")+"; use POST /search for other types")
				break
			}
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	return req, nil
}

// answerTools runs the search and writes the JSON answer.
func (s *Service) answerTools(w http.ResponseWriter, r *http.Request, req toolsRequest) {
	resp, err := s.searchTools(r, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// searchTools ranks the tool entries matching req.
func (s *Service) searchTools(r *http.Request, req toolsRequest) (toolsResponse, error) {
	filter := make(index.Filter, len(req.Filter)+1)
	for k, v := range req.Filter {
		filter[k] = v
	}
	if len(filter["type"]) == 0 {
		filter["type"] = toolTypes
	}
	viewers := s.viewers(r)
	res, err := s.ix.Search(r.Context(), index.SearchRequest{Text: req.Q, Filter: filter, Size: req.Limit, Count: true, Viewers: viewers})
	if err != nil {
		return toolsResponse{}, err
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.ID
	}
	entries, err := s.db.GetEntries(ids)
	if err != nil {
		return toolsResponse{}, err
	}
	out := toolsResponse{Query: req.Q, Total: res.Total, Results: make([]toolItem, 0, len(res.Hits))}
	for _, h := range res.Hits {
		e, ok := entries[h.ID]
		if !ok || !mayView(e.Owner, viewers) {
			continue
		}
		it, ok := s.toolItemOf(e, req.WithSchema)
		if !ok {
			s.log.Warn("tool entry without usable data", "identifier", h.ID)
			continue
		}
		if e.Owner != "" {
			it.Visibility = visPrivate
		}
		it.Score = clampScore(h.Score)
		out.Results = append(out.Results, it)
	}
	return out, nil
}

// toolItemOf reads a stored tool or operation entry into a result.
func (s *Service) toolItemOf(e kv.Entry, withSchema bool) (toolItem, bool) {
	var st storedTool
	if err := json.Unmarshal(e.Body, &st); err != nil {
		return toolItem{}, false
	}
	it := toolItem{
		Identifier:  e.ID,
		DisplayName: st.DisplayName,
		Description: st.Description,
		Type:        st.Type,
		Publisher:   publisherOf(e.ID),
		Source:      s.cfg.PublicURL,
		Tags:        st.Tags,
		Visibility:  visPublic,
	}
	d := st.Data
	switch st.Type {
	case sources.TypeOpenAPIOperation:
		if d.Method == "" || d.Path == "" {
			return toolItem{}, false
		}
		it.Kind = kindAPIOperation
		it.Call = toolCall{
			Method:           strings.ToUpper(d.Method),
			Path:             d.Path,
			Servers:          d.Servers,
			Auth:             d.Auth,
			AuthAlternatives: d.AuthAlternatives,
			Parameters:       d.Parameters,
		}
		if len(d.Servers) > 0 {
			it.Call.BaseURL = d.Servers[0]
		}
		if withSchema {
			it.InputSchema = operationSchema(d.Parameters, d.RequestBody)
		}
	case sources.TypeMCPTool:
		it.Kind = kindMCPTool
		var link toolServerLink
		if len(d.Server) > 0 && d.Server[0] == '{' {
			_ = json.Unmarshal(d.Server, &link)
		} else if len(d.Server) > 0 {
			_ = json.Unmarshal(d.Server, &link.Identifier)
		}
		it.Call = toolCall{
			Endpoint:  firstOf(link.Endpoint, d.Endpoint),
			Transport: firstOf(link.Transport, d.Transport),
			Tool:      firstOf(link.Tool, d.Tool, d.Name),
			Server:    link.Identifier,
		}
		if it.Call.Tool == "" {
			return toolItem{}, false
		}
		if withSchema && len(d.InputSchema) > 0 {
			it.InputSchema = d.InputSchema
		}
	default:
		return toolItem{}, false
	}
	return it, true
}

// operationSchema describes an operation's input as one JSON Schema object:
// each parameter a property (x-in says where it goes), and the request body
// under "body". Stored operations keep no parameter schemas, so parameters
// are typed only as far as the description said they are required.
func operationSchema(params []toolParam, body *struct {
	ContentType string          `json:"contentType"`
	Required    bool            `json:"required"`
	Schema      json.RawMessage `json:"schema"`
}) json.RawMessage {
	props := map[string]any{}
	var required []string
	for _, p := range params {
		props[p.Name] = map[string]any{"x-in": p.In}
		if p.Required || p.In == "path" {
			required = append(required, p.Name)
		}
	}
	if body != nil {
		var schema any = map[string]any{}
		if len(body.Schema) > 0 {
			schema = body.Schema
		}
		props["body"] = map[string]any{"x-in": "body", "x-contentType": body.ContentType, "allOf": []any{schema}}
		if body.Required {
			required = append(required, "body")
		}
	}
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// toolsPage is what templates/tools.html renders.
type toolsPage struct {
	Total     int
	Shown     int
	Truncated bool
	Groups    []toolGroup
}

type toolGroup struct {
	Name  string
	Tools []toolItem
}

// writeToolsIndex renders the human capability index: every public tool
// and operation, grouped by its first tag (or, without tags, by publisher).
func (s *Service) writeToolsIndex(w http.ResponseWriter, r *http.Request) {
	var (
		ids   []string
		after []string
		total uint64
	)
	order := []index.Order{{Field: index.OrderDisplayName}}
	for len(ids) < maxIndexTools {
		page, err := s.ix.List(r.Context(), index.ListRequest{Types: toolTypes, OrderBy: order, After: after, Size: min(1000, maxIndexTools-len(ids))})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		total = page.Total
		ids = append(ids, page.IDs...)
		if page.Next == nil || len(page.IDs) == 0 {
			break
		}
		after = page.Next
	}
	entries, err := s.db.GetEntries(ids)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	groups := map[string]*toolGroup{}
	page := toolsPage{Total: int(total)}
	for _, id := range ids {
		e, ok := entries[id]
		if !ok || e.Owner != "" {
			continue
		}
		it, ok := s.toolItemOf(e, false)
		if !ok {
			continue
		}
		name := it.Publisher
		if len(it.Tags) > 0 && strings.TrimSpace(it.Tags[0]) != "" {
			name = strings.ToLower(strings.TrimSpace(it.Tags[0]))
		}
		g := groups[name]
		if g == nil {
			g = &toolGroup{Name: name}
			groups[name] = g
		}
		g.Tools = append(g.Tools, it)
		page.Shown++
	}
	page.Truncated = page.Total > page.Shown
	for _, g := range groups {
		page.Groups = append(page.Groups, *g)
	}
	sort.Slice(page.Groups, func(i, j int) bool { return page.Groups[i].Name < page.Groups[j].Name })

	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "tools.html", page); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeHTMLPage(w, buf.Bytes())
}

// clipRunes bounds s to n runes, marking the cut.
func clipRunes(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}
