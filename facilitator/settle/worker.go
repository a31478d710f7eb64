package settle

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// maxRequeue bounds how often a payment waits for another body's settlement
// of the same authorization and comes back to the queue.
const maxRequeue = 3

// maxRun bounds how many ready payments the worker signs, records in one
// commit and broadcasts as one run.
const maxRun = 64

// maxSimulationAge is how old a simulation may be when its transaction is
// signed; an older one (the payment waited in a long queue) is simulated
// again on the worker, so the last simulation stays immediately before the
// broadcast. A quarter second is about one Base flashblock.
const maxSimulationAge = 250 * time.Millisecond

// work is a network's single worker: it takes payments in arrival order and
// does the nonce-sensitive steps (sign, record, broadcast, resync). Each
// turn it takes the payment at the head of the queue and every payment
// behind it that is already verified and simulated, as one run. The serial
// section is a pipeline of two: while one run's transactions are on their
// way to the node, the next run is signed and its intents recorded; the
// send's results are read (and any failure repaired) before the next send,
// so broadcasts stay in nonce order. Receipt waits run on their own
// goroutines.
func (e *Engine) work(n *network) {
	var next *job // taken from the queue, not yet ready
	for {
		j := next
		next = nil
		if j == nil {
			select {
			case j = <-n.queue:
			case <-n.sendDone():
				e.settleSend(n)
				continue
			case <-e.stopped():
				e.settleSend(n)
				return
			}
		}
		if !j.readyNow() {
			select {
			case <-j.ready:
			case <-n.sendDone():
				e.settleSend(n)
				<-j.ready
			}
		}
		if !e.plain(j) {
			e.handle(n, j)
			continue
		}
		run := []*job{j}
	collect:
		for len(run) < maxRun {
			select {
			case k := <-n.queue:
				if k.readyNow() && k.skip {
					continue // its failure is recorded: nothing left to do
				}
				if !k.readyNow() || !e.plain(k) {
					next = k // the head of the next turn
					break collect
				}
				run = append(run, k)
			default:
				break collect
			}
		}
		e.processRun(n, run)
	}
}

// plain reports whether j is a new payment, simulated, to sign and send.
func (e *Engine) plain(j *job) bool {
	return !j.skip && j.resolve == nil && j.transfer != nil && e.ctx.Err() == nil
}

// handle takes a job that is not a plain new payment.
func (e *Engine) handle(n *network, j *job) {
	// A reconciliation may resync a nonce or fill a gap: the run on its way
	// to the node goes first.
	e.settleSend(n)
	switch {
	case j.skip:
	case e.ctx.Err() != nil:
		e.finishPending(j.f)
	case j.resolve != nil:
		e.resolve(n, j)
	default:
		e.processRun(n, []*job{j})
	}
}

// stopped is closed once Close has cancelled the background work and every
// flight has ended, so no job can arrive any more.
func (e *Engine) stopped() <-chan struct{} { return e.stop }

func (e *Engine) chainCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, chainCallTimeout)
}

// signed is a payment of a run with its transaction and intent record.
type signed struct {
	j   *job
	tx  *Tx
	rec kv.Settlement
}

