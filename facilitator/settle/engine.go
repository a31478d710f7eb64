package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// ErrIdempotencyKeyConflict is returned by Settle when the Idempotency-Key was
// first used with another body (HTTP 422).
var ErrIdempotencyKeyConflict = errors.New("settle: idempotency key already used with a different request body")

// ErrClosed is returned by Settle after Close has begun.
var ErrClosed = errors.New("settle: engine closed")

// OutcomeSucceeded is the outcome label of a successful settlement in Stats
// and in kv's counters; failures are labelled with their errorReason.
const OutcomeSucceeded = "succeeded"

// unknownNetwork labels counters of payments for networks we do not serve,
// so arbitrary client strings never become counter names.
const unknownNetwork = "unknown"

// Defaults for Options.
const (
	DefaultSettleTimeout     = 25 * time.Second
	DefaultReceiptTimeout    = 10 * time.Minute
	DefaultReceiptPoll       = 20 * time.Millisecond
	DefaultIdempotencyKeyTTL = 24 * time.Hour
	DefaultReconcileInterval = 10 * time.Second
	DefaultStuckAfter        = 30 * time.Second
	// chainCallTimeout bounds each Verify, Prepare, Broadcast or lookup so a
	// hung RPC cannot stall a network's worker forever.
	chainCallTimeout = 30 * time.Second
	// CloseGrace bounds how long Close lets settlements in flight finish
	// (receipts due within a block or two); the rest stay pending in kv.
	CloseGrace     = 3 * time.Second
	minReceiptPoll = time.Millisecond
	maxReceiptPoll = time.Second
	queueSize      = 4096
)

// Options tune NewEngine. Zero values take the defaults.
type Options struct {
	// SettleTimeout is how long Settle waits for a final outcome before it
	// answers settlement_pending and lets the work go on in the background.
	// Default 25 s.
	SettleTimeout time.Duration
	// Screener refuses listed addresses before any chain call; nil: no
	// screening. A nil *screen.List is fine (it is nil-safe).
	Screener interface{ Listed(addr string) bool }
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock for record times; nil means time.Now.
	Now func() time.Time
	// OnSettled is called once per final successful settlement (never on a
	// replay), after the outcome is recorded and before Settle returns it to
	// its callers. It runs on the engine's goroutine and delays the answer:
	// keep it short.
	OnSettled func(req *x402.PaymentRequest, resp x402.SettleResponse)
	// ReceiptTimeout bounds the background wait for a broadcast transaction's
	// receipt; after it the settlement stays pending until a later identical
	// request or the reconciliation loop takes it up again. Default 10 min.
	ReceiptTimeout time.Duration
	// ReceiptPoll is the time from broadcast to receipt assumed until one is
	// observed on the network; receipt polls are paced by it. Default 20 ms.
	ReceiptPoll time.Duration
	// IdempotencyKeyTTL is how long an Idempotency-Key stays bound to its
	// first body (the Stripe convention). Default 24 h.
	IdempotencyKeyTTL time.Duration
	// ReconcileInterval is how often StartReconciling looks again for
	// pending settlements nobody is working on (a receipt wait that ran out,
	// a network that was unreachable). Default 10 s.
	ReconcileInterval time.Duration
	// StuckAfter is how long a broadcast transaction may go without a
	// receipt before it counts as stuck: then it is sent again, the next
	// time replaced at a higher fee, and a nonce gap in front of it is
	// filled. Default 30 s.
	StuckAfter time.Duration
	// Failpoint, when set, is called at the points where a crash tests
	// exactly-once settlement: FailpointBeforeBroadcast (intent recorded,
	// nothing sent), FailpointAfterBroadcast (sent, outcome not recorded)
	// and FailpointReconcile (a reconciliation about to send again). Crash
	// tests kill the process there; never set otherwise.
	Failpoint func(point string)
}

// The failpoints of Options.Failpoint.
const (
	FailpointBeforeBroadcast = "before-broadcast"
	FailpointAfterBroadcast  = "after-broadcast"
	FailpointReconcile       = "reconcile"
)

func (e *Engine) failpoint(point string) {
	if e.opts.Failpoint != nil {
		e.opts.Failpoint(point)
	}
}

