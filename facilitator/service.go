package facilitator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/facilitator/screen"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/web"
)

// MaxBodyBytes caps the body of POST /verify and POST /settle (the spec's
// request body size limit); one byte more is a 413 in the payment shape.
const MaxBodyBytes = 65536

// The rate-limit buckets of the facilitator. Rates apply per client address.
const (
	// BucketSettle limits POST /settle, the only path that spends gas.
	BucketSettle = "settle"
	// BucketPaymentsRead limits /verify, /supported and /health, which
	// merchants call on every paid request.
	BucketPaymentsRead = "payments-read"
	// BucketDiscovery limits every other path, unknown paths included.
	BucketDiscovery = "discovery"
)

// DefaultBuckets returns the spec's rates: settle 50/s burst 100,
// payments-read 30/s burst 60, discovery 10/s burst 20.
func DefaultBuckets() []web.Bucket {
	return []web.Bucket{
		{Name: BucketSettle, Rate: 50, Burst: 100},
		{Name: BucketPaymentsRead, Rate: 30, Burst: 60},
		{Name: BucketDiscovery, Rate: 10, Burst: 20},
	}
}

// ParseRateLimits turns the --rate-limit flag value into buckets. "" keeps
// the defaults; "off" disables rate limiting (dangerous on a public address:
// /settle spends the operator's gas); otherwise a comma-separated list of
// "name=rate:burst" overrides the named buckets and keeps the others.
func ParseRateLimits(spec string) (buckets []web.Bucket, off bool, err error) {
	buckets = DefaultBuckets()
	spec = strings.TrimSpace(spec)
	switch spec {
	case "":
		return buckets, false, nil
	case "off":
		return buckets, true, nil
	}
	for _, part := range strings.Split(spec, ",") {
		b, err := web.ParseBucketSpec(strings.TrimSpace(part))
		if err != nil {
			return nil, false, err
		}
		i := bucketIndex(buckets, b.Name)
		if i < 0 {
			return nil, false, fmt.Errorf("unknown rate-limit bucket %q (known: %s, %s, %s)", b.Name, BucketSettle, BucketPaymentsRead, BucketDiscovery)
		}
		buckets[i] = b
	}
	return buckets, false, nil
}

func bucketIndex(buckets []web.Bucket, name string) int {
	for i, b := range buckets {
		if b.Name == name {
			return i
		}
	}
	return -1
}

// Config is what the facilitator service needs besides its engine.
type Config struct {
	// PublicURL is the service's base URL without a trailing slash; problem
	// types are PublicURL + "/developers#<slug>".
	PublicURL string
	Logger    *slog.Logger

	// Networks are the per-network facts /supported publishes, in the order
	// they are listed. Availability is asked again on every request.
	Networks []NetworkFacts

	// Extensions are the x402 extension names listed in /supported.
	Extensions []string

	// RateLimits are the buckets; nil means DefaultBuckets. Every bucket
	// named in this package must be present.
	RateLimits []web.Bucket
	// RateLimitsOff disables rate limiting entirely. Dangerous on a public
	// address: /settle spends the operator's gas.
	RateLimitsOff bool
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed; from
	// any other peer the remote address is the client.
	TrustedProxies []netip.Prefix

	// VerifyTimeout bounds one POST /verify (chain reads and simulation).
	// Zero means 15 s.
	VerifyTimeout time.Duration

	// Screening is the sanctions list the engine consults; the service only
	// reports its state (age, size, last error). nil means no screening.
	Screening *screen.List

	// Now is the clock of the rate limiter; nil means time.Now.
	Now func() time.Time

	// Availability reports the probes' observed availability per network
	// for /status, /status.json and the facilitator_status tool; nil shows
	// it as withheld (no probes run).
	Availability AvailabilitySource
	// Version is the binary's version, reported by the MCP server and the
	// status page; "" means "dev".
	Version string

	// Echo configures the test merchant at GET /echo; nil answers 503.
	Echo *EchoConfig
	// Catalogue records paid resources for /discovery/resources; nil lists
	// nothing. New binds it to the engine.
	Catalogue *Catalogue
	// Prices are the settlement prices /pricing publishes; nil means the
	// defaults of ParseSettlementPrices.
	Prices []NetworkPrice
}

// Service is the facilitator's HTTP service. Build it with New, serve
// Handler, and call Close before shutting the listener down so /health
// turns 503 while in-flight requests drain.
type Service struct {
	cfg      Config
	engine   *settle.Engine
	logger   *slog.Logger
	problems web.Problems
	limiter  *web.Limiter
	handler  http.Handler
	closing  atomic.Bool
	echo     *echoMerchant
}

