package settle

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Settlement pipeline metrics, registered with the default registerer (see
// web's Metrics comment): where a settlement's time goes, stage by stage,
// so a throughput change can be explained rather than guessed at.
var (
	stageDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ardx_settle_stage_duration_seconds",
		Help: "Time spent in each stage of a new settlement, by network and stage: prepare (re-verification and simulation, concurrent), " +
			"queue (ready until its run starts on the network's worker), record (the run's fsynced intent commit), " +
			"broadcast (one transaction sent), receipt (broadcast until the receipt is seen), finish (the outcome's fsynced commit).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"network", "stage"})
	runSize = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ardx_settle_run_size",
		Help:    "Payments signed, recorded in one commit and broadcast as one run by a network's worker.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	}, []string{"network"})
)

// observeStage records the time since start in stage for network.
func observeStage(network, stage string, start time.Time) {
	stageDuration.WithLabelValues(network, stage).Observe(time.Since(start).Seconds())
}