// processRun settles a run of payments in queue order: claim check (and a
// fresh simulation where the last one is stale), signing with consecutive
// nonces, one durable commit for every intent, then broadcasts in nonce
// order. A payment whose authorization another body claimed never gets a
// transaction; a second body with the same authorization in one run waits
// for the first's record.
func (e *Engine) processRun(n *network, run []*job) {
	var (
		ready    []signed
		later    []*job
		claims   = map[string]bool{}
		balances = n.inflightBalances()
	)
	defer e.releaseIdle(n)
	runSize.WithLabelValues(n.id).Observe(float64(len(run)))
	for _, j := range run {
		if !j.readyAt.IsZero() {
			stageDuration.WithLabelValues(n.id, "queue").Observe(time.Since(j.readyAt).Seconds())
			j.readyAt = time.Time{}
		}
		f := j.f
		authID := n.chain.AuthorizationID(j.req)
		if claims[authID] {
			later = append(later, j)
			continue
		}
		owner, err := e.db.AuthorizationOwner(authID)
		switch {
		case err == nil && owner != f.key:
			go e.awaitOwner(n, j, authID, owner)
			continue
		case err != nil && !errors.Is(err, kv.ErrNotFound):
			e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: read authorization owner: %w", err))
			continue
		}
		if j.transfer == nil || time.Since(j.transfer.SimulatedAt) > maxSimulationAge {
			ctx, cancel := e.chainCtx()
			j.transfer = e.simulate(ctx, n, j)
			cancel()
			if j.transfer == nil {
				continue
			}
		}
		ctx, cancel := e.chainCtx()
		ok := e.affordable(ctx, n, j, balances)
		cancel()
		if !ok {
			e.hold(n, j)
			continue
		}
		ctx, cancel = e.chainCtx()
		tx, err := n.chain.Sign(ctx, j.transfer)
		cancel()
		if err != nil {
			if e.ctx.Err() != nil {
				e.finishPending(f)
				continue
			}
			e.log.Error("sign settlement", "network", n.id, "body", f.key, "err", err)
			e.fail(f, n.id, x402.ReasonServiceUnavailable, "could not sign the transfer: "+shortErr(err), nil, false)
			continue
		}
		claims[authID] = true
		now := e.opts.Now().UTC()
		ready = append(ready, signed{j: j, tx: tx, rec: kv.Settlement{
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
				Genesis:         n.chain.Genesis(),
			},
		}})
	}
	e.recordAndBroadcast(n, ready)
	for _, j := range later {
		e.processRun(n, []*job{j})
	}
}

// recordAndBroadcast commits the intents of a signed run, then, once the
// run before it is settled, starts sending its transactions (settleSend
// reads the results). When a commit fails, or the run before it could not
// all be sent (the nonces taken here may be wrong now), the signers' nonces
// are repaired from the chain and the payments not yet sent are settled
// again one by one, with new transactions.
func (e *Engine) recordAndBroadcast(n *network, run []signed) {
	if len(run) == 0 {
		return
	}
	recs := make([]kv.Settlement, len(run))
	for i, s := range run {
		recs[i] = s.rec
	}
	start := time.Now()
	err := e.db.RecordSettlementIntents(recs)
	observeStage(n.id, "record", start)
	clean := e.settleSend(n)
	if err != nil {
		// Nothing was recorded: the nonces taken will never be broadcast.
		e.resyncSigners(n, run)
		if len(run) > 1 {
			for _, s := range run {
				e.processRun(n, []*job{s.j})
			}
			return
		}
		f := run[0].j.f
		var claimed *kv.AuthorizationClaimedError
		switch {
		case errors.As(err, &claimed):
			go e.awaitOwner(n, run[0].j, claimed.AuthorizationID, claimed.Owner)
		case errors.Is(err, kv.ErrSettlementFinal):
			e.finishFromRecord(f)
		default:
			e.log.Error("record settlement intent", "body", f.key, "err", err)
			e.finishFlight(f, x402.SettleResponse{}, false, fmt.Errorf("settle: record intent: %w", err))
		}
		return
	}
	for i := range run {
		run[i].rec = recs[i]
	}
	if !clean {
		// The run before this one was repaired: these recorded intents were
		// never sent and are replaced.
		if e.ctx.Err() != nil {
			for _, s := range run {
				e.finishPending(s.j.f)
			}
			return
		}
		e.resyncSigners(n, run)
		for _, s := range run {
			e.processRun(n, []*job{s.j})
		}
		return
	}
	for range run {
		e.failpoint(FailpointBeforeBroadcast)
	}
	op := &sendOp{run: run, signed: map[string]*big.Int{}, done: make(chan struct{})}
	for _, s := range run {
		k := payerKey(s.j.req)
		if op.signed[k] == nil {
			op.signed[k] = new(big.Int)
		}
		op.signed[k].Add(op.signed[k], paymentValue(s.j.req))
	}
	n.inflight = op
	go func() {
		defer close(op.done)
		op.errs = e.broadcastRun(n, run)
	}()
}

// sendOp is a run whose transactions are on their way to the node.
type sendOp struct {
	run    []signed
	signed map[string]*big.Int // by payer: amounts not yet counted as owed
	done   chan struct{}
	errs   []error // one per transaction; nil: nothing known of any
}