// New builds the service around a running settlement engine. The caller
// keeps ownership of the engine and closes it after the listener is closed.
func New(cfg Config, engine *settle.Engine) (*Service, error) {
	if engine == nil {
		return nil, errors.New("facilitator: nil settlement engine")
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.PublicURL == "" {
		return nil, errors.New("facilitator: PublicURL is required (problem types are built from it)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.VerifyTimeout <= 0 {
		cfg.VerifyTimeout = 15 * time.Second
	}
	if cfg.RateLimits == nil {
		cfg.RateLimits = DefaultBuckets()
	}
	for _, name := range []string{BucketSettle, BucketPaymentsRead, BucketDiscovery} {
		if bucketIndex(cfg.RateLimits, name) < 0 {
			return nil, fmt.Errorf("facilitator: rate-limit bucket %q is missing", name)
		}
	}
	for i, n := range cfg.Networks {
		if n == nil {
			return nil, fmt.Errorf("facilitator: network %d is nil", i)
		}
	}
	logger := cfg.Logger.With("component", "facilitator")
	limiter, err := web.NewLimiter(cfg.RateLimits, web.LimiterOptions{
		TrustedProxies: cfg.TrustedProxies,
		Disabled:       cfg.RateLimitsOff,
		Now:            cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("facilitator: rate limits: %w", err)
	}
	s := &Service{
		cfg:      cfg,
		engine:   engine,
		logger:   logger,
		problems: web.Problems{BaseURL: cfg.PublicURL, Logger: logger},
		limiter:  limiter,
	}
	s.echo = newEchoMerchant(cfg.Echo)
	if cfg.Catalogue != nil {
		cfg.Catalogue.bind(engine)
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the service's HTTP handler.
func (s *Service) Handler() http.Handler { return s.handler }

// Close marks the service as draining: /health answers 503 from now on so a
// load balancer stops sending traffic, while requests already admitted
// finish. It does not close the engine, which its owner closes after the
// listener.
func (s *Service) Close(ctx context.Context) error {
	s.closing.Store(true)
	return nil
}

// routes lists every method and path of the facilitator. Middleware runs
// outermost first: request id, logging, recover, rate limit, router.
func (s *Service) routes() http.Handler {
	r := httprouter.New()
	// Unknown paths must answer 404 problems, not redirects to a guess.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// OPTIONS on a known path answers 200 with Allow (httprouter lists
	// OPTIONS in every Allow header, so refusing it would contradict 405s).
	r.NotFound = s.problems.NotFound()
	r.MethodNotAllowed = s.problems.MethodNotAllowed()
	r.PanicHandler = s.problems.Panic

	r.Handler(http.MethodPost, "/verify", s.paymentRoute(verifyShape, http.HandlerFunc(s.handleVerify)))
	r.Handler(http.MethodPost, "/settle", s.paymentRoute(settleShape, http.HandlerFunc(s.handleSettle)))
	r.Handler(http.MethodGet, "/verify", http.HandlerFunc(s.handleVerifyHint))
	r.Handler(http.MethodGet, "/settle", http.HandlerFunc(s.handleSettleHint))
	r.Handler(http.MethodGet, "/supported", http.HandlerFunc(s.handleSupported))
	r.Handler(http.MethodGet, "/health", http.HandlerFunc(s.handleHealth))
	r.Handler(http.MethodHead, "/health", http.HandlerFunc(s.handleHealth))
	r.Handler(http.MethodGet, "/echo", http.HandlerFunc(s.handleEcho))
	r.Handler(http.MethodGet, "/echo/status", http.HandlerFunc(s.handleEchoStatus))
	r.Handler(http.MethodGet, "/discovery/resources", http.HandlerFunc(s.handleDiscoveryResources))
	r.Handler(http.MethodGet, "/discovery/stats", http.HandlerFunc(s.handleDiscoveryStats))
	r.Handler(http.MethodGet, "/discovery/search", http.HandlerFunc(s.handleDiscoverySearch))
	r.Handler(http.MethodGet, "/pricing", http.HandlerFunc(s.handlePricing))
	r.Handler(http.MethodGet, "/pricing.md", http.HandlerFunc(s.handlePricingMarkdown))
	r.Handler(http.MethodGet, "/.well-known/ard.json", http.HandlerFunc(s.handleARDManifest))
	r.Handler(http.MethodGet, "/status.json", http.HandlerFunc(s.handleStatusJSON))
	r.Handler(http.MethodGet, "/status", http.HandlerFunc(s.handleStatusPage))
	r.Handler(http.MethodPost, "/mcp", s.mcpHandler())
	r.Handler(http.MethodGet, "/mcp", http.HandlerFunc(s.handleMCPMethodNotAllowed))
	r.Handler(http.MethodDelete, "/mcp", http.HandlerFunc(s.handleMCPMethodNotAllowed))
	r.Handler(http.MethodGet, "/integrate", http.HandlerFunc(s.handleIntegrate))
	r.Handler(http.MethodGet, "/", http.HandlerFunc(s.handleHome))
	r.Handler(http.MethodGet, "/openapi.json", http.HandlerFunc(s.handleOpenAPI))
	r.Handler(http.MethodGet, "/developers", http.HandlerFunc(s.handleDevelopers))

	return web.Chain(r,
		web.WithRequestID,
		web.WithLogging(s.logger),
		web.WithMetrics("facilitator", r),
		web.WithRecover(s.problems),
		s.withRateLimit,
	)
}

// bucketFor names the rate-limit bucket of a request, per the spec's table.
func bucketFor(r *http.Request) string {
	switch r.URL.Path {
	case "/settle":
		if r.Method == http.MethodPost {
			return BucketSettle
		}
	case "/verify", "/supported", "/health":
		return BucketPaymentsRead
	}
	return BucketDiscovery
}

// withRateLimit charges every request to its bucket before routing, so
// unknown paths are limited too. A refusal keeps the payment shape on
// POST /verify and POST /settle and is a problem everywhere else.
func (s *Service) withRateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, retryAfter := s.limiter.Allow(r, bucketFor(r), w)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		if retryAfter < 1 {
			retryAfter = 1
		}
		msg := fmt.Sprintf("rate limit of bucket %s exceeded for this client; retry after %d s", bucketFor(r), retryAfter)
		if shape, ok := paymentShapeOf(r); ok {
			w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
			writePaymentFailure(w, shape, http.StatusTooManyRequests, reasonTooManyRequests, msg)
			return
		}
		p := s.problems.New(web.SlugTooManyRequests, msg)
		p.RetryAfter = retryAfter
		s.problems.Write(w, r, p)
	})
}
