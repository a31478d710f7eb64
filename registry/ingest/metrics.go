package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of ingestion and crawling, registered with the default
// registerer (see web's Metrics comment).
var (
	sourcesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_ingest_sources_total",
		Help: "Sources (files, URLs, domains' documents) ingested, by outcome (ok, failed).",
	}, []string{"outcome"})
	entriesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_ingest_entries_total",
		Help: "Entries written or refused by ingestion and crawls, by change (added, changed, removed, rejected).",
	}, []string{"change"})
	crawledDomainsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_crawl_domains_total",
		Help: "Domains crawled, by outcome (ok, failed).",
	}, []string{"outcome"})
)

// countEntries adds one source's or domain's entry changes.
func countEntries(added, changed, removed, rejected int) {
	entriesTotal.WithLabelValues("added").Add(float64(added))
	entriesTotal.WithLabelValues("changed").Add(float64(changed))
	entriesTotal.WithLabelValues("removed").Add(float64(removed))
	entriesTotal.WithLabelValues("rejected").Add(float64(rejected))
}

// outcomeLabel is "failed" when err is set, else "ok".
func outcomeLabel(failed bool) string {
	if failed {
		return "failed"
	}
	return "ok"
}