// sendDone is closed when the run in flight has its answer; nil (never
// ready) when none is in flight. Worker only.
func (n *network) sendDone() <-chan struct{} {
	if n.inflight == nil {
		return nil
	}
	return n.inflight.done
}

// inflightBalances starts a run's balance checks with what the payers of
// the run still in flight signed, not yet counted as owed.
func (n *network) inflightBalances() runBalances {
	rb := runBalances{}
	if n.inflight == nil {
		return rb
	}
	for k, v := range n.inflight.signed {
		rb[k] = &runBalance{signed: new(big.Int).Set(v)}
	}
	return rb
}

// inflightPays reports whether payer has a payment in the run in flight
// (owed once the run is settled). Worker only.
func (n *network) inflightPays(payer string) bool {
	return n.inflight != nil && n.inflight.signed[payer] != nil
}

// settleSend waits for the run in flight, if any, and reads its results in
// nonce order: a transaction the node took goes on to its receipt wait; a
// refused one is sent again on its own and, if still refused, its payment
// is decided (resolveUnbroadcast), with its nonce filled when a later one
// of the run reached the node; when nothing after a refused one reached
// it, those are signed again. It reports whether every transaction was
// taken and no signer's nonce was read again meanwhile: otherwise a run
// signed before must be signed again. Worker only.
func (e *Engine) settleSend(n *network) (clean bool) {
	op := n.inflight
	if op == nil {
		return true
	}
	<-op.done
	n.inflight = nil
	defer e.releaseIdle(n)
	run, errs := op.run, op.errs
	lastSent := -1
	for i, err := range errs {
		if err == nil {
			lastSent = i
		}
	}
	resyncs := n.resyncs.Load()
	clean = true
	for i := range run {
		s := &run[i]
		if errs != nil && errs[i] == nil {
			e.sent(n, s.j.f, &s.rec, s.tx, false)
			continue
		}
		if i < lastSent {
			// Refused, while a later transaction of the run reached the
			// node and waits behind this nonce: send it once more, and if
			// it stays refused (its payment is decided) fill the nonce.
			if !e.broadcast(n, s.j.f, &s.rec, s.tx, false) {
				e.fillRefused(n, s.tx)
			}
			clean = false
			continue
		}
		if e.broadcast(n, s.j.f, &s.rec, s.tx, false) {
			continue
		}
		clean = false
		// Nothing after this one reached the node, and sending it would
		// leave a nonce gap: sign them again (their recorded intents were
		// never sent and are replaced).
		rest := run[i+1:]
		if len(rest) == 0 || e.ctx.Err() != nil {
			for _, r := range rest {
				e.finishPending(r.j.f)
			}
			break
		}
		e.resyncSigners(n, rest)
		for _, r := range rest {
			e.processRun(n, []*job{r.j})
		}
		break
	}
	// A nonce read again from the chain while this run was being read (a
	// send that failed once) may have moved the local nonce: the next run
	// must not trust nonces signed before.
	clean = clean && n.resyncs.Load() == resyncs
	if !clean && e.ctx.Err() == nil {
		// A failed send resynced a nonce while later transactions of the run
		// were still to be read: once everything sent is settled, read the
		// signers' nonces again so the next run signs from the chain's.
		e.settleSend(n)
		e.resyncSigners(n, run)
	}
	return clean
}

// broadcastRun sends a recorded run's transactions in nonce order, in one
// round trip where the chain allows it, and returns one error per
// transaction; nil when nothing is known of any (the batch failed, or the
// engine is closing), and each is then sent on its own.
func (e *Engine) broadcastRun(n *network, run []signed) []error {
	if e.ctx.Err() != nil {
		return nil
	}
	ctx, cancel := e.chainCtx()
	defer cancel()
	start := time.Now()
	defer observeStage(n.id, "broadcast", start)
	if len(run) == 1 {
		return []error{n.chain.Broadcast(ctx, run[0].tx)}
	}
	txs := make([]*Tx, len(run))
	for i, s := range run {
		txs[i] = s.tx
	}
	errs, err := n.chain.BroadcastBatch(ctx, txs)
	if err != nil || len(errs) != len(txs) {
		e.log.Warn("batch broadcast failed; sending one by one", "network", n.id, "transactions", len(txs), "err", err)
		return nil
	}
	return errs
}

