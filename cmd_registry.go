package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/report"
	"github.com/ardx-dev/ardx/web"
)

// registryConfig holds the registry's flags.
type registryConfig struct {
	addr              string
	publicURL         string
	upstreams         []string
	publicRegistries  []string
	federationTimeout time.Duration
	noDefaultCorpus   bool
	// federateDiscovered allowlists hosts of registries found in the index.
	federateDiscovered []string
	crawlInterval      time.Duration
	demandRetention    time.Duration
	probe              registry.ProbeConfig
	benchInterval      time.Duration
	// Keys, claims and rate limits (issue 16).
	rateLimits     []string
	trustedProxies []string
	claimResolver  string
	claimTTL       time.Duration
	// payments sells credits through a facilitator (see registry.PaymentsConfig).
	payments registry.PaymentsConfig
	reports  reportFlags
}

// reportFlags configure the third-party sources of /usage and
// /web-position. Keys come from a file or the environment, never a flag.
type reportFlags struct {
	githubURL, npmURL, pypiURL, dockerURL string
	githubTokenFile                       string
	webSearchURL, webSearchKeyFile        string
}

func (rc *registryConfig) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&rc.addr, "registry-addr", "127.0.0.1:8080", "registry listen address (port 0 picks a free port)")
	f.StringVar(&rc.publicURL, "public-url", "", "the registry's public base URL, written into each result's source (default: http://<registry-addr>)")
	f.StringArrayVar(&rc.upstreams, "upstream", nil, "an upstream ARD registry base URL to federate with (repeatable)")
	f.StringArrayVar(&rc.publicRegistries, "public-registries", nil, "public ARD registries federation auto asks besides --upstream, each behind a circuit breaker (repeatable; default: the built-in list "+strings.Join(registry.DefaultPublicRegistries, ", ")+"; \"none\" asks none)")
	f.DurationVar(&rc.federationTimeout, "federation-timeout", 800*time.Millisecond, "deadline for asking upstream registries in federation auto")
	f.StringArrayVar(&rc.federateDiscovered, "federate-discovered", nil, "host of an indexed ai-registry entry that federation auto may also ask (repeatable; none by default)")
	f.BoolVar(&rc.noDefaultCorpus, "no-default-corpus", false, "do not ingest the embedded default corpus into an empty data dir")
	f.DurationVar(&rc.crawlInterval, "crawl-interval", 0, "re-crawl known publishers in the background this often (0 = off)")
	f.DurationVar(&rc.demandRetention, "demand-retention", 90*24*time.Hour, "how long the demand log keeps each search record (daily counts are kept)")
	f.DurationVar(&rc.probe.Interval, "endpoint-probe-interval", 10*time.Minute, "probe each indexed endpoint this often (0 = no probing)")
	f.Float64Var(&rc.probe.Jitter, "endpoint-probe-jitter", 0.1, "spread each next probe over ± this share of the interval (0 to 1)")
	f.DurationVar(&rc.probe.Timeout, "endpoint-probe-timeout", 10*time.Second, "bound on one probe")
	f.IntVar(&rc.probe.HostConcurrency, "endpoint-probe-host-concurrency", 1, "probes of one host at once")
	f.DurationVar(&rc.probe.HostGap, "endpoint-probe-host-gap", 2*time.Second, "least time between two probes of one host")
	f.IntVar(&rc.probe.Budget, "endpoint-probe-budget", 600, "probes started per minute across all hosts")
	f.IntVar(&rc.probe.DownAfter, "endpoint-probe-down-after", 3, "consecutive failed probes before an endpoint is reported down")
	f.DurationVar(&rc.benchInterval, "bench-interval", 24*time.Hour, "run the frozen search benchmark (/bench) this often, counted from the last run (0 = only on demand: ardx bench)")
	f.StringVar(&rc.payments.FacilitatorURL, "facilitator-url", "", "x402 facilitator the registry calls (/verify, /settle) to sell credits (default under serve: the built-in facilitator; empty under registry: no credits sold)")
	f.StringVar(&rc.payments.PayTo, "pay-to", "", "address that receives credit payments (default under serve with the dev chain: its merchant account)")
	f.StringVar(&rc.payments.Network, "pay-network", "", "network credits are paid on, CAIP-2 id or v1 name (default under serve: the dev chain, else the facilitator's first network)")
	f.Int64Var(&rc.payments.CreditsPerDollar, "credits-per-dollar", 1000, "credits one dollar buys (a month of monitoring is 19,000 credits)")
	f.StringArrayVar(&rc.rateLimits, "registry-rate-limit", nil, "registry rate-limit bucket NAME=RATE:BURST (address, key, mint), or off (repeatable; default address=50:200, key=100:400, mint=0.0167:10, one a minute)")
	f.StringArrayVar(&rc.trustedProxies, "registry-trusted-proxy", nil, "CIDR whose X-Forwarded-For names the client for the registry's per-address limits (repeatable)")
	f.StringVar(&rc.claimResolver, "claim-resolver", "", "host:port of the DNS server ownership claims ask for their TXT record (default: the system resolver)")
	f.DurationVar(&rc.claimTTL, "claim-ttl", access.DefaultClaimTTL, "how long an ownership claim's challenge may be verified")
	def := report.DefaultUsageConfig()
	f.StringVar(&rc.reports.githubURL, "usage-github-url", def.GitHubBase, "GitHub REST API base /usage reads stars from (empty: none)")
	f.StringVar(&rc.reports.githubTokenFile, "usage-github-token-file", "", "file with a GitHub token for /usage (or set ARDX_USAGE_GITHUB_TOKEN); optional, raises GitHub's rate limit")
	f.StringVar(&rc.reports.npmURL, "usage-npm-url", def.NPMBase, "npm downloads API base /usage reads from (empty: none)")
	f.StringVar(&rc.reports.pypiURL, "usage-pypi-url", def.PyPIBase, "pypistats API base /usage reads from (empty: none)")
	f.StringVar(&rc.reports.dockerURL, "usage-docker-url", def.DockerBase, "Docker Hub API base /usage reads pulls from (empty: none)")
	f.StringVar(&rc.reports.webSearchURL, "web-search-url", "", "web-search endpoint /web-position asks (Brave Search API shape: GET ?q=&count=, key in X-Subscription-Token); empty: none, and the report says so")
	f.StringVar(&rc.reports.webSearchKeyFile, "web-search-key-file", "", "file with the web-search key (or set ARDX_WEB_SEARCH_KEY)")
}