// Engine settles payments exactly once per canonical request body. It is safe
// for concurrent use.
type Engine struct {
	db   *kv.DB
	opts Options
	log  *slog.Logger

	networks []*network
	byName   map[string]*network // CAIP-2 id and v1 name

	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
	stop   chan struct{} // closed when no flight remains after Close: workers exit

	mu      sync.Mutex
	flights map[string]*flight // by body key
	closed  bool
	flying  sync.WaitGroup // flights
	workers sync.WaitGroup

	startup sync.Once // first reconciliation pass

	gone    goneChains   // records resolved because their chain is gone
	waiting atomic.Int64 // pending records whose network cannot settle now
}

// goneChains counts settlements resolved because the chain their
// transaction was signed for is gone (the node serves another genesis).
type goneChains struct {
	mu    sync.Mutex
	count int
	last  string
}

func (g *goneChains) add(msg string) {
	g.mu.Lock()
	g.count++
	g.last = msg
	g.mu.Unlock()
}

// network is one chain and the FIFO queue its single worker drains.
type network struct {
	chain Chain
	id    string
	queue chan *job
	// inclusion is a moving average of the time from broadcast to receipt
	// (nanoseconds; 0 until one is observed), which paces receipt polls.
	inclusion atomic.Int64
	// inflight is the run whose transactions are on their way to the node;
	// the worker alone reads and writes it.
	inflight *sendOp
	// receipts finds the receipts of the settlements broadcast and not yet
	// mined (receipts.go).
	receipts *receiptWatch
	// resyncs counts nonce re-reads (resync), so the worker can tell that a
	// signer's local nonce may have moved under a run signed before.
	resyncs atomic.Int64

	mu    sync.Mutex
	debts map[string]*debt // by lower-case payer: see debts.go
}

// inclusionTime returns the usual time from broadcast to receipt, or
// assumed while none has been observed.
func (n *network) inclusionTime(assumed time.Duration) time.Duration {
	if v := n.inclusion.Load(); v > 0 {
		return time.Duration(v)
	}
	return assumed
}

// observeInclusion adds one broadcast-to-receipt time to the average (an
// eighth of its weight to the newest). A single outlier (a transaction stuck
// for minutes) counts as at most four times the average, so it cannot
// delay the first receipt polls of the settlements after it for long.
func (n *network) observeInclusion(d time.Duration) {
	for {
		old := n.inclusion.Load()
		next := int64(d)
		if old > 0 {
			next = old - old/8 + min(int64(d), 4*old)/8
		}
		if n.inclusion.CompareAndSwap(old, next) {
			return
		}
	}
}

