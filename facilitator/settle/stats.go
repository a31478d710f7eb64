package settle

import (
	"maps"
	"slices"
)

// Stats are settlement counts by network and outcome, from kv's counters
// (so they survive restarts), for /status and /discovery/stats.
type Stats struct {
	// Networks maps a CAIP-2 id (or "unknown" for payments naming a network
	// this facilitator does not serve) to its counts. Every configured
	// network is present, with zeros if nothing settled yet.
	Networks map[string]NetworkStats `json:"networks"`
	// Succeeded and Failed total over all networks.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// InFlight is the number of settlements being worked on now.
	InFlight int `json:"inFlight"`
	// Reconciliation is the state of the settlements a previous process
	// left pending.
	Reconciliation Reconciliation `json:"reconciliation"`
}

// Reconciliation reports the resolution of pending settlements.
type Reconciliation struct {
	// WaitingForNetwork counts pending settlements whose network cannot
	// settle now (unreachable, or no longer configured).
	WaitingForNetwork int64 `json:"waitingForNetwork"`
	// ChainGone counts settlements resolved since start because the chain
	// their transaction was signed for is gone; LastChainGone says which.
	ChainGone     int    `json:"chainGone"`
	LastChainGone string `json:"lastChainGone,omitempty"`
}

// NetworkStats are one network's settlement counts.
type NetworkStats struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// FailedByReason splits Failed by errorReason.
	FailedByReason map[string]int64 `json:"failedByReason,omitempty"`
}

// Stats returns the settlement counts. A read error is logged and yields
// the configured networks with zero counts.
func (e *Engine) Stats() Stats {
	st := Stats{Networks: map[string]NetworkStats{}}
	for _, n := range e.networks {
		st.Networks[n.id] = NetworkStats{}
	}
	e.mu.Lock()
	st.InFlight = len(e.flights)
	e.mu.Unlock()
	st.Reconciliation.WaitingForNetwork = e.waiting.Load()
	e.gone.mu.Lock()
	st.Reconciliation.ChainGone, st.Reconciliation.LastChainGone = e.gone.count, e.gone.last
	e.gone.mu.Unlock()
	counts, err := e.db.SettlementCounts()
	if err != nil {
		e.log.Error("read settlement counts", "err", err)
		return st
	}
	for _, c := range counts {
		ns := st.Networks[c.Network]
		if c.Outcome == OutcomeSucceeded {
			ns.Succeeded += c.Count
			st.Succeeded += c.Count
		} else {
			ns.Failed += c.Count
			st.Failed += c.Count
			if ns.FailedByReason == nil {
				ns.FailedByReason = map[string]int64{}
			}
			ns.FailedByReason[c.Outcome] += c.Count
		}
		st.Networks[c.Network] = ns
	}
	return st
}

// NetworkIDs returns the CAIP-2 ids of the configured networks, sorted.
func (st Stats) NetworkIDs() []string {
	return slices.Sorted(maps.Keys(st.Networks))
}
