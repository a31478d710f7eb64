package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// maxRequeue bounds how often a payment waits for another body's settlement
// of the same authorization and comes back to the queue.
const maxRequeue = 3

// work is a network's single worker: it takes payments in arrival order and
// does the nonce-sensitive steps (prepare, record, broadcast, resync) one at
// a time. Receipt waits run on their own goroutines.
func (e *Engine) work(n *network) {
	for {
		select {
		case j := <-n.queue:
			<-j.verified
			switch {
			case j.skip:
			case e.ctx.Err() != nil:
				e.finishPending(j.f)
			case j.resolve != nil:
				e.resolve(n, j)
			default:
				e.process(n, j)
			}
		case <-e.stopped():
			return
		}
	}
}

// stopped is closed once Close has cancelled the background work and every
// flight has ended, so no job can arrive any more.
func (e *Engine) stopped() <-chan struct{} { return e.stop }

func (e *Engine) chainCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, chainCallTimeout)
}

// process settles a verified payment: claim check, Prepare (the last
// simulation), durable intent, broadcast.
func (e *Engine) process(n *network, j *job) {
	f := j.f
	authID := n.chain.AuthorizationID(j.req)
	owner, err := e.db.AuthorizationOwner(authID)
	switch {
	case err == nil && owner != f.key:
		go e.awaitOwner(n, j, authID, owner)
		return
	case err != nil && !errors.Is(err, kv.ErrNotFound):
		e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: read authorization owner: %w", err))
		return
	}

	ctx, cancel := e.chainCtx()
	tx, fail, err := n.chain.Prepare(ctx, j.req)
	cancel()
	switch {
	case err != nil && e.ctx.Err() != nil:
		e.finishPending(f)
		return
	case err != nil:
		e.log.Error("prepare settlement", "network", n.id, "body", f.key, "err", err)
		e.fail(f, n.id, x402.ReasonServiceUnavailable, "could not prepare the transfer: "+shortErr(err), nil, false)
		return
	case fail != nil:
		e.failWith(f, n.id, *fail)
		return
	case tx == nil:
		e.log.Error("prepare returned neither a transaction nor a failure", "network", n.id, "body", f.key)
		e.fail(f, n.id, x402.ReasonTransactionFailed, "the facilitator could not build the transaction", nil, false)
		return
	}

	now := e.opts.Now().UTC()
	rec := kv.Settlement{
		BodyKey:   f.key,
		Network:   n.id,
		Body:      j.body,
		CreatedAt: now,
		Intent: &kv.SettlementIntent{
			AuthorizationID: authID,
			Signer:          tx.Signer,
			Nonce:           tx.Nonce,
			TxHash:          tx.Hash,
			RawTx:           tx.Raw,
			RecordedAt:      now,
		},
	}
	if err := e.db.RecordSettlementIntent(rec); err != nil {
		// The signer nonce Prepare took will never be broadcast; hand it back.
		e.resync(n, tx.Signer)
		var claimed *kv.AuthorizationClaimedError
		switch {
		case errors.As(err, &claimed):
			go e.awaitOwner(n, j, authID, claimed.Owner)
		case errors.Is(err, kv.ErrSettlementFinal):
			e.finishFromRecord(f)
		default:
			e.log.Error("record settlement intent", "body", f.key, "err", err)
			e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: record intent: %w", err))
		}
		return
	}
	e.broadcast(n, f, &rec, tx, false)
}

// resolve reconciles a settlement recorded pending (by a previous process,
// or one whose receipt wait ran out): the receipt decides if there is one,
// else the recorded transaction is broadcast again, unchanged.
func (e *Engine) resolve(n *network, j *job) {
	f, rec := j.f, j.resolve
	ctx, cancel := e.chainCtx()
	found, success, err := n.chain.Receipt(ctx, rec.Intent.TxHash)
	cancel()
	if err != nil {
		e.log.Warn("reconcile: read receipt", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash, "err", err)
		e.finishPending(f)
		return
	}
	if found {
		f.setHash(rec.Intent.TxHash)
		e.settleByReceipt(n, f, rec, success)
		return
	}
	tx := &Tx{Signer: rec.Intent.Signer, Nonce: rec.Intent.Nonce, Hash: rec.Intent.TxHash, Raw: rec.Intent.RawTx}
	e.log.Info("reconcile: re-broadcasting recorded transaction", "network", n.id, "body", f.key, "tx", tx.Hash, "signer", tx.Signer, "nonce", tx.Nonce)
	e.broadcast(n, f, rec, tx, true)
}

