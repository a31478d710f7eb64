package facilitator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Catalogue limits.
const (
	// MaxCatalogueEntries bounds the catalogue: anyone who can get a payment
	// settled can add an entry, so it must not grow without end. New keys
	// past the bound are refused (logged); known keys keep updating.
	MaxCatalogueEntries = 20_000
	// DefaultDiscoveryLimit and MaxDiscoveryLimit are the page sizes of GET
	// /discovery/resources (x402 v2 specification §8.1).
	DefaultDiscoveryLimit = 20
	MaxDiscoveryLimit     = 100
	// catalogueQueue is how many settled payments may wait for the
	// catalogue's worker; more are dropped (and logged) rather than slowing
	// the settlement engine, whose goroutine calls OnSettled.
	catalogueQueue = 256
)

// Catalogue is the facilitator's record of paid resources (the x402 bazaar
// discovery extension): each successful settlement whose merchant declared
// extensions.bazaar (v2) or an outputSchema (v1) adds or refreshes one
// entry, durably in kv. Build it with NewCatalogue, pass OnSettled to
// settle.Options, and hand it to the service in Config.Catalogue. It is safe
// for concurrent use.
type Catalogue struct {
	db  *kv.DB
	log *slog.Logger
	now func() time.Time

	mu    sync.RWMutex
	items map[string]kv.CatalogueEntry

	bodyOf   func(req *x402.PaymentRequest) ([]byte, error)
	bound    chan struct{}
	bindOnce sync.Once
	queue    chan *x402.PaymentRequest
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// NewCatalogue loads the catalogue from db and starts the worker that
// records settled payments. Close stops it.
func NewCatalogue(db *kv.DB, logger *slog.Logger) (*Catalogue, error) {
	if db == nil {
		return nil, errors.New("facilitator: catalogue needs a store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	entries, err := db.CatalogueEntries()
	if err != nil {
		return nil, err
	}
	c := &Catalogue{
		db: db, log: logger.With("component", "catalogue"), now: time.Now,
		items: make(map[string]kv.CatalogueEntry, len(entries)),
		bound: make(chan struct{}), queue: make(chan *x402.PaymentRequest, catalogueQueue),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, e := range entries {
		c.items[e.Key] = e
	}
	go c.work()
	return c, nil
}

// bind gives the catalogue the engine whose settlements it records: the
// engine's OnSettled hook passes the normalised request, and the body as
// received (with resource and extensions) is read back from the
// settlement's kv record.
func (c *Catalogue) bind(e *settle.Engine) {
	c.bindOnce.Do(func() {
		c.bodyOf = func(req *x402.PaymentRequest) ([]byte, error) {
			ch, ok := e.Chain(req.Network())
			if !ok {
				return nil, fmt.Errorf("network %q is not served", req.Network())
			}
			key, err := c.db.AuthorizationOwner(ch.AuthorizationID(req))
			if err != nil {
				return nil, fmt.Errorf("authorization owner: %w", err)
			}
			s, err := c.db.Settlement(key)
			if err != nil {
				return nil, err
			}
			return s.Body, nil
		}
		close(c.bound)
	})
}

// OnSettled is the settle.Options hook: it queues a successful settlement
// for recording and returns at once.
func (c *Catalogue) OnSettled(req *x402.PaymentRequest, resp x402.SettleResponse) {
	if !resp.Success || req == nil {
		return
	}
	select {
	case <-c.stop:
	case c.queue <- req:
	default:
		c.log.Warn("catalogue queue full; a settled resource was not recorded", "payer", req.Payer())
	}
}

func (c *Catalogue) work() {
	defer close(c.done)
	select {
	case <-c.bound:
	case <-c.stop:
		return
	}
	for {
		select {
		case req := <-c.queue:
			c.recordSettled(req)
		case <-c.stop:
			for {
				select {
				case req := <-c.queue:
					c.recordSettled(req)
				default:
					return
				}
			}
		}
	}
}

func (c *Catalogue) recordSettled(req *x402.PaymentRequest) {
	body, err := c.bodyOf(req)
	if err != nil {
		c.log.Warn("settled payment not found for the catalogue", "err", err)
		return
	}
	if _, ok, err := c.Record(body); errors.Is(err, ErrNotDiscoverable) {
		// Most payments declare no bazaar extension: normal, not a warning.
		c.log.Debug("settled resource not catalogued", "reason", err)
	} else if err != nil {
		c.log.Warn("catalogue record failed", "err", err)
	} else if ok {
		c.log.Debug("catalogue updated")
	}
}

// Close stops the worker after recording what is queued. Call it after the
// engine is closed.
func (c *Catalogue) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// Len returns the number of catalogue entries.
func (c *Catalogue) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}

// ErrNotDiscoverable means a settled payment declared nothing to catalogue,
// or declared it invalidly; Record reports it as ok false with the reason.
var ErrNotDiscoverable = errors.New("not discoverable")

// Record catalogues the resource a settled /settle body paid for. ok is
// false, with an error wrapping ErrNotDiscoverable, when the merchant
// declared no discovery information or declared it invalidly (reference
// §4.2: an info that fails its schema is not catalogued); other errors
// are storage failures.
func (c *Catalogue) Record(body []byte) (kv.CatalogueEntry, bool, error) {
	e, err := extractDiscovery(body)
	if err != nil {
		return kv.CatalogueEntry{}, false, err
	}
	e.LastSeen, e.Settlements = c.now().UTC(), 1
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, known := c.items[e.Key]; !known && len(c.items) >= MaxCatalogueEntries {
		return kv.CatalogueEntry{}, false, fmt.Errorf("catalogue full (%d entries); %s not recorded", MaxCatalogueEntries, e.Key)
	}
	stored, err := c.db.PutCatalogueEntry(e)
	if err != nil {
		return kv.CatalogueEntry{}, false, err
	}
	c.items[stored.Key] = stored
	return stored, true, nil
}

// wireDiscovery is the part of a /settle body the catalogue reads.
type wireDiscovery struct {
	X402Version    int `json:"x402Version"`
	PaymentPayload struct {
		X402Version int                        `json:"x402Version"`
		Resource    *x402.ResourceInfo         `json:"resource"`
		Accepted    json.RawMessage            `json:"accepted"`
		Extensions  map[string]json.RawMessage `json:"extensions"`
	} `json:"paymentPayload"`
	PaymentRequirements json.RawMessage `json:"paymentRequirements"`
}

type bazaarExtension struct {
	Info          json.RawMessage `json:"info"`
	Schema        json.RawMessage `json:"schema"`
	RouteTemplate string          `json:"routeTemplate"`
}

// discoveryInput is the member of info.input the key is made of.
type discoveryInput struct {
	Type     string `json:"type"`
	Method   string `json:"method"`
	ToolName string `json:"toolName"`
	Tool     string `json:"tool"` // the CB spec's older name for toolName
}

var routeTemplatePattern = regexp.MustCompile(`^/[a-zA-Z0-9_/:.\-~%]+$`)

// validRouteTemplate is the official isValidRouteTemplate: a path of safe
// characters that, percent-decoded, neither climbs (..) nor names another
// origin (://).
func validRouteTemplate(t string) bool {
	if !routeTemplatePattern.MatchString(t) {
		return false
	}
	dec, err := url.PathUnescape(t)
	if err != nil {
		return false
	}
	return !strings.Contains(dec, "..") && !strings.Contains(dec, "://")
}

func notDiscoverable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotDiscoverable, fmt.Sprintf(format, args...))
}

// extractDiscovery turns a /settle body into a catalogue entry, following
// the official extractDiscoveryInfo: v2 reads resource.url and
// extensions.bazaar (info validated against schema, routeTemplate checked);
// v1 reads the requirements' resource and outputSchema.
func extractDiscovery(body []byte) (kv.CatalogueEntry, error) {
	var w wireDiscovery
	if err := json.Unmarshal(body, &w); err != nil {
		return kv.CatalogueEntry{}, notDiscoverable("body: %v", err)
	}
	version := w.X402Version
	if version == 0 {
		version = w.PaymentPayload.X402Version
	}
	var e kv.CatalogueEntry
	var info json.RawMessage
	var resource string
	switch version {
	case x402.Version2:
		raw, ok := w.PaymentPayload.Extensions["bazaar"]
		if !ok {
			return e, notDiscoverable("no extensions.bazaar in the payment payload")
		}
		var bz bazaarExtension
		if err := json.Unmarshal(raw, &bz); err != nil || len(bz.Info) == 0 {
			return e, notDiscoverable("extensions.bazaar has no info object")
		}
		if err := validateInfo(bz.Info, bz.Schema); err != nil {
			return e, notDiscoverable("extensions.bazaar.info does not match its schema: %v", err)
		}
		if w.PaymentPayload.Resource == nil || w.PaymentPayload.Resource.URL == "" {
			return e, notDiscoverable("the payment payload names no resource.url")
		}
		if bz.RouteTemplate != "" && !validRouteTemplate(bz.RouteTemplate) {
			return e, notDiscoverable("routeTemplate %q is not a safe path template", bz.RouteTemplate)
		}
		var req x402.PaymentRequirementsV2
		if err := json.Unmarshal(w.PaymentRequirements, &req); err != nil {
			return e, notDiscoverable("paymentRequirements: %v", err)
		}
		info, resource = bz.Info, w.PaymentPayload.Resource.URL
		e.RouteTemplate = bz.RouteTemplate
		e.Description, e.MimeType = w.PaymentPayload.Resource.Description, w.PaymentPayload.Resource.MimeType
		e.Scheme, e.Network, e.Asset, e.Amount, e.PayTo = req.Scheme, req.Network, req.Asset, string(req.Amount), req.PayTo
	case x402.Version1:
		var req x402.PaymentRequirementsV1
		if err := json.Unmarshal(w.PaymentRequirements, &req); err != nil {
			return e, notDiscoverable("paymentRequirements: %v", err)
		}
		if len(bytes.TrimSpace(req.OutputSchema)) == 0 || bytes.Equal(bytes.TrimSpace(req.OutputSchema), []byte("null")) {
			return e, notDiscoverable("no outputSchema in the v1 requirements")
		}
		var err error
		if info, err = normaliseV1Info(req.OutputSchema); err != nil {
			return e, notDiscoverable("outputSchema: %v", err)
		}
		resource = req.Resource
		e.Description, e.MimeType = req.Description, req.MimeType
		e.Scheme, e.Network, e.Asset, e.Amount, e.PayTo = req.Scheme, req.Network, req.Asset, string(req.MaxAmountRequired), req.PayTo
	default:
		return e, notDiscoverable("x402Version %d", version)
	}
	accepts, err := json.Marshal([]json.RawMessage{w.PaymentRequirements})
	if err != nil {
		return e, notDiscoverable("paymentRequirements: %v", err)
	}
	var in struct {
		Input discoveryInput `json:"input"`
	}
	if err := json.Unmarshal(info, &in); err != nil {
		return e, notDiscoverable("info.input: %v", err)
	}
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return e, notDiscoverable("resource %q is not an absolute http(s) URL", resource)
	}
	path := u.EscapedPath()
	if e.RouteTemplate != "" {
		path = e.RouteTemplate
	}
	canonical := u.Scheme + "://" + strings.ToLower(u.Host) + path
	switch strings.ToLower(in.Input.Type) {
	case "mcp":
		tool := in.Input.ToolName
		if tool == "" {
			tool = in.Input.Tool
		}
		if tool == "" {
			return e, notDiscoverable("an mcp input names no toolName")
		}
		e.Type, e.ToolName, e.Key = "mcp", tool, "mcp "+canonical+"#"+tool
	case "http", "":
		method := strings.ToUpper(in.Input.Method)
		if method == "" {
			method = http.MethodGet
		}
		e.Type, e.Method, e.Key = "http", method, method+" "+canonical
	default:
		return e, notDiscoverable("info.input.type %q is neither http nor mcp", in.Input.Type)
	}
	e.Resource, e.X402Version, e.Accepts, e.DiscoveryInfo = canonical, version, accepts, info
	return e, nil
}

