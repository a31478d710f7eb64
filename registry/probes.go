package registry

// Probing of indexed endpoints: which entries have a callable endpoint, the
// check each kind gets, and the change events a probe appends. The schedule,
// counters and Wilson bound are probe's; this file only knows entries.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/probe"
	"github.com/ardx-dev/ardx/registry/safety"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// Kinds of probed endpoints: the target-name prefix, the report group.
const (
	probeKindMCP = "mcp"  // an MCP server: initialize (or server/discover), then tools/list
	probeKindA2A = "a2a"  // an A2A agent card: fetched and parsed
	probeKindAPI = "api"  // an API's base URL: HEAD, nothing that changes state
	probeKindURL = "url"  // any other entry URL: a conditional GET
	probeKindPay = "x402" // a paid resource: the unpaid request its 402 answers (payprobe.go)
)

// probeKinds lists the kinds in report order.
var probeKinds = []string{probeKindMCP, probeKindA2A, probeKindAPI, probeKindURL, probeKindPay}

// typeA2ACard is the normalised A2A agent card type.
const typeA2ACard = "application/a2a-agent-card+json"

// maxProbeURL bounds a probed URL (it is part of a kv key).
const maxProbeURL = 2048

// maxToolHashes bounds the per-tool hashes kept for rug-pull detection;
// a larger server keeps only its schema hash.
const maxToolHashes = 500

// Change-feed kinds the prober appends (kv and ingest own the others).
const (
	ChangeEndpointDown = "endpoint.down"
	ChangeEndpointUp   = "endpoint.up"
	ChangeToolsChanged = "server.tools_changed"
)

// ProbeConfig configures the probing of indexed endpoints. Zero values take
// the defaults.
type ProbeConfig struct {
	// Fetcher makes every probe request; it must mark its traffic (the
	// User-Agent) as a probe. nil means Config.Fetcher.
	Fetcher *web.Fetcher
	// Interval between two probes of one endpoint; default 10 minutes.
	Interval time.Duration
	// Jitter spreads each next probe over ±Jitter×Interval; default 0.1.
	Jitter float64
	// Timeout bounds one probe; default 10 s.
	Timeout time.Duration
	// HostConcurrency and HostGap are the politeness per host: at most this
	// many probes at once and this long between two starts; defaults 1 and
	// 2 s.
	HostConcurrency int
	HostGap         time.Duration
	// Budget caps the probes started per minute; default 600.
	Budget int
	// DownAfter is the consecutive failures that declare an endpoint down;
	// default 3.
	DownAfter int
	// Window is the days the reports cover; default 30.
	Window int
}

func (pc *ProbeConfig) defaults() {
	if pc.Interval <= 0 {
		pc.Interval = 10 * time.Minute
	}
	if pc.Jitter == 0 {
		pc.Jitter = 0.1
	}
	if pc.Timeout <= 0 {
		pc.Timeout = 10 * time.Second
	}
	if pc.HostConcurrency <= 0 {
		pc.HostConcurrency = 1
	}
	if pc.HostGap == 0 {
		pc.HostGap = 2 * time.Second
	}
	if pc.Budget == 0 {
		pc.Budget = 600
	}
	if pc.DownAfter <= 0 {
		pc.DownAfter = 3
	}
	if pc.Window <= 0 {
		pc.Window = probe.DefaultWindow
	}
}

// prober is the registry's probing state.
type prober struct {
	reader *sources.Reader
	fetch  *web.Fetcher
	sched  *probe.Scheduler
	// validators are the last ETag / Last-Modified per URL for conditional
	// GETs; lost on restart, which costs one full GET.
	validators sync.Map // url -> validator
	running    atomic.Bool

	// targets are the last probeTargets answer and kv's entries version
	// it was built at: they are built again only after entries changed
	// (not after the index's own writes, such as the payment
	// reconciliation's marks). targetReads counts the builds, for tests.
	targetsMu   sync.Mutex
	targetsAt   uint64
	targets     []probe.Target
	targetReads int
	// probes is what each public entry brings to the targets: read from
	// every entry once (seconds of CPU at 100k entries), then kept up to
	// date from the change feed (targetsSeq its last change read), so a
	// publish costs a read of its entries only.
	probes     map[string]entryProbe
	targetsSeq uint64
	// payClaims are the x402 terms each paid entry states, by identifier,
	// read with targets: what a 402 must show for pay:verified.
	payClaims map[string]payClaim
	// payLearn maps the entries probed as a plain URL to their target:
	// a 402 seen there teaches them the terms it states.
	payLearn map[string]string
	// overlay is what the last reconciliation decided per entry (see
	// DecorateDoc); overlayMu guards it.
	overlayMu sync.Mutex
	overlay   map[string]payOverlay
	// payStop ends the reconciliation loop StartProbes began; payDone is
	// closed when it has ended.
	payStop context.CancelFunc
	payDone chan struct{}
}