// broadcast sends tx whose intent is recorded. On failure it repairs the
// signer's nonce, tries the same bytes once more (a timed-out first send may
// have reached the node, which then answers "known"), and otherwise asks the
// chain what became of the authorization.
func (e *Engine) broadcast(n *network, f *flight, rec *kv.Settlement, tx *Tx, resyncAfter bool) {
	ctx, cancel := e.chainCtx()
	defer cancel()
	err := n.chain.Broadcast(ctx, tx)
	if err != nil && e.ctx.Err() == nil {
		e.log.Warn("broadcast failed; resyncing nonce and retrying once", "network", n.id, "body", f.key, "tx", tx.Hash, "signer", tx.Signer, "nonce", tx.Nonce, "err", err)
		e.resync(n, tx.Signer)
		if err2 := n.chain.Broadcast(ctx, tx); err2 == nil {
			err = nil
		}
	}
	switch {
	case err == nil:
		if resyncAfter {
			e.resync(n, tx.Signer)
		}
		f.setHash(tx.Hash)
		go e.awaitReceipt(n, f, rec)
	case e.ctx.Err() != nil:
		e.finishPending(f)
	default:
		e.resolveUnbroadcast(ctx, n, f, rec, err)
	}
}

// resolveUnbroadcast decides a settlement whose transaction the node refused.
// The authorization's on-chain state is read before the receipt, so a
// transfer mined in between is seen by the receipt rather than mistaken for
// someone else's use of the authorization.
func (e *Engine) resolveUnbroadcast(ctx context.Context, n *network, f *flight, rec *kv.Settlement, cause error) {
	if f.req == nil {
		e.finishPending(f)
		return
	}
	used, err := n.chain.AuthorizationUsed(ctx, f.req)
	if err != nil {
		e.log.Error("broadcast refused and authorization state unreadable; leaving pending", "network", n.id, "body", f.key, "err", err, "cause", cause)
		e.finishPending(f)
		return
	}
	found, success, err := n.chain.Receipt(ctx, rec.Intent.TxHash)
	if err != nil {
		e.log.Error("broadcast refused and receipt unreadable; leaving pending", "network", n.id, "body", f.key, "err", err, "cause", cause)
		e.finishPending(f)
		return
	}
	switch {
	case found:
		f.setHash(rec.Intent.TxHash)
		e.settleByReceipt(n, f, rec, success)
	case used:
		e.log.Warn("authorization used by a transaction that is not ours", "network", n.id, "body", f.key, "cause", cause)
		e.fail(f, n.id, x402.ReasonNonceAlreadyUsed, "the authorization was already used on-chain by another transaction; this facilitator charged nothing", rec, false)
	default:
		e.log.Error("broadcast refused; settlement failed, nothing charged", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash, "err", cause)
		e.fail(f, n.id, x402.ReasonTransactionFailed, "the network refused the transfer transaction ("+shortErr(cause)+"); nothing was charged", rec, true)
	}
}