// validateInfo checks info against the merchant's JSON Schema (draft
// 2020-12 or 07). Remote references are refused: the catalogue fetches
// nothing on a payer's behalf. A missing schema is accepted, as the
// official extractor does when validation has nothing to check against.
func validateInfo(info, schema json.RawMessage) error {
	var inst any
	if err := json.Unmarshal(info, &inst); err != nil {
		return err
	}
	if _, ok := inst.(map[string]any); !ok {
		return errors.New("info is not an object")
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	rs, err := s.Resolve(&jsonschema.ResolveOptions{})
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return rs.Validate(inst)
}

// normaliseV1Info turns a v1 outputSchema into v2's info shape, with the
// official extractDiscoveryInfoV1 heuristics for where merchants put query
// and body parameters.
func normaliseV1Info(raw json.RawMessage) (json.RawMessage, error) {
	var os struct {
		Input  map[string]json.RawMessage `json:"input"`
		Output json.RawMessage            `json:"output"`
	}
	if err := json.Unmarshal(raw, &os); err != nil {
		return nil, err
	}
	if os.Input == nil {
		return nil, errors.New("no input object")
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(os.Input[k], &s)
		return s
	}
	first := func(keys ...string) json.RawMessage {
		for _, k := range keys {
			if v, ok := os.Input[k]; ok && len(v) > 0 && string(v) != "null" {
				return v
			}
		}
		return nil
	}
	typ := str("type")
	if typ == "" {
		typ = "http"
	}
	in := map[string]any{"type": typ}
	method := strings.ToUpper(str("method"))
	if method == "" {
		method = http.MethodGet
	}
	in["method"] = method
	if v := first("queryParams", "query_params", "query", "params"); v != nil {
		in["queryParams"] = v
	}
	if v := first("bodyFields", "body_fields", "bodyParams", "body", "data", "properties"); v != nil {
		in["body"] = v
		bt := str("bodyType")
		if bt == "" {
			bt = "json"
		}
		in["bodyType"] = bt
	}
	if v := first("headers", "headerFields"); v != nil {
		in["headers"] = v
	}
	if tool := str("toolName"); tool != "" {
		in["toolName"] = tool
	}
	out := map[string]any{"input": in}
	if len(os.Output) > 0 && string(os.Output) != "null" {
		out["output"] = os.Output
	}
	return json.Marshal(out)
}

// CatalogueItem is one element of /discovery/resources' items, in the
// official DiscoveryResource shape plus the declared method or tool.
type CatalogueItem struct {
	Resource      string            `json:"resource"`
	Type          string            `json:"type"`
	X402Version   int               `json:"x402Version"`
	Accepts       json.RawMessage   `json:"accepts"`
	LastUpdated   string            `json:"lastUpdated"`
	Metadata      CatalogueMetadata `json:"metadata"`
	Method        string            `json:"method,omitempty"`
	ToolName      string            `json:"toolName,omitempty"`
	Description   string            `json:"description,omitempty"`
	MimeType      string            `json:"mimeType,omitempty"`
	DiscoveryInfo json.RawMessage   `json:"discoveryInfo,omitempty"`
	RouteTemplate string            `json:"routeTemplate,omitempty"`
	Extensions    map[string]any    `json:"extensions,omitempty"`
}

// CatalogueMetadata is what this facilitator observed about an item.
type CatalogueMetadata struct {
	Network     string `json:"network"`
	Settlements int64  `json:"settlements"`
	FirstSeen   string `json:"firstSeen"`
}

func itemOf(e kv.CatalogueEntry) CatalogueItem {
	return CatalogueItem{
		Resource: e.Resource, Type: e.Type, X402Version: e.X402Version, Accepts: e.Accepts,
		LastUpdated: e.LastSeen.UTC().Format(time.RFC3339Nano),
		Metadata:    CatalogueMetadata{Network: e.Network, Settlements: e.Settlements, FirstSeen: e.FirstSeen.UTC().Format(time.RFC3339Nano)},
		Method:      e.Method, ToolName: e.ToolName, Description: e.Description, MimeType: e.MimeType,
		DiscoveryInfo: e.DiscoveryInfo, RouteTemplate: e.RouteTemplate, Extensions: bazaarExtensions(e),
	}
}

// sameNetwork compares networks named by CAIP-2 id or v1 name.
func sameNetwork(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	ia, oka := evm.ChainIDOf(a)
	ib, okb := evm.ChainIDOf(b)
	return oka && okb && ia.Cmp(ib) == 0
}

// sorted returns the entries matching keep, most recently paid first.
func (c *Catalogue) sorted(keep func(kv.CatalogueEntry) bool) []kv.CatalogueEntry {
	c.mu.RLock()
	out := make([]kv.CatalogueEntry, 0, len(c.items))
	for _, e := range c.items {
		if keep(e) {
			out = append(out, e)
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b kv.CatalogueEntry) int {
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// List returns one page of the entries on network (any if "") of type typ
// (any if ""), most recently paid first, and how many match in all.
func (c *Catalogue) List(network, typ string, limit, offset int) (items []CatalogueItem, total int) {
	return c.ListQuery(CatalogueQuery{Network: network, Type: typ}, limit, offset)
}

// ListQuery is List with every filter of q (its text is ignored).
func (c *Catalogue) ListQuery(q CatalogueQuery, limit, offset int) (items []CatalogueItem, total int) {
	all := c.sorted(q.keep)
	items = []CatalogueItem{}
	for i := offset; i < len(all) && len(items) < limit; i++ {
		items = append(items, itemOf(all[i]))
	}
	return items, len(all)
}

// Search returns up to limit entries on network (any if "") whose URL,
// method, tool name, description or declared shapes contain the words of
// query, best match first (more words matched, then most recently paid).
// An empty query lists the most recently paid. The MCP tool
// find_paid_resource uses it.
func (c *Catalogue) Search(query, network string, limit int) []CatalogueItem {
	if limit <= 0 {
		limit = DefaultDiscoveryLimit
	}
	out := c.Find(CatalogueQuery{Text: query, Network: network})
	return out[:min(limit, len(out))]
}

// discoveryResponse is the body of GET /discovery/resources (reference
// §4.3, with x402Version 2 and ISO lastUpdated as the SDK clients read it).
type discoveryResponse struct {
	X402Version int             `json:"x402Version"`
	Items       []CatalogueItem `json:"items"`
	Pagination  pagination      `json:"pagination"`
}

type pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	Total  int `json:"total"`
}

// maxNetworkParam bounds the network filter; CAIP-2 ids are short.
const maxNetworkParam = 64

// handleDiscoveryResources handles "GET /discovery/resources".
func (s *Service) handleDiscoveryResources(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset := DefaultDiscoveryLimit, 0
	var errs []web.FieldError
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxDiscoveryLimit {
			errs = append(errs, web.FieldError{Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", MaxDiscoveryLimit)})
		}
		limit = n
	}
	if v, ok := q["offset"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 {
			errs = append(errs, web.FieldError{Field: "offset", Message: "must be a non-negative integer"})
		}
		offset = n
	}
	cq := catalogueFilters(q, &errs)
	if len(errs) > 0 {
		s.problems.Write(w, r, s.problems.Invalid("invalid query parameters", errs...))
		return
	}
	resp := discoveryResponse{X402Version: x402.Version2, Items: []CatalogueItem{}, Pagination: pagination{Limit: limit, Offset: offset}}
	if s.cfg.Catalogue != nil {
		resp.Items, resp.Pagination.Total = s.cfg.Catalogue.ListQuery(cq, limit, offset)
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// DiscoveryStats is the body of GET /discovery/stats.
type DiscoveryStats struct {
	Settlements settle.Stats   `json:"settlements"`
	Catalogue   CatalogueStats `json:"catalogue"`
}

// CatalogueStats counts the catalogue's entries.
type CatalogueStats struct {
	Size      int            `json:"size"`
	ByType    map[string]int `json:"byType"`
	ByNetwork map[string]int `json:"byNetwork"`
}

// Stats counts the catalogue's entries by type and network.
func (c *Catalogue) Stats() CatalogueStats {
	st := CatalogueStats{ByType: map[string]int{}, ByNetwork: map[string]int{}}
	if c == nil {
		return st
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.items {
		st.Size++
		st.ByType[e.Type]++
		st.ByNetwork[e.Network]++
	}
	return st
}

// handleDiscoveryStats handles "GET /discovery/stats".
func (s *Service) handleDiscoveryStats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, DiscoveryStats{Settlements: s.engine.Stats(), Catalogue: s.cfg.Catalogue.Stats()})
}