// fillRefused fills the nonce of a refused transaction (its payment
// decided) when the node has not taken another at that nonce since, so
// the run's later transactions waiting behind it can mine.
func (e *Engine) fillRefused(n *network, tx *Tx) {
	ctx, cancel := e.chainCtx()
	defer cancel()
	e.fillGap(ctx, n, tx.Signer, tx.Nonce, tx.Nonce+1)
	e.resync(n, tx.Signer)
}

// resyncSigners repairs the nonce of every signer used in run.
func (e *Engine) resyncSigners(n *network, run []signed) {
	done := map[string]bool{}
	for _, s := range run {
		if !done[s.tx.Signer] {
			done[s.tx.Signer] = true
			e.resync(n, s.tx.Signer)
		}
	}
}

// resolve reconciles a settlement recorded pending (by a previous process,
// or one whose receipt wait ran out): the receipt decides if there is one,
// else the recorded transaction is broadcast again, unchanged.
func (e *Engine) resolve(n *network, j *job) {
	f, rec := j.f, j.resolve
	in := rec.Intent
	if now := n.chain.Genesis(); in.Genesis != "" && now != "" && !strings.EqualFold(in.Genesis, now) {
		e.chainGone(n, f, rec, now)
		return
	}
	ctx, cancel := e.chainCtx()
	defer cancel()
	hash, found, success, err := e.receipt(ctx, n, in)
	if err != nil {
		e.log.Warn("reconcile: read receipt", "network", n.id, "body", f.key, "tx", in.TxHash, "err", err)
		e.finishPending(f)
		return
	}
	if found {
		e.settleByReceipt(n, f, rec, hash, success)
		return
	}
	// A transaction behind a nonce gap never mines: fill the gap first; a
	// nonce already spent by another transaction decides at once.
	mined, err := n.chain.MinedNonce(ctx, in.Signer)
	switch {
	case err != nil:
		e.log.Warn("reconcile: read signer nonce", "network", n.id, "body", f.key, "err", err)
	case mined > in.Nonce:
		e.resync(n, in.Signer) // the local nonce may lag the chain's
		e.resolveUnbroadcast(ctx, n, f, rec, errNonceSpent)
		return
	case mined < in.Nonce:
		e.fillGap(ctx, n, in.Signer, mined, in.Nonce)
	}
	tx := &Tx{Signer: in.Signer, Nonce: in.Nonce, Hash: in.TxHash, Raw: in.RawTx}
	e.log.Info("reconcile: re-broadcasting recorded transaction", "network", n.id, "body", f.key, "tx", tx.Hash, "signer", tx.Signer, "nonce", tx.Nonce)
	e.failpoint(FailpointReconcile)
	e.broadcast(n, f, rec, tx, true)
}

// errNonceSpent is the cause of a failure decided because the signer's nonce
// of the intent was mined by a transaction that is none of the intent's.
var errNonceSpent = errors.New("the signer's nonce was spent by another transaction")

// chainGone resolves a pending record whose transaction was signed for a
// chain the node no longer serves (another genesis: a dev chain started
// afresh). Nothing of it can ever mine on this chain, so it fails and frees
// its authorization; the log and /status.json say so.
func (e *Engine) chainGone(n *network, f *flight, rec *kv.Settlement, now string) {
	msg := fmt.Sprintf("the chain this settlement's transaction was signed for (genesis %s) is gone: the node of %s now serves genesis %s; nothing moved on this chain", rec.Intent.Genesis, n.id, now)
	e.log.Warn("reconcile: settlement recorded on a chain that is gone", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash, "recorded_genesis", rec.Intent.Genesis, "genesis", now)
	e.gone.add(msg)
	e.fail(f, n.id, x402.ReasonTransactionFailed, msg, rec, true)
}

// receipt looks for a receipt of every transaction broadcast for the
// intent, in one round trip; a successful one wins (see pick).
func (e *Engine) receipt(ctx context.Context, n *network, in *kv.SettlementIntent) (hash string, found, success bool, err error) {
	hashes := in.Hashes()
	rs, err := n.chain.Receipts(ctx, hashes)
	if err != nil {
		return "", false, false, err
	}
	if len(rs) != len(hashes) {
		return "", false, false, fmt.Errorf("settle: %s: %d receipts for %d transactions", n.id, len(rs), len(hashes))
	}
	return pick(hashes, rs)
}

