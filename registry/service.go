package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/internal/gencache"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/report"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// maxBodyBytes caps every request body; larger bodies get 413.
const maxBodyBytes = 1 << 20

// Config configures a Service.
type Config struct {
	// PublicURL is this registry's base URL as callers see it, without a
	// trailing slash. It is each local result's source and the base of
	// problem type URIs.
	PublicURL string
	// Upstreams are the base URLs of the registries a federation=auto
	// search asks (each gets POST <base>/search).
	Upstreams []string
	// PublicRegistries are further registries federation=auto asks: the
	// public ARD registries (DefaultPublicRegistries unless the operator
	// says otherwise). Unlike Upstreams, each starts behind an open circuit
	// breaker that a background trial closes, so a machine with no network
	// answers its first auto search in local time too. nil asks none.
	PublicRegistries []string
	// FederationTimeout bounds the whole fan-out to upstreams; zero means
	// 800 ms. A slower upstream is skipped.
	FederationTimeout time.Duration
	// Logger receives request and federation logs; nil discards them.
	Logger *slog.Logger
	// HTTPClient asks upstream registries; nil means a client with
	// connect, header and overall timeouts that follows no redirects.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// TokenKey authenticates page tokens. Empty means the key kept in kv
	// (made on first start), so tokens survive restarts.
	TokenKey []byte
	// Fetcher performs every outbound fetch of a publisher's domain (manifest
	// build, doctor, audit) and every call to a registry discovered in the
	// index; nil means web.NewFetcher with its safe defaults.
	Fetcher *web.Fetcher
	// FederateDiscovered lists the hosts of registries discovered in the
	// index (entries of type application/ai-registry+json) that
	// federation=auto may also ask. Empty (the default) asks none: a
	// discovered registry is a publisher's claim, so the operator opts in
	// host by host.
	FederateDiscovered []string
	// Viewer overrides the owner tags whose private entries a request may
	// see. nil (production) means the caller's key: the tags of the domains
	// its account holds by claim (access.Caller.Viewers). Tests set it to
	// reach private entries stored without an account.
	Viewer func(*http.Request) []string
	// RateLimits are the request limits, buckets named BucketAddress,
	// BucketKey and BucketMint; a bucket left out is unlimited. nil (library
	// users, tests) limits nothing; the commands pass DefaultRateLimits.
	RateLimits []web.Bucket
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// for the per-address limits.
	TrustedProxies []netip.Prefix
	// Claims configures ownership proofs: the DNS resolver address, the
	// challenge lifetime. Its Fetcher defaults to the service's Fetcher.
	Claims access.ClaimConfig
	// DemandRetention is how long the demand log keeps each search record;
	// zero means 90 days. The daily aggregates /stats reads are kept.
	DemandRetention time.Duration
	// Probe configures the probing of indexed endpoints (StartProbes) and
	// the window of the reports read from it.
	Probe ProbeConfig
	// Bench schedules the frozen benchmark (StartBench); zero runs it only
	// on demand (RunBench).
	Bench BenchConfig
	// Payments configures the sale of credits (GET /x402, POST /credits);
	// the zero value sells none. SetPayments sets it after New.
	Payments PaymentsConfig
	// MonitorInterval is how often monitoring charges run and the alert
	// outbox is filled and delivered; zero means 10 s, negative never
	// (tests drive RunMonitoring).
	MonitorInterval time.Duration
	// WebhookFetcher posts monitoring alerts; nil means web.NewFetcher
	// refusing private addresses and redirects, 10 s, 64 KiB answers.
	WebhookFetcher *web.Fetcher
	// FullReports, when set, decides whether r may read domain's reports
	// past the free window (the last 7 days, the top 25 rows). nil applies
	// the rule: a key whose account owns the domain by claim or monitors it.
	FullReports func(r *http.Request, domain string) bool
	// Reports configures the third-party sources of /usage and
	// /web-position; the zero value calls none of them.
	Reports ReportSources
}