// awaitReceipt polls for rec's receipt with growing intervals and records
// the outcome; after ReceiptTimeout the settlement stays pending.
func (e *Engine) awaitReceipt(n *network, f *flight, rec *kv.Settlement) {
	deadline := time.Now().Add(e.opts.ReceiptTimeout)
	interval := e.opts.ReceiptPoll
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-e.ctx.Done():
			e.finishPending(f)
			return
		}
		ctx, cancel := e.chainCtx()
		found, success, err := n.chain.Receipt(ctx, rec.Intent.TxHash)
		cancel()
		switch {
		case err == nil && found:
			e.settleByReceipt(n, f, rec, success)
			return
		case err != nil && e.ctx.Err() == nil:
			e.log.Debug("poll receipt", "network", n.id, "tx", rec.Intent.TxHash, "err", err)
		}
		if time.Now().After(deadline) {
			e.log.Warn("no receipt within the receipt timeout; settlement stays pending", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash)
			e.finishPending(f)
			return
		}
		interval = min(interval*2, maxReceiptPoll)
		timer.Reset(interval)
	}
}

// settleByReceipt records the outcome a mined transaction decided.
func (e *Engine) settleByReceipt(n *network, f *flight, rec *kv.Settlement, success bool) {
	if !success {
		e.log.Error("settlement transaction reverted; gas spent, payer not charged", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash)
		e.fail(f, n.id, x402.ReasonEVMTransactionFailed, "the transfer transaction was mined and reverted; the payer was not charged", rec, true)
		return
	}
	resp := f.baseResponse()
	resp.Success = true
	resp.Transaction = rec.Intent.TxHash
	if f.req != nil {
		resp.Amount = f.req.Amount()
	}
	e.finish(f, n.id, kv.SettlementSucceeded, OutcomeSucceeded, resp, rec, false)
}

// failWith records a failure response produced by the chain (Prepare's).
func (e *Engine) failWith(f *flight, networkLabel string, resp x402.SettleResponse) {
	if resp.ErrorReason == "" {
		resp.ErrorReason = x402.ReasonTransactionFailed
	}
	base := f.baseResponse()
	if resp.Network == "" {
		resp.Network = base.Network
	}
	if resp.Payer == "" {
		resp.Payer = base.Payer
	}
	resp.Success, resp.Transaction, resp.Amount = false, "", ""
	e.finish(f, networkLabel, kv.SettlementFailed, resp.ErrorReason, resp, nil, false)
}

// awaitOwner handles a payment whose authorization another body claimed:
// it never broadcasts for it. If the owner succeeded, the authorization is
// spent and this body fails as the official facilitator answers a used
// nonce; if the owner failed and released the claim, this body goes back to
// the queue; while the owner is pending, it waits for the owner's flight.
func (e *Engine) awaitOwner(n *network, j *job, authID, owner string) {
	f := j.f
	for range 2 {
		rec, err := e.db.Settlement(owner)
		if errors.Is(err, kv.ErrNotFound) {
			e.requeue(n, j)
			return
		}
		if err != nil {
			e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: read owning settlement: %w", err))
			return
		}
		if rec.State.Final() {
			cur, err := e.db.AuthorizationOwner(authID)
			if rec.State == kv.SettlementFailed && errors.Is(err, kv.ErrNotFound) {
				e.requeue(n, j)
				return
			}
			msg := "this authorization was already settled for another request body"
			if rec.State == kv.SettlementSucceeded && rec.Intent != nil {
				msg += " (transaction " + rec.Intent.TxHash + ")"
			} else if cur != owner {
				msg = "this authorization is claimed by another request body"
			}
			e.fail(f, n.id, x402.ReasonNonceAlreadyUsed, msg+"; nothing was charged for this request", nil, false)
			return
		}
		of := e.ensureFlight(rec)
		if of == nil {
			continue // finished in the meantime, or closing: read again
		}
		select {
		case <-of.done:
		case <-e.ctx.Done():
			e.finishPending(f)
			return
		}
	}
	// The owner is still pending after its own attempt to finish: so is this.
	e.finishPending(f)
}

func (e *Engine) requeue(n *network, j *job) {
	j.requeued++
	if j.requeued > maxRequeue {
		e.finishPending(j.f)
		return
	}
	e.enqueue(n, j)
}