// fillGap sends a transaction that moves nothing at every nonce of signer
// in [from, to) that no pending settlement holds, so the recorded
// transactions behind the gap can mine.
func (e *Engine) fillGap(ctx context.Context, n *network, signer string, from, to uint64) {
	recs, err := e.db.PendingSettlements()
	if err != nil {
		e.log.Error("fill nonce gap: list pending settlements", "err", err)
		return
	}
	held := map[uint64]bool{}
	for _, r := range recs {
		if r.Intent != nil && r.Network == n.id && strings.EqualFold(r.Intent.Signer, signer) {
			held[r.Intent.Nonce] = true
		}
	}
	for k := from; k < to; k++ {
		if held[k] {
			continue
		}
		tx, err := n.chain.FillNonce(ctx, signer, k)
		if err == nil {
			err = n.chain.Broadcast(ctx, tx)
		}
		if err != nil {
			e.log.Warn("fill nonce gap", "network", n.id, "signer", signer, "nonce", k, "err", err)
			continue
		}
		e.log.Warn("filled a nonce gap in front of recorded transactions", "network", n.id, "signer", signer, "nonce", k, "tx", tx.Hash)
	}
}

// broadcast sends tx whose intent is recorded and reports whether the node
// took it. On failure it repairs the signer's nonce, tries the same bytes
// once more (a timed-out first send may have reached the node, which then
// answers "known"), and otherwise asks the chain what became of the
// authorization.
func (e *Engine) broadcast(n *network, f *flight, rec *kv.Settlement, tx *Tx, resyncAfter bool) (sent bool) {
	ctx, cancel := e.chainCtx()
	defer cancel()
	start := time.Now()
	err := n.chain.Broadcast(ctx, tx)
	observeStage(n.id, "broadcast", start)
	if err != nil && e.ctx.Err() == nil {
		e.log.Warn("broadcast failed; resyncing nonce and retrying once", "network", n.id, "body", f.key, "tx", tx.Hash, "signer", tx.Signer, "nonce", tx.Nonce, "err", err)
		e.resync(n, tx.Signer)
		if err2 := n.chain.Broadcast(ctx, tx); err2 == nil {
			err = nil
		}
	}
	switch {
	case err == nil:
		e.sent(n, f, rec, tx, resyncAfter)
		return true
	case e.ctx.Err() != nil:
		e.finishPending(f)
	default:
		e.resolveUnbroadcast(ctx, n, f, rec, err)
	}
	return false
}

// sent continues a settlement whose transaction the node took: the
// payer's debt, then the receipt wait in the background.
func (e *Engine) sent(n *network, f *flight, rec *kv.Settlement, tx *Tx, resyncAfter bool) {
	e.failpoint(FailpointAfterBroadcast)
	if resyncAfter {
		e.resync(n, tx.Signer)
	}
	f.setHash(tx.Hash)
	if f.req != nil {
		n.owe(f.req)
	}
	go e.awaitReceipt(n, f, rec)
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
	hash, found, success, err := e.receipt(ctx, n, rec.Intent)
	if err != nil {
		e.log.Error("broadcast refused and receipt unreadable; leaving pending", "network", n.id, "body", f.key, "err", err, "cause", cause)
		e.finishPending(f)
		return
	}
	switch {
	case found:
		e.settleByReceipt(n, f, rec, hash, success)
	case used:
		e.log.Warn("authorization used by a transaction that is not ours", "network", n.id, "body", f.key, "cause", cause)
		e.fail(f, n.id, x402.ReasonNonceAlreadyUsed, "the authorization was already used on-chain by another transaction; this facilitator charged nothing", rec, false)
	default:
		e.log.Error("broadcast refused; settlement failed, nothing charged", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash, "err", cause)
		e.fail(f, n.id, x402.ReasonTransactionFailed, "the network refused the transfer transaction ("+shortErr(cause)+"); nothing was charged", rec, true)
	}
}