// Service is the registry's HTTP service. Create it with New, serve
// Handler(), and Close it to flush the demand log.
type Service struct {
	cfg       Config
	db        *kv.DB
	ix        *index.Index
	log       *slog.Logger
	problems  web.Problems
	client    *http.Client
	upstreams []upstream // configured, then public registries
	breakers  breakers
	tokens    tokenSealer
	demand    *demandWriter
	access    *access.Store                   // accounts, keys, claims, private entries
	limiter   *web.Limiter                    // per key and per address
	usage     usageCounter                    // metered requests per account, today
	meParts   []mePart                        // further members of an account's GET /me
	responses *gencache.Cache[cachedResponse] // rendered local search responses
	bodies    *gencache.Cache[kv.EntryBody]   // entries of recent results
	openapi   []byte
	// sourceJSON is PublicURL as a JSON string, the source of local results.
	sourceJSON []byte
	handler    http.Handler

	// Publisher tools and federation with discovered registries.
	fetcher    *web.Fetcher
	reader     *sources.Reader
	safety     safetyCache
	discovered discoveredCache
	prober     *prober
	survey     surveyCache

	bench     benchState // the frozen benchmark's runs and /bench.json
	planVocab planVocab  // POST /plan's vocabulary of the index
	// Monitoring and credits (registry/access).
	credits     atomic.Pointer[access.Credits] // swapped by SetPayments
	monitor     *access.Monitor
	alerts      *access.Alerts
	stopMonitor func(context.Context) error
	// Publisher reports.
	usageSources *report.Usage
	webpos       *report.WebPositions
	adoption     adoptionCache
}

// upstream is one registry federation=auto may ask.
type upstream struct {
	base       string // normalised base URL, no trailing slash
	host       string // host[:port], for logs
	sourceJSON []byte // base as a JSON string, the source of its results
	// client is nil for configured and public upstreams (Service.client);
	// discovered ones are called through the SSRF-safe Fetcher's client.
	client *http.Client
	kind   string // kindConfigured, kindPublic or kindDiscovered
}