type validator struct{ etag, lastModified string }

func (s *Service) newProber() error {
	pc := &s.cfg.Probe
	pc.defaults()
	f := pc.Fetcher
	if f == nil {
		f = s.fetcher
	}
	s.prober = &prober{reader: sources.NewReader(f, s.log), fetch: f}
	sched, err := probe.New(s.db, nil, probe.Options{
		Interval: pc.Interval, Jitter: pc.Jitter, Spread: true, Timeout: pc.Timeout, Window: pc.Window,
		HostConcurrency: pc.HostConcurrency, HostGap: pc.HostGap, Budget: pc.Budget, DownAfter: pc.DownAfter,
		Targets: s.probeTargets, Refresh: min(pc.Interval, 5*time.Minute),
		Logger: s.cfg.Logger, Now: s.cfg.Now,
	})
	if err != nil {
		return err
	}
	s.prober.sched = sched
	return nil
}

// StartProbes probes every indexed endpoint on the schedule until Close.
func (s *Service) StartProbes(ctx context.Context) {
	s.prober.running.Store(true)
	s.prober.sched.Start(ctx)
	pctx, cancel := context.WithCancel(ctx)
	s.prober.payStop, s.prober.payDone = cancel, make(chan struct{})
	go func() {
		defer close(s.prober.payDone)
		s.runPayReconcile(pctx)
	}()
}

// ProbeRound probes every indexed endpoint once, now, ignoring the
// schedule's politeness (for `ardx probe --once` style runs and tests).
func (s *Service) ProbeRound(ctx context.Context) {
	s.prober.sched.RunOnce(ctx)
	if err := s.ReconcilePay(ctx); err != nil {
		s.log.Warn("pay:verified reconciliation failed", "err", err)
	}
}

// endpoint is what is probed for an entry.
type endpoint struct {
	kind      string
	transport string
	url       string
	cardURL   string // MCP: the card to read the endpoint from when none is known
	method    string // x402: the paid request's method
}

func (ep endpoint) name() string {
	if ep.method != "" {
		return ep.kind + " " + ep.method + " " + ep.url
	}
	return ep.kind + " " + firstOf(ep.url, ep.cardURL)
}