// ensureFlight returns the flight resolving rec's body, starting a
// reconciliation if none is in the air; nil if the record became final or
// the engine is closing.
func (e *Engine) ensureFlight(rec kv.Settlement) *flight {
	e.mu.Lock()
	if f := e.flights[rec.BodyKey]; f != nil {
		e.mu.Unlock()
		return f
	}
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	cur, err := e.db.Settlement(rec.BodyKey)
	if err != nil || cur.State.Final() {
		e.mu.Unlock()
		return nil
	}
	f, start := e.newResolveLocked(cur)
	e.mu.Unlock()
	start()
	return f
}

// newResolveLocked registers a reconciliation flight for a pending record
// and returns the function that queues it (to call without e.mu held).
func (e *Engine) newResolveLocked(rec kv.Settlement) (*flight, func()) {
	req, decodeErr := x402.DecodeRequest(rec.Body)
	f := e.newFlightLocked(rec.BodyKey, req)
	n := e.byName[rec.Network]
	return f, func() {
		switch {
		case decodeErr != nil || rec.Intent == nil:
			e.log.Error("reconcile: pending record unusable", "body", rec.BodyKey, "err", decodeErr)
			e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: pending record %s unusable: %v", rec.BodyKey, decodeErr))
		case n == nil:
			e.log.Error("reconcile: pending settlement on a network no longer configured", "body", rec.BodyKey, "network", rec.Network)
			e.finishPending(f)
		default:
			verified := make(chan struct{})
			close(verified)
			e.enqueue(n, &job{f: f, req: req, body: rec.Body, verified: verified, resolve: &rec})
		}
	}
}

// finishFromRecord ends f with its body's recorded final outcome.
func (e *Engine) finishFromRecord(f *flight) {
	rec, err := e.db.Settlement(f.key)
	if err != nil {
		e.finishFlight(f, x402.SettleResponse{}, false, err)
		return
	}
	resp, err := recordedResponse(rec)
	e.finishFlight(f, resp, err == nil && rec.State.Final(), err)
}

func (e *Engine) resync(n *network, signer string) {
	ctx, cancel := e.chainCtx()
	defer cancel()
	if err := n.chain.ResyncNonce(ctx, signer); err != nil && e.ctx.Err() == nil {
		e.log.Error("resync signer nonce", "network", n.id, "signer", signer, "err", err)
	}
}

// Reconcile resolves every pending intent with the chain: a receipt makes
// it final; without one the recorded transaction is broadcast again
// unchanged (never re-signed), and if the node refuses it the
// authorization's on-chain state decides. Call it on start, before serving,
// so recorded transactions take their signer nonces before new ones. It
// waits, bounded by ctx, for the resolutions and reports those still
// pending.
func (e *Engine) Reconcile(ctx context.Context) error {
	e.startup.Do(func() {})
	flights, err := e.reconcilePass()
	if err != nil {
		return err
	}
	var pending []string
	for _, f := range flights {
		select {
		case <-f.done:
			if !f.final {
				pending = append(pending, f.key)
			}
		case <-ctx.Done():
			return fmt.Errorf("settle: reconcile: %w", ctx.Err())
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("settle: reconcile: %d settlements still pending: %v", len(pending), pending)
	}
	return nil
}

// reconcilePass starts (or joins) a reconciliation flight for every pending
// record and queues them in nonce order.
func (e *Engine) reconcilePass() ([]*flight, error) {
	recs, err := e.db.PendingSettlements()
	if err != nil {
		e.log.Error("reconcile: list pending settlements", "err", err)
		return nil, fmt.Errorf("settle: reconcile: %w", err)
	}
	var flights []*flight
	for _, rec := range recs {
		e.mu.Lock()
		if f := e.flights[rec.BodyKey]; f != nil {
			e.mu.Unlock()
			flights = append(flights, f)
			continue
		}
		if e.closed {
			e.mu.Unlock()
			return flights, ErrClosed
		}
		f, start := e.newResolveLocked(rec)
		e.mu.Unlock()
		start()
		flights = append(flights, f)
	}
	if len(recs) > 0 {
		e.log.Info("reconcile: resolving pending settlements", "count", len(recs))
	}
	return flights, nil
}
