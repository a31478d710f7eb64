package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics. Every metric of the process is registered with Prometheus's
// default registerer, which already holds the Go runtime and process
// collectors, and /metrics serves the default gatherer. So a package adds a
// metric next to the code it counts, with promauto, and nothing else:
//
//	var probeResults = promauto.NewCounterVec(prometheus.CounterOpts{
//		Name: "ardx_probe_results_total", Help: "..."}, []string{"kind", "outcome"})
//
// Names start with ardx_; label values must come from a small fixed set
// (routes, networks, outcomes), never from request input.
var (
	httpRequests = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ardx_http_request_duration_seconds",
		Help:    "HTTP requests by service, method, route and status code, and how long they took (its _count is the request count).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"service", "method", "route", "code"})
	rateLimitRefusals = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_rate_limit_refusals_total",
		Help: "Requests refused with 429 by a rate-limit bucket.",
	}, []string{"bucket"})
)

// MetricsHandler serves every registered metric in the Prometheus text
// format (GET /metrics).
func MetricsHandler() http.Handler {
	return promhttp.HandlerFor(prometheus.DefaultGatherer, promhttp.HandlerOpts{})
}

// WithMetrics observes each request of service in
// ardx_http_request_duration_seconds. The route label is the router's path
// for a request it routes, "other" for any other path (so scans of random
// paths do not create series).
func WithMetrics(service string, router *httprouter.Router) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec, ok := w.(*statusRecorder)
			if !ok {
				rec = &statusRecorder{ResponseWriter: w}
			}
			next.ServeHTTP(rec, r)
			route := "other"
			if h, _, _ := router.Lookup(r.Method, r.URL.Path); h != nil {
				route = r.URL.Path
			}
			method := r.Method
			switch method {
			case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch:
			default:
				method = "other"
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			httpRequests.WithLabelValues(service, method, route, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		})
	}
}