// entryHead is what endpoint and payEndpoint read of an entry body,
// decoded once for both.
type entryHead struct {
	Type     string                     `json:"type"`
	URL      string                     `json:"url"`
	Data     json.RawMessage            `json:"data"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// headOf decodes e's head; ok is false for a body that is not a JSON
// object of those members.
func headOf(e kv.Entry) (h entryHead, ok bool) {
	return h, json.Unmarshal(e.Body, &h) == nil
}

// endpointOf returns the endpoint probed for entry e. An MCP tool is
// probed through its server (server names the server entry); entries with
// nothing callable have none.
func endpointOf(e kv.Entry) (ep endpoint, server string, ok bool) {
	h, ok := headOf(e)
	if !ok {
		return endpoint{}, "", false
	}
	return h.endpoint()
}

// endpoint is endpointOf for a decoded head.
func (h *entryHead) endpoint() (ep endpoint, server string, ok bool) {
	switch h.Type {
	case sources.TypeMCPTool:
		var d struct {
			Server struct {
				Identifier string `json:"identifier"`
			} `json:"server"`
		}
		_ = json.Unmarshal(h.Data, &d)
		return endpoint{}, d.Server.Identifier, false
	case sources.TypeMCPServer:
		ep = endpoint{kind: probeKindMCP, transport: "streamable-http"}
		var u string
		if raw, present := h.Metadata["mcp.endpoint"]; present && json.Unmarshal(raw, &u) == nil && u != "" {
			ep.url = u
		} else {
			var d struct {
				Remotes []struct{ Type, URL string } `json:"remotes"`
			}
			_ = json.Unmarshal(h.Data, &d)
			for _, r := range d.Remotes {
				if r.Type == "streamable-http" && ep.url == "" {
					ep.url = r.URL
				}
			}
			if ep.url == "" {
				ep.cardURL = h.URL
			}
		}
	case typeA2ACard:
		ep = endpoint{kind: probeKindA2A, url: h.URL}
	case sources.TypeOpenAPIOperation:
		var d struct {
			Servers []string `json:"servers"`
		}
		_ = json.Unmarshal(h.Data, &d)
		if len(d.Servers) > 0 {
			ep = endpoint{kind: probeKindAPI, url: d.Servers[0]}
		}
	default:
		ep = endpoint{kind: probeKindURL, url: h.URL}
	}
	target := firstOf(ep.url, ep.cardURL)
	u, err := url.Parse(target)
	if ep.kind == "" || target == "" || len(target) > maxProbeURL || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return endpoint{}, "", false
	}
	if ep.transport == "" {
		ep.transport = u.Scheme
	}
	return ep, "", true
}

// probeGroup is one endpoint and the entries that share it.
type probeGroup struct {
	ep      endpoint
	host    string            // ep's host, lower-case
	ids     []string          // sorted; ids[0] names the endpoint in events
	toolIDs map[string]string // MCP: tool name -> tool entry identifier
}

// probeTargets lists one target per distinct endpoint of the public
// entries: the operations of one API share their base URL, so it is
// probed once, not once per operation.
func (s *Service) probeTargets() ([]probe.Target, error) {
	p := s.prober
	p.targetsMu.Lock()
	defer p.targetsMu.Unlock()
	// What is read after version v and change seq were read holds at
	// least what kv held then.
	v, seq, err := s.db.EntriesState()
	if err != nil {
		return nil, err
	}
	if p.targets != nil && v == p.targetsAt {
		return p.targets, nil
	}
	if p.probes == nil {
		p.probes, err = s.readEntryProbes()
	} else {
		seq, err = s.updateEntryProbes(p.probes, p.targetsSeq)
	}
	if err != nil {
		p.probes = nil
		return nil, err
	}
	p.targets, _, p.payClaims, p.payLearn = s.buildTargets(p.probes)
	p.targetsAt, p.targetsSeq = v, seq
	p.targetReads++
	return p.targets, nil
}

// entryProbe is what one public entry brings to the probe targets.
type entryProbe struct {
	ep     endpoint // the endpoint it is probed at, when probed
	host   string   // ep's host, lower-case
	probed bool
	server string    // an MCP tool's server, which it is probed through
	tool   string    // and its name there
	claim  *payClaim // the x402 terms it states, checked at ep
	learn  bool      // probed as a plain URL: a 402 there teaches it terms
}

// entryProbeOf is e's entryProbe; ok is false for an entry that brings
// nothing (private, or a body that is not a JSON object).
func entryProbeOf(e kv.Entry) (ep entryProbe, ok bool) {
	if e.Owner != "" {
		return ep, false // private entries are not reported on
	}
	h, ok := headOf(e)
	if !ok {
		return ep, false
	}
	ep.ep, ep.server, ep.probed = h.endpoint()
	if pe, claim, paid := h.payEndpoint(ep.ep, ep.probed); paid {
		ep.ep, ep.probed = pe, true
		claim.target = pe.name()
		ep.claim = &claim
	} else if ep.probed && ep.ep.kind == probeKindURL {
		ep.learn = true
	}
	if ep.probed {
		u, _ := url.Parse(firstOf(ep.ep.url, ep.ep.cardURL))
		ep.host = strings.ToLower(u.Hostname())
	}
	if !ep.probed && ep.server != "" {
		var d struct {
			Server struct{ Tool string } `json:"server"`
		}
		_ = json.Unmarshal(h.Data, &d)
		ep.tool = d.Server.Tool
	}
	return ep, true
}

// readEntryProbes reads every entry's entryProbe from kv (seconds of CPU
// at 100k entries).
func (s *Service) readEntryProbes() (map[string]entryProbe, error) {
	out := map[string]entryProbe{}
	err := s.db.ForEachEntry(func(e kv.Entry) error {
		if ep, ok := entryProbeOf(e); ok {
			out[e.ID] = ep
		}
		return nil
	})
	return out, err
}

// updateEntryProbes brings probes, read up to change after, up to date
// with the entries the change feed names since, and returns the last
// change it read: an entry is stored with its change event, so only those
// entries are read again.
func (s *Service) updateEntryProbes(probes map[string]entryProbe, after uint64) (uint64, error) {
	changed := map[string]bool{}
	last := after
	err := s.db.ScanChanges(after, func(c kv.Change) bool {
		switch c.Kind {
		case kv.ChangeAdded, kv.ChangeChanged, kv.ChangeRemoved:
			changed[c.ID] = true
		}
		last = c.Seq
		return true
	})
	if err != nil || len(changed) == 0 {
		return last, err
	}
	entries, err := s.db.GetEntries(slices.Collect(maps.Keys(changed)))
	if err != nil {
		return after, err
	}
	for id := range changed {
		delete(probes, id)
		if e, ok := entries[id]; ok {
			if ep, ok := entryProbeOf(e); ok {
				probes[id] = ep
			}
		}
	}
	return last, nil
}

// buildTargets groups the entries' probes by endpoint: the targets, the
// groups by target name, and the x402 terms each paid entry states and
// the entries that may learn terms, by identifier.
func (s *Service) buildTargets(probes map[string]entryProbe) ([]probe.Target, map[string]*probeGroup, map[string]payClaim, map[string]string) {
	groups := make(map[string]*probeGroup, len(probes))
	claims := map[string]payClaim{}
	learn := map[string]string{}
	for id, ep := range probes {
		if !ep.probed {
			continue
		}
		name := ep.ep.name()
		if ep.claim != nil {
			claims[id] = *ep.claim
		} else if ep.learn {
			learn[id] = name
		}
		g := groups[name]
		if g == nil {
			g = &probeGroup{ep: ep.ep, host: ep.host}
			groups[name] = g
		}
		g.ids = append(g.ids, id)
	}
	serverOf := map[string]*probeGroup{} // MCP server id -> group
	for _, g := range groups {
		if g.ep.kind == probeKindMCP {
			for _, id := range g.ids {
				serverOf[id] = g
			}
		}
	}
	for id, ep := range probes {
		if g := serverOf[ep.server]; g != nil && !ep.probed && ep.tool != "" {
			if g.toolIDs == nil {
				g.toolIDs = map[string]string{}
			}
			// Two tools of one name: the later identifier, as a read in
			// key order leaves it.
			if prev, dup := g.toolIDs[ep.tool]; !dup || id > prev {
				g.toolIDs[ep.tool] = id
			}
		}
	}
	out := make([]probe.Target, 0, len(groups))
	for name, g := range groups {
		sort.Strings(g.ids)
		out = append(out, probe.Target{
			Name: name, Group: g.ep.kind, Path: g.ep.transport, Host: g.host,
			Observe: s.observer(g.ep), Events: probeEvents(g),
		})
	}
	slices.SortFunc(out, func(a, b probe.Target) int { return strings.Compare(a.Name, b.Name) })
	return out, groups, claims, learn
}

// observer returns the check of an endpoint.
func (s *Service) observer(ep endpoint) func(context.Context) probe.Observation {
	switch ep.kind {
	case probeKindMCP:
		return func(ctx context.Context) probe.Observation { return s.observeMCP(ctx, ep) }
	case probeKindA2A:
		return func(ctx context.Context) probe.Observation { return s.observeCard(ctx, ep.url) }
	case probeKindAPI:
		return func(ctx context.Context) probe.Observation { return s.observeBase(ctx, ep.url) }
	case probeKindPay:
		return func(ctx context.Context) probe.Observation { return s.observePay(ctx, ep) }
	default:
		return func(ctx context.Context) probe.Observation { return s.observeURL(ctx, ep.url) }
	}
}

// observeMCP speaks the protocol as the crawler does (server/discover or
// initialize, then tools/list, sessions and SSE answers), reading the
// endpoint from the server card first when the entry names none.
func (s *Service) observeMCP(ctx context.Context, ep endpoint) probe.Observation {
	endpointURL := ep.url
	if endpointURL == "" {
		cf, err := s.prober.reader.ReadServerCard(ctx, ep.cardURL)
		if err != nil {
			return fetchObservation(err)
		}
		if endpointURL = cf.Card.StreamableHTTPEndpoint(); endpointURL == "" {
			return probe.Observation{Class: probe.ClassProtocolError, Err: errors.New("the server card names no streamable-http remote")}
		}
	}
	tl, err := s.prober.reader.ListTools(ctx, endpointURL)
	if err != nil {
		var rpcErr *sources.RPCError
		if errors.As(err, &rpcErr) {
			return probe.Observation{Class: probe.ClassProtocolError, Err: err}
		}
		return fetchObservation(err)
	}
	if tl.AuthRequired {
		return probe.Observation{Class: probe.ClassAuthRequired, Err: errors.New("the server answered 401: authentication required")}
	}
	n := len(tl.Tools)
	hashes := make(map[string]string, n)
	names := make([]string, 0, n)
	for _, t := range tl.Tools {
		st := safety.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema}
		if t.Annotations != nil {
			st.Annotations, _ = json.Marshal(t.Annotations)
		}
		hashes[t.Name] = safety.DescriptionHash(st)
		names = append(names, t.Name)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, name := range names {
		fmt.Fprintf(sum, "%s\x00%s\n", name, hashes[name])
	}
	obs := probe.Observation{Class: probe.ClassOK, Tools: &n, SchemaHash: hex.EncodeToString(sum.Sum(nil))}
	if n <= maxToolHashes {
		obs.ToolHashes = hashes
	}
	return obs
}

// observeCard fetches an A2A agent card and requires a JSON object with a
// name and a service URL (or the interfaces that carry one).
func (s *Service) observeCard(ctx context.Context, cardURL string) probe.Observation {
	res, obs, done := s.conditionalGet(ctx, cardURL, "application/json")
	if done {
		return obs
	}
	var card struct {
		Name                 string            `json:"name"`
		URL                  string            `json:"url"`
		SupportedInterfaces  []json.RawMessage `json:"supportedInterfaces"`
		AdditionalInterfaces []json.RawMessage `json:"additionalInterfaces"`
	}
	if err := json.Unmarshal(res.Body, &card); err != nil {
		return probe.Observation{Class: probe.ClassProtocolError, Err: fmt.Errorf("the agent card is not a JSON object: %w", err)}
	}
	if strings.TrimSpace(card.Name) == "" || card.URL == "" && len(card.SupportedInterfaces) == 0 && len(card.AdditionalInterfaces) == 0 {
		return probe.Observation{Class: probe.ClassProtocolError, Err: errors.New("the agent card has no name or no service URL")}
	}
	s.keepValidators(cardURL, res)
	return probe.Observation{Class: probe.ClassOK}
}

// observeBase reaches an API's base URL with HEAD, which no API may treat
// as a change of state. Any answer below 500 shows the API is there (a
// base URL often answers 404 or 405); 401 and 403 say a key is needed.
func (s *Service) observeBase(ctx context.Context, base string) probe.Observation {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, base, nil)
	if err != nil {
		return probe.Observation{Class: probe.ClassProtocolError, Err: err}
	}
	res, err := s.prober.fetch.Do(req)
	if err != nil {
		return fetchObservation(err)
	}
	return statusObservation(res.Status, true)
}

// observeURL sends a conditional GET: 2xx and 304 are answers.
func (s *Service) observeURL(ctx context.Context, rawURL string) probe.Observation {
	res, obs, done := s.conditionalGet(ctx, rawURL, "")
	if !done {
		s.keepValidators(rawURL, res)
	}
	return obs
}

// conditionalGet GETs rawURL with the validators of its last answer. done
// is true when obs is final (a failure or a 304); otherwise res is a 2xx
// answer to read.
func (s *Service) conditionalGet(ctx context.Context, rawURL, accept string) (res *web.FetchResult, obs probe.Observation, done bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, probe.Observation{Class: probe.ClassProtocolError, Err: err}, true
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if v, ok := s.prober.validators.Load(rawURL); ok {
		if v := v.(validator); v.etag != "" {
			req.Header.Set("If-None-Match", v.etag)
		} else if v.lastModified != "" {
			req.Header.Set("If-Modified-Since", v.lastModified)
		}
	}
	res, err = s.prober.fetch.Do(req)
	switch {
	case errors.Is(err, web.ErrTooLarge):
		return nil, probe.Observation{Class: probe.ClassOK}, true // it answered, with more than we read
	case err != nil:
		return nil, fetchObservation(err), true
	case res.Status == http.StatusNotModified:
		return res, probe.Observation{Class: probe.ClassOK}, true
	case res.Status == http.StatusPaymentRequired:
		return res, paidObservation(res), true
	case res.Status < 200 || res.Status > 299:
		return res, statusObservation(res.Status, false), true
	}
	return res, probe.Observation{Class: probe.ClassOK}, false
}

func (s *Service) keepValidators(rawURL string, res *web.FetchResult) {
	v := validator{etag: res.Header.Get("ETag"), lastModified: res.Header.Get("Last-Modified")}
	if v.etag != "" || v.lastModified != "" {
		s.prober.validators.Store(rawURL, v)
	}
}

// statusObservation classes an HTTP status; lenient treats every answer
// below 500 as the endpoint being there.
func statusObservation(status int, lenient bool) probe.Observation {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return probe.Observation{Class: probe.ClassAuthRequired, Err: fmt.Errorf("HTTP %d: authentication required", status)}
	case status >= 200 && status <= 399, lenient && status < 500:
		return probe.Observation{Class: probe.ClassOK}
	}
	return probe.Observation{Class: probe.ClassHTTPError, Err: fmt.Errorf("HTTP %d", status)}
}

// fetchObservation classes a failed fetch or an MCP exchange's HTTP error.
func fetchObservation(err error) probe.Observation {
	var statusErr *sources.HTTPStatusError
	if errors.As(err, &statusErr) {
		obs := statusObservation(statusErr.Status, false)
		obs.Err = err
		return obs
	}
	if errors.Is(err, sources.ErrNotFound) {
		return probe.Observation{Class: probe.ClassHTTPError, Err: err}
	}
	return probe.Observation{Class: probe.Classify(err), Err: err}
}

// probeEvents returns the change events of a probe of g: down and up after
// the debounce, a changed tool list, and each tool whose description hash
// changed (a rug pull shows here between two crawls).
func probeEvents(g *probeGroup) func(prev, cur kv.ProbeResult) []kv.Change {
	id := g.ids[0]
	epURL := firstOf(g.ep.url, g.ep.cardURL)
	return func(prev, cur kv.ProbeResult) []kv.Change {
		var out []kv.Change
		ev := func(kind, entry string, detail any) {
			c := kv.Change{Time: cur.At, Kind: kind, ID: entry, Source: "probe", Endpoint: epURL}
			if detail != nil {
				c.Detail, _ = json.Marshal(detail)
			}
			out = append(out, c)
		}
		switch {
		case prev.State == probe.StateUp && cur.State == probe.StateDown:
			ev(ChangeEndpointDown, id, map[string]any{"class": cur.Class, "error": cur.Error, "failedProbes": cur.Fails, "entries": len(g.ids)})
		case prev.State == probe.StateDown && cur.State == probe.StateUp:
			ev(ChangeEndpointUp, id, map[string]any{"class": cur.Class, "downSince": prev.Since, "entries": len(g.ids)})
		}
		if prev.SchemaHash == "" || cur.SchemaHash == prev.SchemaHash || !cur.ToolsChangedAt.Equal(cur.At) {
			return out
		}
		var added, removed []string
		for name := range cur.ToolHashes {
			if _, ok := prev.ToolHashes[name]; !ok {
				added = append(added, name)
			}
		}
		for name := range prev.ToolHashes {
			if _, ok := cur.ToolHashes[name]; !ok {
				removed = append(removed, name)
			}
		}
		sort.Strings(added)
		sort.Strings(removed)
		if len(added) > 0 || len(removed) > 0 || deref(prev.Tools) != deref(cur.Tools) {
			ev(ChangeToolsChanged, id, map[string]any{"toolsBefore": deref(prev.Tools), "toolsAfter": deref(cur.Tools), "added": orEmpty(added), "removed": orEmpty(removed)})
		}
		var changed []string
		for name, h := range cur.ToolHashes {
			if old, ok := prev.ToolHashes[name]; ok && old != h {
				changed = append(changed, name)
			}
		}
		sort.Strings(changed)
		for _, name := range changed {
			entry := g.toolIDs[name]
			if entry == "" {
				entry = id
			}
			ev(ChangeToolChanged, entry, map[string]any{"tool": name, "hashBefore": prev.ToolHashes[name], "hashAfter": cur.ToolHashes[name]})
		}
		return out
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func orEmpty(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