// awaitReceipt waits for rec's receipt, found by the network's receipt
// watcher (receipts.go), and records the outcome; after ReceiptTimeout the
// settlement stays pending. The watcher first looks at the next block, or
// at three quarters of the network's recent inclusion time if no block
// comes. A transaction without a receipt for StuckAfter is unstuck.
func (e *Engine) awaitReceipt(n *network, f *flight, rec *kv.Settlement) {
	if f.req != nil {
		defer e.paid(n, f.req)
	}
	sent := time.Now()
	lastSend, attempts := sent, 0
	deadline := sent.Add(e.opts.ReceiptTimeout)
	w := n.receipts.add(rec.Intent.Hashes(), n.inclusionTime(e.opts.ReceiptPoll)*3/4)
	defer n.receipts.remove(w)
	timer := time.NewTimer(e.opts.StuckAfter)
	defer timer.Stop()
	found := func(r receiptFound) {
		if attempts == 0 {
			n.observeInclusion(time.Since(sent))
		}
		observeStage(n.id, "receipt", sent)
		e.settleByReceipt(n, f, rec, r.hash, r.success)
	}
	for {
		timer.Reset(max(min(time.Until(lastSend.Add(e.opts.StuckAfter)), time.Until(deadline)), minReceiptPoll))
		select {
		case r := <-w.found:
			found(r)
			return
		case <-timer.C:
		case <-e.ctx.Done():
			e.finishPending(f)
			return
		}
		select {
		case r := <-w.found: // came with the timer
			found(r)
			return
		default:
		}
		if time.Now().After(deadline) {
			e.log.Warn("no receipt within the receipt timeout; settlement stays pending", "network", n.id, "body", f.key, "tx", rec.Intent.TxHash)
			e.finishPending(f)
			return
		}
		if time.Since(lastSend) >= e.opts.StuckAfter && e.ctx.Err() == nil {
			attempts++
			if e.unstick(n, f, rec, attempts) {
				return
			}
			lastSend = time.Now()
			n.receipts.setHashes(w, rec.Intent.Hashes())
		}
	}
}

// unstick handles a broadcast whose receipt has not come for StuckAfter: a
// spent nonce decides the settlement; a nonce gap in front of it is filled;
// then the transaction is sent again the first time, and from the second
// time on replaced with the same nonce at a higher fee (recorded before it
// is sent, so whichever of its transactions mines is found). It reports
// whether the flight is finished.
func (e *Engine) unstick(n *network, f *flight, rec *kv.Settlement, attempt int) bool {
	ctx, cancel := e.chainCtx()
	defer cancel()
	in := rec.Intent
	mined, err := n.chain.MinedNonce(ctx, in.Signer)
	switch {
	case err != nil:
		e.log.Warn("stuck transaction: read signer nonce", "network", n.id, "body", f.key, "err", err)
		return false
	case mined > in.Nonce:
		// Spent, and none of ours had a receipt at the last poll: look once
		// more (one may have mined since), then the authorization decides.
		hash, found, success, err := e.receipt(ctx, n, in)
		if err != nil {
			return false
		}
		if found {
			e.settleByReceipt(n, f, rec, hash, success)
			return true
		}
		e.resolveUnbroadcast(ctx, n, f, rec, errNonceSpent)
		return true
	case mined < in.Nonce:
		e.fillGap(ctx, n, in.Signer, mined, in.Nonce)
	}
	tx := &Tx{Signer: in.Signer, Nonce: in.Nonce, Hash: in.TxHash, Raw: in.RawTx}
	if attempt > 1 {
		next, err := n.chain.Replace(ctx, tx)
		if err != nil {
			e.log.Warn("stuck transaction: sign replacement; sending it again instead", "network", n.id, "body", f.key, "tx", tx.Hash, "err", err)
		} else {
			updated, err := e.db.ReplaceSettlementTx(f.key, next.Hash, next.Raw)
			switch {
			case errors.Is(err, kv.ErrSettlementFinal):
				e.finishFromRecord(f)
				return true
			case err != nil:
				e.log.Error("stuck transaction: record replacement", "network", n.id, "body", f.key, "err", err)
				return false
			}
			*rec = updated
			e.log.Warn("stuck transaction replaced at a higher fee", "network", n.id, "body", f.key, "old_tx", tx.Hash, "tx", next.Hash, "signer", next.Signer, "nonce", next.Nonce)
			tx = next
			f.setHash(tx.Hash)
		}
	} else {
		e.log.Warn("stuck transaction: sending it again", "network", n.id, "body", f.key, "tx", tx.Hash, "signer", tx.Signer, "nonce", tx.Nonce)
	}
	if err := n.chain.Broadcast(ctx, tx); err != nil {
		e.log.Warn("stuck transaction: broadcast", "network", n.id, "body", f.key, "tx", tx.Hash, "err", err)
	}
	return false
}