// NewEngine returns an engine settling on chains, recording in db. It starts
// one worker per network. Call StartReconciling when the service starts, so
// intents left pending by a previous process are resolved in the
// background; Settle also starts that pass on its first call.
func NewEngine(db *kv.DB, chains []Chain, opts Options) (*Engine, error) {
	if db == nil {
		return nil, errors.New("settle: nil kv.DB")
	}
	if opts.SettleTimeout <= 0 {
		opts.SettleTimeout = DefaultSettleTimeout
	}
	if opts.ReceiptTimeout <= 0 {
		opts.ReceiptTimeout = DefaultReceiptTimeout
	}
	if opts.ReceiptPoll <= 0 {
		opts.ReceiptPoll = DefaultReceiptPoll
	}
	if opts.IdempotencyKeyTTL <= 0 {
		opts.IdempotencyKeyTTL = DefaultIdempotencyKeyTTL
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = DefaultReconcileInterval
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		db:      db,
		opts:    opts,
		log:     log.With("component", "settle"),
		byName:  map[string]*network{},
		flights: map[string]*flight{},
		stop:    make(chan struct{}),
	}
	for _, c := range chains {
		if c == nil {
			return nil, errors.New("settle: nil chain")
		}
		n := &network{chain: c, id: c.ID(), queue: make(chan *job, queueSize), debts: map[string]*debt{}, receipts: newReceiptWatch()}
		if n.id == "" {
			return nil, errors.New("settle: chain with empty id")
		}
		for _, name := range []string{n.id, c.V1Name()} {
			if name == "" {
				continue
			}
			if _, dup := e.byName[name]; dup {
				return nil, fmt.Errorf("settle: network %q configured twice", name)
			}
			e.byName[name] = n
		}
		e.networks = append(e.networks, n)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	for _, n := range e.networks {
		e.workers.Add(1)
		go func() {
			defer e.workers.Done()
			e.work(n)
		}()
		e.workers.Add(1)
		go func() {
			defer e.workers.Done()
			e.watch(n)
		}()
	}
	return e, nil
}

// Chain returns the chain serving network, named by CAIP-2 id or v1 name.
func (e *Engine) Chain(network string) (Chain, bool) {
	n, ok := e.byName[network]
	if !ok {
		return nil, false
	}
	return n.chain, true
}

// route returns the network the payment's requirements name. The
// requirements decide, as in the official facilitator: a payload signed for
// another network is then that chain's network mismatch to report.
func (e *Engine) route(req *x402.PaymentRequest) (*network, bool) {
	n, ok := e.byName[req.Requirements.Network]
	return n, ok
}

// Verify checks a payment without moving anything: screening first (no chain
// call for a listed address), then routing and availability, then the
// chain's full verification.
func (e *Engine) Verify(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	if addr, listed := e.screened(req); listed {
		e.log.Warn("verify refused: sanctioned address", "address", addr)
		return x402.VerifyResponse{InvalidReason: x402.ReasonSanctioned, InvalidMessage: "address " + addr + " is on the sanctions list", Payer: req.Payer()}
	}
	n, ok := e.route(req)
	if !ok {
		return x402.VerifyResponse{InvalidReason: x402.ReasonUnsupportedNetwork, InvalidMessage: fmt.Sprintf("network %q is not served by this facilitator", req.Requirements.Network), Payer: req.Payer()}
	}
	if ok, why := n.chain.Available(); !ok {
		return x402.VerifyResponse{InvalidReason: x402.ReasonServiceUnavailable, InvalidMessage: unavailableMessage(n.id, why), Payer: req.Payer()}
	}
	return n.chain.Verify(ctx, req)
}

// Settle settles the payment in body exactly once. idempotencyKey is the
// optional Idempotency-Key header ("" if absent). replayed reports that a
// recorded final outcome was returned (also to a request that waited for an
// identical one in flight). ErrIdempotencyKeyConflict (→ 422) when the key
// was first used with another body. Other errors are internal (→ 500) and
// record nothing.
//
// A body that is not JSON or not an x402 request answers invalid_payload and
// is not recorded (the answer is a function of the bytes alone).
func (e *Engine) Settle(ctx context.Context, body []byte, idempotencyKey string) (resp x402.SettleResponse, replayed bool, err error) {
	key, err := BodyKey(body)
	if err != nil {
		return invalidPayload("", "body is not JSON: "+err.Error()), false, nil
	}
	// Replays are the hot path: answer them from one read, before decoding.
	if rec, err := e.db.Settlement(key); err == nil && rec.State.Final() {
		if err := e.bindKey(idempotencyKey, key); err != nil {
			return x402.SettleResponse{}, false, err
		}
		resp, err := recordedResponse(rec)
		return resp, err == nil, err
	} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return x402.SettleResponse{}, false, fmt.Errorf("settle: read record: %w", err)
	}
	req, err := x402.DecodeRequest(body)
	if err != nil {
		return invalidPayload("", err.Error()), false, nil
	}
	if err := e.bindKey(idempotencyKey, key); err != nil {
		return x402.SettleResponse{}, false, err
	}
	e.startup.Do(func() { e.reconcilePass() })

	f, created, start, resp, replayed, err := e.join(key, req, body)
	if start != nil {
		start()
	}
	if f == nil {
		return resp, replayed, err
	}
	timer := time.NewTimer(e.opts.SettleTimeout)
	defer timer.Stop()
	select {
	case <-f.done:
		if f.err != nil {
			return x402.SettleResponse{}, false, f.err
		}
		return f.resp, f.final && !created, nil
	case <-timer.C:
		return f.pendingResponse(), false, nil
	case <-ctx.Done():
		return f.pendingResponse(), false, ctx.Err()
	}
}

