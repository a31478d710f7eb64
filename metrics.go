package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// stateCollector reports, at each scrape, state that lives in the stores
// rather than in counters: the index's size, the kv file's size, settlement
// outcomes (kv's counters, so they survive restarts), settlements in flight
// and the pending ones reconciliation must finish. It is registered once;
// the services started in this process attach their stores to it.
type stateCollector struct {
	mu     sync.Mutex
	ix     *index.Index
	db     *kv.DB
	engine *settle.Engine
}

var collector = &stateCollector{}

// init registers the collector once all the package's variables, its
// descriptors among them, are set.
func init() { prometheus.MustRegister(collector) }

var (
	descIndexDocs = prometheus.NewDesc("ardx_index_documents", "Documents in the search index.", nil, nil)
	descKVBytes   = prometheus.NewDesc("ardx_kv_file_bytes", "Size of the bbolt file ardx.db.", nil, nil)
	descSettled   = prometheus.NewDesc("ardx_settlements_total",
		"Settlements finished, by network and outcome (succeeded, or the failure's errorReason); counted in kv, so they survive restarts.",
		[]string{"network", "outcome"}, nil)
	descInFlight = prometheus.NewDesc("ardx_settle_in_flight", "Settlements being worked on now (the settle queues' depth).", nil, nil)
	descPending  = prometheus.NewDesc("ardx_settle_pending", "Settlement intents recorded and not finished: what reconciliation works through after a restart.", nil, nil)
	descOldest   = prometheus.NewDesc("ardx_settle_pending_oldest_age_seconds", "Age of the oldest unfinished settlement intent; 0 when none.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIndexDocs, descKVBytes, descSettled, descInFlight, descPending, descOldest} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ix, db, engine := c.ix, c.db, c.engine
	c.mu.Unlock()
	if ix != nil {
		if n, err := ix.Count(); err == nil {
			ch <- prometheus.MustNewConstMetric(descIndexDocs, prometheus.GaugeValue, float64(n))
		}
	}
	if db != nil {
		if fi, err := os.Stat(db.Path()); err == nil {
			ch <- prometheus.MustNewConstMetric(descKVBytes, prometheus.GaugeValue, float64(fi.Size()))
		}
	}
	if engine == nil {
		return
	}
	st := engine.Stats()
	for network, ns := range st.Networks {
		ch <- prometheus.MustNewConstMetric(descSettled, prometheus.CounterValue, float64(ns.Succeeded), network, settle.OutcomeSucceeded)
		for reason, n := range ns.FailedByReason {
			ch <- prometheus.MustNewConstMetric(descSettled, prometheus.CounterValue, float64(n), network, reason)
		}
	}
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(st.InFlight))
	if db == nil {
		return
	}
	if pending, err := db.PendingSettlements(); err == nil {
		oldest := 0.0
		for _, p := range pending {
			oldest = max(oldest, time.Since(p.CreatedAt).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(len(pending)))
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest)
	}
}

// attach sets the stores the collector reads; nil leaves a store as it is.
// It returns a function that detaches them again, for a service's close.
func (c *stateCollector) attach(ix *index.Index, db *kv.DB, engine *settle.Engine) (detach func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ix != nil {
		c.ix = ix
	}
	if db != nil {
		c.db = db
	}
	if engine != nil {
		c.engine = engine
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ix != nil && c.ix == ix {
			c.ix = nil
		}
		if db != nil && c.db == db {
			c.db = nil
		}
		if engine != nil && c.engine == engine {
			c.engine = nil
		}
	}
}

// withMetricsRoute serves GET /metrics beside a service's own routes, unless
// --metrics-addr moved it to a listener of its own (or turned it off).
func (c *cli) withMetricsRoute(h http.Handler) http.Handler {
	if c.global.metricsAddr != "" {
		return h
	}
	metrics := web.MetricsHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			metrics.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// startMetricsListener serves /metrics, and Go's profiler under
// /debug/pprof/, on --metrics-addr when it names an address; it returns nil
// when /metrics is on the services' listeners or off.
func (c *cli) startMetricsListener(logger *slog.Logger) (*web.Server, error) {
	if c.global.metricsAddr == "" || c.global.metricsAddr == "off" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", web.MetricsHandler())
	// Go's profiler only here, on the operator's own address, never on
	// the services' listeners: a CPU profile of a live server is how its
	// search and settle costs are found (internal/loadgen -cpuprofile).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	srv := &web.Server{Name: "metrics", Addr: c.global.metricsAddr, Handler: mux, Logger: logger}
	if err := srv.Open(); err != nil {
		return nil, err
	}
	c.started.metricsURL = srv.URL() + "/metrics"
	return srv, nil
}
