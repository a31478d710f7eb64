package registry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the registry service, registered with the default registerer
// (see web's Metrics comment).
var (
	searchesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_registry_searches_total",
		Help: "POST /search answered, by federation mode and whether any result came back (results=none|some).",
	}, []string{"federation", "results"})
	demandDropsTotal = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ardx_registry_demand_log_dropped_total",
		Help: "Searches not recorded in the demand log: its queue was full or a commit failed.",
	})
)

// resultsLabel is the results label of searchesTotal.
func resultsLabel(n int) string {
	if n == 0 {
		return "none"
	}
	return "some"
}