// registryLimits reads --registry-rate-limit: nil (no limits) for "off",
// the defaults with the named buckets replaced otherwise.
func (rc *registryConfig) registryLimits() ([]web.Bucket, error) {
	buckets := slices.Clone(registry.DefaultRateLimits)
	for _, spec := range rc.rateLimits {
		for _, one := range strings.Split(spec, ",") {
			if one = strings.TrimSpace(one); one == "" {
				continue
			}
			if one == "off" {
				return nil, nil
			}
			b, err := web.ParseBucketSpec(one)
			if err != nil {
				return nil, fmt.Errorf("--registry-rate-limit: %w", err)
			}
			i := slices.IndexFunc(buckets, func(x web.Bucket) bool { return x.Name == b.Name })
			if i < 0 {
				return nil, fmt.Errorf("--registry-rate-limit %q: the buckets are address, key and mint", one)
			}
			buckets[i] = b
		}
	}
	return buckets, nil
}

// registryProxies reads --registry-trusted-proxy.
func (rc *registryConfig) registryProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range rc.trustedProxies {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--registry-trusted-proxy %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// reportSources builds the report sources from the flags, reading the keys
// from their files or the environment. Errors never echo a key.
func (rc *registryConfig) reportSources(getenv func(string) string) (registry.ReportSources, error) {
	secret := func(file, env, flag string) (string, error) {
		if file == "" {
			return strings.TrimSpace(getenv(env)), nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--%s: %w", flag, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var rs registry.ReportSources
	var err error
	rs.Usage = report.UsageConfig{GitHubBase: rc.reports.githubURL, NPMBase: rc.reports.npmURL, PyPIBase: rc.reports.pypiURL, DockerBase: rc.reports.dockerURL}
	if rs.Usage.GitHubToken, err = secret(rc.reports.githubTokenFile, "ARDX_USAGE_GITHUB_TOKEN", "usage-github-token-file"); err != nil {
		return rs, err
	}
	rs.WebSearch.Endpoint = rc.reports.webSearchURL
	if rs.WebSearch.Key, err = secret(rc.reports.webSearchKeyFile, "ARDX_WEB_SEARCH_KEY", "web-search-key-file"); err != nil {
		return rs, err
	}
	return rs, nil
}

func (rc *registryConfig) validate() error {
	if _, err := rc.registryLimits(); err != nil {
		return err
	}
	if _, err := rc.registryProxies(); err != nil {
		return err
	}
	for _, u := range rc.upstreams {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("--upstream %q: must be an http(s) base URL", u)
		}
	}
	for _, u := range rc.publicRegistries {
		if u == "none" && len(rc.publicRegistries) == 1 {
			continue
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("--public-registries %q: must be http(s) base URLs, or none alone", u)
		}
	}
	if rc.federationTimeout <= 0 {
		return fmt.Errorf("--federation-timeout must be positive")
	}
	if rc.crawlInterval < 0 {
		return fmt.Errorf("--crawl-interval must not be negative")
	}
	if rc.demandRetention <= 0 {
		return fmt.Errorf("--demand-retention must be positive")
	}
	if rc.payments.CreditsPerDollar < 1 || rc.payments.CreditsPerDollar > 1_000_000 {
		return fmt.Errorf("--credits-per-dollar must be from 1 to 1,000,000")
	}
	if p := rc.payments; p.FacilitatorURL != "" && (p.PayTo == "" || p.Network == "") {
		return fmt.Errorf("--facilitator-url needs --pay-to and --pay-network")
	}
	switch p := rc.probe; {
	case p.Interval < 0:
		return fmt.Errorf("--endpoint-probe-interval must not be negative")
	case p.Jitter < 0 || p.Jitter > 1:
		return fmt.Errorf("--endpoint-probe-jitter must be between 0 and 1")
	case p.Timeout <= 0:
		return fmt.Errorf("--endpoint-probe-timeout must be positive")
	case p.HostConcurrency < 1 || p.Budget < 1 || p.DownAfter < 1:
		return fmt.Errorf("--endpoint-probe-host-concurrency, --endpoint-probe-budget and --endpoint-probe-down-after must be at least 1")
	case p.HostGap < 0:
		return fmt.Errorf("--endpoint-probe-host-gap must not be negative")
	}
	if rc.benchInterval < 0 {
		return fmt.Errorf("--bench-interval must not be negative")
	}
	return nil
}

// publicRegistryList is the registries --public-registries names: the
// built-in list when the flag is absent, none for "none".
func (rc *registryConfig) publicRegistryList() []string {
	switch {
	case len(rc.publicRegistries) == 0:
		return registry.DefaultPublicRegistries
	case len(rc.publicRegistries) == 1 && rc.publicRegistries[0] == "none":
		return nil
	}
	return rc.publicRegistries
}

// registryStores is the registry's open storage.
type registryStores struct {
	db       *kv.DB
	ix       *index.Index
	ingester *ingest.Ingester
	resolve  map[string]string // --resolve pins, for the other fetchers
}

func (s *registryStores) close() error {
	return errors.Join(s.ix.Close(), s.db.Close())
}

// rebuildMarker is set in kv while the index is being rebuilt: a process
// that dies mid-rebuild leaves a valid but partial index behind, and the next
// start must rebuild again rather than trust it.
const rebuildMarker = "registry.index_rebuild_pending"

// openRegistryStores opens kv and the index under the data dir, rebuilding
// the index from kv when it is missing, was built with an older mapping, or
// a previous rebuild did not finish. fresh discards the index first.
func (c *cli) openRegistryStores(ctx context.Context, logger *slog.Logger, fresh bool) (*registryStores, error) {
	resolve, err := parseResolve(c.global.resolve)
	if err != nil {
		return nil, err
	}
	db, err := kv.Open(c.global.dataDir, kv.Options{})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.global.dataDir, "index")
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("remove index: %w", err)
		}
	}
	ix, rebuild, err := index.OpenWith(dir, index.Options{Logger: logger.With("component", "index")})
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &registryStores{db: db, ix: ix, resolve: resolve, ingester: &ingest.Ingester{
		DB:      db,
		Index:   ix,
		Fetcher: web.NewFetcher(web.FetchOptions{AllowPrivate: c.global.allowPrivate, Resolve: resolve, UserAgent: "ardx/" + version}),
		Logger:  logger.With("component", "ingest"),
	}}
	if isTerminal(c.stderr) {
		// The bar shows the progress and the summary each source's outcome;
		// per-source log lines would break the bar up.
		s.ingester.Progress = c.stderr
		s.ingester.Logger = slog.New(belowErrorAsDebug{logger.Handler()}).With("component", "ingest")
	}
	pending, err := db.Counter(rebuildMarker)
	if err != nil {
		s.close()
		return nil, err
	}
	if rebuild || pending > 0 {
		if err := s.rebuildIndex(ctx, logger); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// compact merges the index into one segment before a batch command exits,
// so that the server it is written for starts searching a compact index
// (the server would compact it too, once quiet). A failure only costs
// speed: it is logged.
func (s *registryStores) compact(ctx context.Context, logger *slog.Logger) {
	if err := s.ix.Compact(ctx); err != nil {
		logger.Warn("index compaction failed; searches are slower until the server compacts it", "component", "registry", "err", err)
	}
}

// rebuildIndex re-puts every kv entry into the index, marking the rebuild
// in kv until it completes.
func (s *registryStores) rebuildIndex(ctx context.Context, logger *slog.Logger) error {
	if _, err := s.db.Incr(rebuildMarker, 1); err != nil {
		return err
	}
	start := time.Now()
	n, err := s.ingester.Reindex(ctx)
	if err != nil {
		return fmt.Errorf("rebuild index: %w", err)
	}
	pending, err := s.db.Counter(rebuildMarker)
	if err != nil {
		return err
	}
	if _, err := s.db.Incr(rebuildMarker, -pending); err != nil {
		return err
	}
	if n > 0 {
		logger.Info("index rebuilt from kv", "component", "registry", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// ingestDefaultCorpus loads the embedded sample manifests into an empty data
// dir, once: a user who removes them does not get them back.
func ingestDefaultCorpus(ctx context.Context, s *registryStores, logger *slog.Logger) error {
	const marker = "registry.default_corpus_ingested"
	if done, err := s.db.Counter(marker); err != nil || done > 0 {
		return err
	}
	if any, err := s.db.HasEntries(); err != nil || any {
		return err
	}
	corpus, err := fs.Sub(defaultCorpus, "testdata/corpus")
	if err != nil {
		return err
	}
	start := time.Now()
	rep, err := s.ingester.IngestFS(ctx, corpus, ".")
	if err != nil {
		return fmt.Errorf("ingest default corpus: %w", err)
	}
	if rep.Rejected() > 0 {
		return fmt.Errorf("default corpus has %d rejected entries", rep.Rejected())
	}
	if _, err := s.db.Incr(marker, 1); err != nil {
		return err
	}
	n, _ := s.db.CountEntries()
	logger.Info("default corpus ingested", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// inboxInterval is how often a running server looks into its inbox.
const inboxInterval = 2 * time.Second

// runningRegistry is a started registry listener.
type runningRegistry struct {
	stores      *registryStores
	svc         *registry.Service
	srv         *web.Server
	stopRecrawl func()
}

func (r *runningRegistry) close(ctx context.Context) error {
	r.stopRecrawl()
	return errors.Join(r.srv.Close(ctx), r.svc.Close(ctx), r.stores.close())
}

func (c *cli) startRegistry(ctx context.Context, rc *registryConfig, logger *slog.Logger) (*runningRegistry, error) {
	if err := rc.validate(); err != nil {
		return nil, err
	}
	regLog := logger.With("component", "registry")
	stores, err := c.openRegistryStores(ctx, logger, false)
	if err != nil {
		return nil, err
	}
	if !rc.noDefaultCorpus {
		if err := ingestDefaultCorpus(ctx, stores, regLog); err != nil {
			stores.close()
			return nil, err
		}
	}
	ln, err := web.Listen("registry", rc.addr)
	if err != nil {
		stores.close()
		return nil, err
	}
	publicURL := strings.TrimRight(rc.publicURL, "/")
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	probes := rc.probe
	// Probe traffic says what it is, so a publisher's analytics can leave
	// it out of their demand as this registry never counts it as its own.
	probes.Fetcher = web.NewFetcher(web.FetchOptions{AllowPrivate: c.global.allowPrivate, Resolve: stores.resolve,
		Timeout: probes.Timeout, UserAgent: "ardx-probe/" + version + " (+" + publicURL + "/reliability)"})
	limits, err := rc.registryLimits()
	if err != nil {
		ln.Close()
		stores.close()
		return nil, err
	}
	if limits == nil {
		regLog.Warn("registry rate limiting is off (--registry-rate-limit off): for tests and local load only")
	}
	proxies, err := rc.registryProxies()
	if err != nil {
		ln.Close()
		stores.close()
		return nil, err
	}
	reports, err := rc.reportSources(c.getenv)
	if err != nil {
		ln.Close()
		stores.close()
		return nil, err
	}
	svc, err := registry.New(registry.Config{
		RateLimits:         limits,
		TrustedProxies:     proxies,
		Claims:             access.ClaimConfig{Resolver: rc.claimResolver, TTL: rc.claimTTL},
		Reports:            reports,
		Probe:              probes,
		PublicURL:          publicURL,
		Fetcher:            stores.ingester.Fetcher,
		FederateDiscovered: rc.federateDiscovered,
		Upstreams:          rc.upstreams,
		PublicRegistries:   rc.publicRegistryList(),
		FederationTimeout:  rc.federationTimeout,
		DemandRetention:    rc.demandRetention,
		Bench:              registry.BenchConfig{Interval: rc.benchInterval},
		Logger:             logger,
		Payments:           rc.payments,
		// Webhooks refuse private addresses unless the operator allowed
		// them (local development), and never follow a redirect.
		WebhookFetcher: web.NewFetcher(web.FetchOptions{AllowPrivate: c.global.allowPrivate, MaxRedirects: -1,
			Timeout: 10 * time.Second, MaxBytes: 64 << 10, UserAgent: "ardx/" + version}),
	}, stores.db, stores.ix)
	if err != nil {
		ln.Close()
		stores.close()
		return nil, err
	}
	srv := &web.Server{Name: "registry", Listener: ln, Handler: c.withMetricsRoute(svc.Handler()), Logger: regLog}
	if err := srv.Open(); err != nil {
		svc.Close(ctx)
		stores.close()
		return nil, err
	}
	// Docs the server's own ingests and crawls write keep the payment
	// terms its probes saw.
	stores.ingester.Decorate = svc.DecorateDoc
	stopRecrawl := stores.ingester.StartRecrawl(ctx, rc.crawlInterval)
	stopInbox, err := stores.ingester.WatchInbox(ctx, ingest.InboxDir(c.global.dataDir), inboxInterval)
	if err != nil {
		stopRecrawl()
		_ = srv.Close(ctx)
		svc.Close(ctx)
		stores.close()
		return nil, fmt.Errorf("inbox: %w", err)
	}
	if rc.probe.Interval > 0 {
		svc.StartProbes(ctx)
	}
	svc.StartBench(ctx) // runs nothing with --bench-interval 0
	svc.StartAdoptionSnapshots(ctx)
	c.started.registryURL = srv.URL()
	detach := collector.attach(stores.ix, stores.db, nil)
	c.db = stores.db
	stop := func() { detach(); stopInbox(); stopRecrawl() }
	return &runningRegistry{stores: stores, svc: svc, srv: srv, stopRecrawl: stop}, nil
}

func (c *cli) registryCmd() *cobra.Command {
	var rc registryConfig
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Run the ARD registry (search, explore, agents) alone",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.runServices(cmd.Context(), func(ctx context.Context, logger *slog.Logger) (closer, error) {
				reg, err := c.startRegistry(ctx, &rc, logger)
				if err != nil {
					return nil, err
				}
				return reg.close, nil
			})
		},
	}
	rc.flags(cmd)
	c.serverFlags(cmd)
	return cmd
}

func (c *cli) ingestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ingest PATH|URL|DOMAIN...",
		Short: "Ingest ARD manifests from files, directories, URLs or domains",
		Long: `Ingest reads ARD manifests (v0.91 ard.json or v0.9 ai-catalog.json) from files,
directories (every *.json inside), http(s) URLs, and bare domains (which mean
https://DOMAIN/.well-known/ard.json, falling back to /.well-known/ai-catalog.json).
Re-ingesting a source replaces what came from it. Invalid entries are reported
and skipped; the command exits non-zero if any entry was rejected or any
source could not be read. While a server holds the data dir, rename
manifest files into <data>/inbox instead: the server ingests them.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := c.logger()
			if err != nil {
				return err
			}
			stores, err := c.openRegistryStores(cmd.Context(), logger, false)
			if errors.Is(err, kv.ErrLocked) {
				return fmt.Errorf("%w; to ingest into the running server, rename manifest files into %s (it ingests them within seconds and moves each to done/ or failed/ with a report), or stop it first",
					err, ingest.InboxDir(c.global.dataDir))
			}
			if err != nil {
				return err
			}
			defer stores.close()
			rep, err := stores.ingester.Ingest(cmd.Context(), args...)
			if rep != nil {
				rep.Print(c.stdout)
			}
			stores.compact(cmd.Context(), logger)
			if err != nil {
				return err
			}
			// Any source that could not be read (missing, not JSON, an HTTP
			// error, refused by the fetch guard) fails the command, as a
			// rejected entry does: a script must not mistake it for success.
			failed, rejected := len(rep.Errors()), rep.Rejected()
			switch {
			case failed > 0 && rejected > 0:
				return fmt.Errorf("%d source(s) failed and %d entries rejected", failed, rejected)
			case failed > 0:
				return fmt.Errorf("%d source(s) failed", failed)
			case rejected > 0:
				return fmt.Errorf("%d entries rejected", rejected)
			}
			return nil
		},
	}
}

func (c *cli) reindexCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the search index from the kv store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := c.logger()
			if err != nil {
				return err
			}
			// A fresh index: re-putting into the old one would keep docs whose
			// entries are gone from kv.
			start := time.Now()
			stores, err := c.openRegistryStores(cmd.Context(), logger, true)
			if errors.Is(err, kv.ErrLocked) {
				return fmt.Errorf("%w; stop it before reindexing", err)
			}
			if err != nil {
				return err
			}
			defer stores.close()
			stores.compact(cmd.Context(), logger)
			n, err := stores.db.CountEntries()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "reindexed %d entries in %s\n", n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

// closer stops a started service within its context's deadline.
type closer = func(context.Context) error

// runServices starts each service in order, serves until ctx ends (a
// signal), then closes them in reverse order with a bounded grace period. A
// service that fails to start closes those started before it; a start-up
// cut short by a signal is a clean stop.
func (c *cli) runServices(ctx context.Context, starts ...func(context.Context, *slog.Logger) (closer, error)) error {
	logger, err := c.logger()
	if err != nil {
		return err
	}
	var closers []closer
	for _, start := range starts {
		cl, err := start(ctx, logger)
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i](context.Background())
			}
			if ctx.Err() != nil {
				// A signal during start-up is a clean stop, however the
				// interrupted step reports it.
				logger.Info("start-up interrupted", "err", err)
				return nil
			}
			return err
		}
		closers = append(closers, cl)
	}
	msrv, err := c.startMetricsListener(logger)
	if err != nil {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i](context.Background())
		}
		return err
	}
	if msrv != nil {
		closers = append(closers, msrv.Close)
	}
	if c.db != nil {
		adm, err := c.startAdminSocket(c.db, logger)
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i](context.Background())
			}
			return err
		}
		if adm != nil {
			closers = append(closers, adm.Close)
		}
	}
	if isTerminal(c.stdout) {
		printBanner(c.stdout, c.global.dataDir, &c.started)
	}
	<-ctx.Done()
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, 0, len(closers))
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i](shutCtx))
	}
	if err := errors.Join(errs...); err != nil {
		logger.Error("shutdown", "err", err)
		return err
	}
	logger.Info("stopped")
	return nil
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
