package probe

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// probeResults counts probe outcomes (see web's Metrics comment). It is
// labelled by the aspect probed (Target.Path), not the target: targets may
// be as many as the endpoints probed.
var probeResults = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "ardx_probe_results_total",
	Help: "Completed probes by the aspect probed (path, e.g. rpc, settle) and outcome class (ok, auth_required, http_error, protocol_error, timeout, connect_error, blocked).",
}, []string{"path", "outcome"})