// New checks cfg and returns a Service reading entries from db and ranking
// them with ix. It starts the demand log writer; Close stops it.
func New(cfg Config, db *kv.DB, ix *index.Index) (*Service, error) {
	if db == nil || ix == nil {
		return nil, errors.New("registry: New needs a kv.DB and an index.Index")
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if u, err := url.Parse(cfg.PublicURL); cfg.PublicURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("registry: public URL %q must be an absolute http(s) URL", cfg.PublicURL)
	}
	if cfg.FederationTimeout <= 0 {
		cfg.FederationTimeout = 800 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.TokenKey) == 0 {
		key, err := db.Secret("registry.page_token_key", 32)
		if err != nil {
			return nil, err
		}
		cfg.TokenKey = key
	}
	s := &Service{
		cfg:      cfg,
		db:       db,
		ix:       ix,
		log:      cfg.Logger.With("component", "registry"),
		problems: web.Problems{BaseURL: cfg.PublicURL, Logger: cfg.Logger, ARD: true},
		client:   cfg.HTTPClient,
		tokens:   tokenSealer{key: cfg.TokenKey, now: cfg.Now},
		access:   access.New(db, cfg.Now),
	}
	if s.client == nil {
		s.client = defaultUpstreamClient()
	}
	s.breakers.init(cfg.Now)
	seen := map[string]bool{}
	for _, list := range []struct {
		kind string
		urls []string
	}{{kindConfigured, cfg.Upstreams}, {kindPublic, cfg.PublicRegistries}} {
		for _, raw := range list.urls {
			base := strings.TrimRight(strings.TrimSpace(raw), "/")
			u, err := url.Parse(base)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return nil, fmt.Errorf("registry: upstream %q must be an absolute http(s) base URL without query or fragment", raw)
			}
			if base == cfg.PublicURL {
				if list.kind == kindPublic {
					continue // this registry is one of the public ones
				}
				return nil, fmt.Errorf("registry: upstream %q is this registry itself", raw)
			}
			if seen[base] {
				continue
			}
			seen[base] = true
			src, _ := json.Marshal(base)
			s.upstreams = append(s.upstreams, upstream{base: base, host: u.Host, sourceJSON: src, kind: list.kind})
			if list.kind == kindPublic {
				s.breakers.get(base).startOpen()
			}
		}
	}
	doc, err := buildOpenAPI(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	s.openapi = doc
	s.sourceJSON, _ = json.Marshal(cfg.PublicURL)
	s.fetcher = cfg.Fetcher
	if s.fetcher == nil {
		s.fetcher = web.NewFetcher(web.FetchOptions{})
	}
	s.reader = sources.NewReader(s.fetcher, s.log)
	if cfg.Claims.Fetcher == nil {
		cfg.Claims.Fetcher = s.fetcher
	}
	s.access.ConfigureClaims(cfg.Claims)
	if cfg.RateLimits != nil {
		lim, err := web.NewLimiter(cfg.RateLimits, web.LimiterOptions{TrustedProxies: cfg.TrustedProxies, Now: cfg.Now})
		if err != nil {
			return nil, fmt.Errorf("registry: rate limits: %w", err)
		}
		s.limiter = lim
	}
	s.discovered.allow = map[string]bool{}
	for _, h := range cfg.FederateDiscovered {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			s.discovered.allow[h] = true
		}
	}
	s.responses = gencache.New[cachedResponse](responseCacheSize)
	s.bodies = gencache.New[kv.EntryBody](entryCacheSize)
	if err := s.newProber(); err != nil {
		return nil, err
	}
	if err := cfg.Reports.check(); err != nil {
		return nil, err
	}
	s.usageSources = report.NewUsage(db, cfg.Reports.Usage, cfg.Now)
	s.webpos = report.NewWebPositions(db, cfg.Reports.WebSearch, cfg.Now)
	s.demand = newDemandWriter(db, s.log, s.cfg.Now, cfg.DemandRetention)
	if err := s.initMonitoring(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the service's HTTP handler, middleware included.
func (s *Service) Handler() http.Handler { return s.handler }

// Flush waits until every search answered so far is committed to the demand
// log, or ctx ends.
func (s *Service) Flush(ctx context.Context) error { return s.demand.flush(ctx) }

// Close stops the probes, then the demand log writer after committing what it holds. The
// handler must no longer be serving: searches answered after Close are not
// recorded.
func (s *Service) Close(ctx context.Context) error {
	s.breakers.close()
	if s.prober.payStop != nil {
		s.prober.payStop()
		<-s.prober.payDone
	}
	s.adoption.mu.Lock()
	if s.adoption.stop != nil {
		s.adoption.stop()
	}
	s.adoption.mu.Unlock()
	return errors.Join(s.closeBench(ctx), s.stopMonitor(ctx), s.prober.sched.Close(ctx), s.demand.close(ctx))
}

// route is one method and path of the API.
type route struct {
	method, path string
	handle       func(http.ResponseWriter, *http.Request, httprouter.Params)
}

// routeTable lists every route of the registry API. The OpenAPI test walks it.
func (s *Service) routeTable() []route {
	return []route{
		{http.MethodGet, "/", s.handleHome},
		{http.MethodPost, "/search", s.handleSearch},
		{http.MethodPost, "/explore", s.handleExplore},
		{http.MethodGet, "/agents", s.handleAgents},
		{http.MethodGet, "/agents/*identifier", s.handleAgent},
		{http.MethodGet, "/health", s.handleHealth},
		{http.MethodGet, "/stats", s.handleStats},
		{http.MethodGet, "/openapi.json", s.handleOpenAPI},
		{http.MethodGet, "/developers", s.handleDevelopers},
		{http.MethodPost, "/manifest/build", s.handleManifestBuild},
		{http.MethodPost, "/doctor", s.handleDoctor},
		{http.MethodPost, "/audit", s.handleAudit},
		{http.MethodGet, "/tools", s.handleToolsGet},
		{http.MethodPost, "/tools", s.handleToolsPost},
		{http.MethodGet, "/tool-safety", s.handleToolSafety},
		{http.MethodGet, "/reliability", s.handleReliability},
		{http.MethodGet, "/feed/changes", s.handleFeedChanges},
		{http.MethodGet, "/state-of-mcp", s.handleStateOfMCP},
		{http.MethodPost, "/plan", s.handlePlan},
		{http.MethodGet, "/bench", s.handleBench},
		{http.MethodGet, "/bench.json", s.handleBenchJSON},
		{http.MethodGet, "/bench/tasks.json", s.handleBenchTasks},
		{http.MethodPost, "/claim", s.handleClaim},
		{http.MethodPost, "/claim/verify", s.handleClaimVerify},
		{http.MethodGet, "/private/entries", s.handlePrivateList},
		{http.MethodPost, "/private/entries", s.handlePrivateRegister},
		{http.MethodDelete, "/private/entries", s.handlePrivateDelete},
		{http.MethodGet, "/me", s.handleMe},
		{http.MethodPost, "/keys/rotate", s.handleKeyRotate},
		{http.MethodGet, "/x402", s.handleX402},
		{http.MethodPost, "/credits", s.handleCreditsBuy},
		{http.MethodPost, "/monitoring/start", s.handleMonitoringStart},
		{http.MethodPost, "/monitoring/stop", s.handleMonitoringStop},
		{http.MethodGet, "/monitoring/mine", s.handleMonitoringMine},
		{http.MethodGet, "/demand", s.handleDemand},
		{http.MethodGet, "/analytics", s.handleAnalytics},
		{http.MethodGet, "/insights", s.handleInsights},
		{http.MethodGet, "/web-position", s.handleWebPosition},
		{http.MethodGet, "/usage", s.handleUsage},
		{http.MethodGet, "/adoption", s.handleAdoption},
	}
}

// routes builds the router and wraps it in the middleware chain, outermost
// first. Every GET route answers HEAD too (net/http drops the body), and
// OPTIONS answers with Allow and the CORS preflight headers: browsers and
// agents call the read APIs from other origins.
func (s *Service) routes() http.Handler {
	r := httprouter.New()
	for _, rt := range s.routeTable() {
		handle := s.limited(rt.method+" "+rt.path, rt.handle)
		if rt.method != http.MethodGet {
			handle = s.bodyOnly(handle)
		}
		r.Handle(rt.method, rt.path, handle)
		if rt.method == http.MethodGet {
			r.Handle(http.MethodHead, rt.path, handle)
		}
	}
	r.NotFound = s.problems.NotFound()
	r.MethodNotAllowed = s.problems.MethodNotAllowed()
	r.PanicHandler = s.problems.Panic
	r.HandleOPTIONS = true
	r.GlobalOPTIONS = http.HandlerFunc(preflight)
	return web.Chain(r,
		web.WithRequestID,
		web.WithLogging(s.log),
		web.WithMetrics("registry", r),
		web.WithRecover(s.problems),
		withCORS,
		web.WithBodyLimit(maxBodyBytes),
		s.withCaller,
	)
}

// bodyOnly refuses query parameters on a route whose input is its body:
// the one parameter rule (unknown parameters are 422, never ignored) holds
// for every route.
func (s *Service) bodyOnly(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if s.noParams(w, r) {
			h(w, r, ps)
		}
	}
}