// BodyKey returns the settlement key of a request body: the hex SHA-256 of
// its RFC 8785 canonical JSON, so bodies differing only in whitespace or
// member order are the same settlement.
func BodyKey(body []byte) (string, error) {
	canon, err := jcs.Transform(body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

func (e *Engine) bindKey(idempotencyKey, bodyKey string) error {
	if idempotencyKey == "" {
		return nil
	}
	bound, err := e.db.BindIdempotencyKey(idempotencyKey, bodyKey, e.opts.Now(), e.opts.IdempotencyKeyTTL)
	if err != nil {
		return fmt.Errorf("settle: bind idempotency key: %w", err)
	}
	if bound != bodyKey {
		return ErrIdempotencyKeyConflict
	}
	return nil
}

// join attaches the request to the flight for key, starting one when none is
// in the air (start, when non-nil, must be called without e.mu held). When
// the record turns out final it returns no flight and the recorded response.
func (e *Engine) join(key string, req *x402.PaymentRequest, body []byte) (f *flight, created bool, start func(), resp x402.SettleResponse, replayed bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, false, nil, x402.SettleResponse{}, false, ErrClosed
	}
	if f := e.flights[key]; f != nil {
		return f, false, nil, x402.SettleResponse{}, false, nil
	}
	// A flight writes its final record before it leaves the map, so a record
	// read under the lock after missing the flight is current.
	rec, err := e.db.Settlement(key)
	switch {
	case err == nil && rec.State.Final():
		resp, err := recordedResponse(rec)
		return nil, false, nil, resp, err == nil, err
	case err == nil:
		f, start := e.newResolveLocked(rec)
		return f, false, start, x402.SettleResponse{}, false, nil
	case !errors.Is(err, kv.ErrNotFound):
		return nil, false, nil, x402.SettleResponse{}, false, fmt.Errorf("settle: read record: %w", err)
	}
	f = e.newFlightLocked(key, req)
	return f, true, func() { go e.settleNew(f, req, body) }, x402.SettleResponse{}, false, nil
}

// settleNew runs the steps of a new body that need no network worker, then
// hands the payment to its network's queue.
func (e *Engine) settleNew(f *flight, req *x402.PaymentRequest, body []byte) {
	if addr, listed := e.screened(req); listed {
		e.log.Warn("settle refused: sanctioned address", "address", addr, "body", f.key)
		n, _ := e.route(req)
		e.fail(f, unknownOr(n), x402.ReasonSanctioned, "address "+addr+" is on the sanctions list", nil, false)
		return
	}
	n, ok := e.route(req)
	if !ok {
		e.fail(f, unknownNetwork, x402.ReasonUnsupportedNetwork, fmt.Sprintf("network %q is not served by this facilitator", req.Requirements.Network), nil, false)
		return
	}
	if ok, why := n.chain.Available(); !ok {
		e.log.Error("settle refused: network unavailable", "network", n.id, "reason", why, "body", f.key)
		e.fail(f, n.id, x402.ReasonServiceUnavailable, unavailableMessage(n.id, why), nil, false)
		return
	}
	j := &job{f: f, req: req, body: body, ready: make(chan struct{})}
	// Enqueue before verifying: the queue keeps arrival order while the
	// verifications and simulations of queued payments overlap.
	if !e.enqueue(n, j) {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, chainCallTimeout)
	defer cancel()
	start := time.Now()
	if v := n.chain.Check(ctx, req); !v.IsValid {
		j.skip = true
		close(j.ready)
		e.fail(f, n.id, v.InvalidReason, v.InvalidMessage, nil, false)
		return
	}
	j.transfer = e.simulate(ctx, n, j)
	j.skip = j.transfer == nil
	observeStage(n.id, "prepare", start)
	j.readyAt = time.Now()
	close(j.ready)
}

// simulate runs Chain.Simulate for j; on a failure it records the outcome
// (or leaves the flight pending when the engine is closing) and returns nil.
func (e *Engine) simulate(ctx context.Context, n *network, j *job) *Transfer {
	t, fail, err := n.chain.Simulate(ctx, j.req)
	switch {
	case err != nil && e.ctx.Err() != nil:
		e.finishPending(j.f)
	case err != nil:
		e.log.Error("simulate settlement", "network", n.id, "body", j.f.key, "err", err)
		e.fail(j.f, n.id, x402.ReasonServiceUnavailable, "could not prepare the transfer: "+shortErr(err), nil, false)
	case fail != nil:
		e.failWith(j.f, n.id, *fail)
	case t == nil:
		e.log.Error("simulate returned neither a transfer nor a failure", "network", n.id, "body", j.f.key)
		e.fail(j.f, n.id, x402.ReasonTransactionFailed, "the facilitator could not build the transaction", nil, false)
	default:
		return t
	}
	return nil
}

// enqueue hands j to n's worker; false when the engine is shutting down (the
// flight is then finished as not final).
func (e *Engine) enqueue(n *network, j *job) bool {
	select {
	case n.queue <- j:
		return true
	case <-e.ctx.Done():
		e.finishFlight(j.f, j.f.pendingResponse(), false, nil)
		return false
	}
}

// screened reports the first listed address among payer, payTo and the
// authorization's recipient. It makes no chain call.
func (e *Engine) screened(req *x402.PaymentRequest) (string, bool) {
	if e.opts.Screener == nil {
		return "", false
	}
	for _, a := range []string{req.Payer(), req.PayTo(), req.Recipient()} {
		if a != "" && e.opts.Screener.Listed(a) {
			return a, true
		}
	}
	return "", false
}

// fail records a failed final outcome for f's body and finishes the flight.
// rec carries the intent when one was recorded; release frees the
// authorization it claimed (nothing moved).
func (e *Engine) fail(f *flight, networkLabel, reason, message string, rec *kv.Settlement, release bool) {
	if reason == "" {
		reason = x402.ReasonTransactionFailed
	}
	resp := f.baseResponse()
	resp.ErrorReason, resp.ErrorMessage = reason, message
	if reason == x402.ReasonEVMTransactionFailed && rec != nil && rec.Intent != nil {
		resp.Transaction = rec.Intent.TxHash
	}
	e.finish(f, networkLabel, kv.SettlementFailed, reason, resp, rec, release)
}

// finish records a final outcome and finishes the flight with it.
func (e *Engine) finish(f *flight, networkLabel string, state kv.SettlementState, outcome string, resp x402.SettleResponse, rec *kv.Settlement, release bool) {
	raw, err := json.Marshal(resp)
	if err != nil {
		e.finishFlight(f, x402.SettleResponse{}, false, err)
		return
	}
	s := kv.Settlement{BodyKey: f.key, Network: networkLabel, State: state, Outcome: outcome, Response: raw, FinishedAt: e.opts.Now().UTC()}
	if rec != nil {
		s.Intent, s.Body, s.CreatedAt = rec.Intent, rec.Body, rec.CreatedAt
	}
	start := time.Now()
	stored, err := e.db.FinishSettlement(s, release)
	if networkLabel != unknownNetwork {
		observeStage(networkLabel, "finish", start)
	}
	switch {
	case errors.Is(err, kv.ErrSettlementFinal):
		// Someone recorded first; theirs is the answer.
		resp, err = recordedResponse(stored)
		e.finishFlight(f, resp, err == nil, err)
		return
	case err != nil:
		e.log.Error("record settlement outcome", "body", f.key, "err", err)
		e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: record outcome: %w", err))
		return
	}
	if state == kv.SettlementSucceeded && e.opts.OnSettled != nil && f.req != nil {
		e.opts.OnSettled(f.req, resp)
	}
	e.finishFlight(f, resp, true, nil)
}

// Close stops accepting settlements and waits, bounded by ctx and at most
// CloseGrace, for the work in flight; then it cancels what remains (those
// settlements stay pending in kv for the next start) and stops the workers,
// so a process told to stop ends within seconds whatever its backlog.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	already := e.closed
	e.closed = true
	e.mu.Unlock()
	if already {
		return nil
	}
	done := make(chan struct{})
	go func() { e.flying.Wait(); close(done) }()
	grace := time.NewTimer(CloseGrace)
	defer grace.Stop()
	var err error
	select {
	case <-done:
	case <-grace.C:
		e.log.Info("closing with settlements still pending; they resume at the next start")
	case <-ctx.Done():
		err = fmt.Errorf("settle: close: work still in flight: %w", ctx.Err())
	}
	e.cancel()
	stopped := make(chan struct{})
	go func() {
		e.flying.Wait()
		close(e.stop)
		e.workers.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		err = errors.Join(err, errors.New("settle: close: workers did not stop within 5s"))
	}
	return err
}

func recordedResponse(rec kv.Settlement) (x402.SettleResponse, error) {
	var resp x402.SettleResponse
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		return resp, fmt.Errorf("settle: decode recorded response %s: %w", rec.BodyKey, err)
	}
	return resp, nil
}

func invalidPayload(network, message string) x402.SettleResponse {
	return x402.SettleResponse{ErrorReason: x402.ReasonInvalidPayload, ErrorMessage: message, Network: network}
}

func unavailableMessage(network, why string) string {
	if why == "" {
		return "network " + network + " cannot settle right now"
	}
	return "network " + network + " cannot settle right now: " + why
}

func unknownOr(n *network) string {
	if n == nil {
		return unknownNetwork
	}
	return n.id
}

// shortErr keeps chain error text in responses to one bounded line.
func shortErr(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
