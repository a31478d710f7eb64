package settle

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// flight is the one piece of work under way for a body key; identical
// requests wait on it instead of starting their own.
type flight struct {
	key  string
	req  *x402.PaymentRequest // nil only when a stored body no longer decodes
	done chan struct{}
	hash atomic.Pointer[string] // set once the transaction is known broadcast

	once  sync.Once
	resp  x402.SettleResponse // valid after done
	final bool                // resp is a recorded final outcome
	err   error               // internal failure; nothing recorded
}

// job is a flight's turn on its network's worker.
type job struct {
	f        *flight
	req      *x402.PaymentRequest
	body     []byte
	ready    chan struct{} // closed when verification and simulation are over
	readyAt  time.Time     // when ready was closed (zero for reconciliations)
	skip     bool          // verification or simulation failed and was recorded
	transfer *Transfer     // the simulated transfer, once ready
	resolve  *kv.Settlement
	requeued int
}

// readyNow reports, without waiting, whether j's verification and
// simulation are over.
func (j *job) readyNow() bool {
	select {
	case <-j.ready:
		return true
	default:
		return false
	}
}

func (f *flight) setHash(h string) { f.hash.Store(&h) }

func (f *flight) baseResponse() x402.SettleResponse {
	if f.req == nil {
		return x402.SettleResponse{}
	}
	return x402.SettleResponse{Network: f.req.Network(), Payer: f.req.Payer()}
}

// pendingResponse is the answer while the outcome is not final; it carries
// the transaction hash once broadcast so the merchant can watch it.
func (f *flight) pendingResponse() x402.SettleResponse {
	resp := f.baseResponse()
	resp.ErrorReason = x402.ReasonSettlementPending
	resp.ErrorMessage = "the settlement is not final yet; send the identical request again for the outcome"
	if h := f.hash.Load(); h != nil {
		resp.Transaction = *h
	}
	return resp
}

// newFlightLocked registers a flight for key; e.mu must be held.
func (e *Engine) newFlightLocked(key string, req *x402.PaymentRequest) *flight {
	f := &flight{key: key, req: req, done: make(chan struct{})}
	e.flights[key] = f
	e.flying.Add(1)
	return f
}

// finishFlight ends f exactly once: a final response (already recorded by
// the caller), a pending one (nothing recorded), or an internal error.
func (e *Engine) finishFlight(f *flight, resp x402.SettleResponse, final bool, err error) {
	f.once.Do(func() {
		f.resp, f.final, f.err = resp, final, err
		if !final && err == nil && resp.ErrorReason == "" {
			f.resp = f.pendingResponse()
		}
		e.mu.Lock()
		if e.flights[f.key] == f {
			delete(e.flights, f.key)
		}
		e.mu.Unlock()
		close(f.done)
		e.flying.Done()
	})
}

func (e *Engine) finishPending(f *flight) { e.finishFlight(f, f.pendingResponse(), false, nil) }