// settleByReceipt records the outcome a mined transaction (hash, one of the
// intent's) decided.
func (e *Engine) settleByReceipt(n *network, f *flight, rec *kv.Settlement, hash string, success bool) {
	f.setHash(hash)
	if !success {
		e.log.Error("settlement transaction reverted; gas spent, payer not charged", "network", n.id, "body", f.key, "tx", hash)
		resp := f.baseResponse()
		resp.ErrorReason, resp.Transaction = x402.ReasonEVMTransactionFailed, hash
		resp.ErrorMessage = "the transfer transaction was mined and reverted; the payer was not charged"
		e.finish(f, n.id, kv.SettlementFailed, resp.ErrorReason, resp, rec, true)
		return
	}
	resp := f.baseResponse()
	resp.Success = true
	resp.Transaction = hash
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
	if rec.Intent != nil {
		f.setHash(rec.Intent.TxHash) // pending answers name the transaction
	}
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
			ready := make(chan struct{})
			close(ready)
			e.enqueue(n, &job{f: f, req: req, body: rec.Body, ready: ready, resolve: &rec})
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
	n.resyncs.Add(1)
	ctx, cancel := e.chainCtx()
	defer cancel()
	if err := n.chain.ResyncNonce(ctx, signer); err != nil && e.ctx.Err() == nil {
		e.log.Error("resync signer nonce", "network", n.id, "signer", signer, "err", err)
	}
}

// Reconcile resolves every pending intent with the chain and waits, bounded
// by ctx, for the resolutions, reporting those still pending: a receipt of
// any of its transactions makes it final; a record signed on a chain that
// is gone fails; without a receipt a nonce gap in front of it is filled and
// the recorded transaction is broadcast again unchanged (never re-signed),
// and if the node refuses it the authorization's on-chain state decides.
// A service calls StartReconciling instead, which does not wait.
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

// StartReconciling resolves, in the background, the settlements a previous
// process left pending, then every ReconcileInterval those still pending
// that nobody works on (a receipt wait that ran out, a network that was
// unreachable). It returns at once: the service answers while
// reconciliation runs, and a settle of a body being reconciled waits on it
// as any identical request does (settlement_pending with the transaction
// hash until it is final). Pending records of a network that cannot settle
// now wait for it.
func (e *Engine) StartReconciling() {
	e.workers.Add(1)
	go func() {
		defer e.workers.Done()
		e.startup.Do(func() { e.reconcilePass() })
		t := time.NewTicker(e.opts.ReconcileInterval)
		defer t.Stop()
		for {
			select {
			case <-e.ctx.Done():
				return
			case <-t.C:
				e.reconcilePass()
			}
		}
	}()
}

// reconcilePass starts (or joins) a reconciliation flight for every pending
// record of a network that can settle now and queues them in nonce order.
func (e *Engine) reconcilePass() ([]*flight, error) {
	recs, err := e.db.PendingSettlements()
	if err != nil {
		e.log.Error("reconcile: list pending settlements", "err", err)
		return nil, fmt.Errorf("settle: reconcile: %w", err)
	}
	var flights []*flight
	started, waiting := 0, 0
	for _, rec := range recs {
		n := e.byName[rec.Network]
		if n == nil {
			waiting++ // a network not configured now: nothing can resolve it
			continue
		}
		if ok, _ := n.chain.Available(); !ok {
			waiting++
			continue
		}
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
		started++
		flights = append(flights, f)
	}
	e.waiting.Store(int64(waiting))
	if started > 0 {
		e.log.Info("reconcile: resolving pending settlements", "count", started, "waiting_for_network", waiting)
	}
	return flights, nil
}