// withCORS lets any origin read the registry's answers. Nothing rides on
// cookies (keys are bearer tokens), so a wildcard origin gives a page
// nothing its own fetch could not get.
func withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id, RateLimit, RateLimit-Policy")
		next.ServeHTTP(w, r)
	})
}

// preflight answers OPTIONS for a known path; httprouter has set Allow.
func preflight(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", h.Get("Allow"))
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, PAYMENT-SIGNATURE, X-PAYMENT")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

// viewers are the owner tags whose private entries r may see, sorted
// (nil for none): the caller's claimed domains, or Config.Viewer's answer.
func (s *Service) viewers(r *http.Request) []string {
	var vs []string
	if s.cfg.Viewer != nil {
		for _, v := range s.cfg.Viewer(r) {
			if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
				vs = append(vs, v)
			}
		}
	} else {
		vs = s.caller(r).Viewers()
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// mayView reports whether an entry stored under owner may be shown to a
// caller with viewers: public entries always, private ones to their
// owner's tag only. Every private result passes it after the index's own
// filter, so a stale cache or index can never show one to another key.
func mayView(owner string, viewers []string) bool {
	if owner == "" {
		return true
	}
	_, ok := slices.BinarySearch(viewers, strings.ToLower(owner))
	return ok
}

// defaultUpstreamClient bounds every phase of an upstream call; the
// federation deadline is usually shorter and wins.
func defaultUpstreamClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   2 * time.Second,
		ResponseHeaderTimeout: 5 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   10 * time.Second,
		// An upstream that redirects its search endpoint is misconfigured;
		// following it would let it point us anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// writeError is the one place that maps errors to responses: the index's
// refusals are the caller's input (422), everything else goes through
// web.Problems (problems as they are, body errors to 400/413, the rest 500).
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if p, ok := s.accessProblem(err); ok {
		err = p
	}
	switch {
	case errors.Is(err, index.ErrUnknownFilterKey):
		err = s.problems.Invalid(err.Error(), web.FieldError{Field: "query.filter", Message: err.Error()})
	case errors.Is(err, index.ErrBadCursor):
		err = s.problems.Invalid("pageToken does not match this orderBy",
			web.FieldError{Field: "pageToken", Message: "does not match this orderBy"})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The caller went away; nobody reads the answer, so say little.
		err = s.problems.New(web.SlugServiceUnavailable, "the request was cancelled")
	}
	s.problems.Write(w, r, err)
}
