package settle

import (
	"sync"
	"time"
)

// receiptWatch is a network's one receipt watcher: instead of one poller per
// settlement, it follows the chain's head and, when a block comes, asks for
// the receipts of every transaction awaited in one round trip (Chain.Receipts,
// a JSON-RPC batch). With n settlements waiting it costs one head read per
// step and one batch per block, not n receipt calls per step.
//
// A waiter is looked for when the head moved past the last head it was
// looked for at, and in any case once it has waited firstLook (its
// transaction may have mined in the block the watcher saw just before the
// waiter came, and an on-demand chain mines no next block) and then every
// maxReceiptPoll (a node behind a load balancer may show a head before its
// receipts).
type receiptWatch struct {
	mu      sync.Mutex
	waiters map[*waiter]struct{}
	head    uint64        // the latest head read
	wake    chan struct{} // a waiter came to an idle watcher
}

// waiter is one settlement awaiting a receipt of any of its transactions.
type waiter struct {
	found chan receiptFound // the receipt, once; buffered

	// guarded by receiptWatch.mu
	hashes   []string  // every transaction of the intent
	seenHead uint64    // the head it was last looked for at
	nextLook time.Time // when to look whatever the head
}

type receiptFound struct {
	hash    string
	success bool
}

func newReceiptWatch() *receiptWatch {
	return &receiptWatch{waiters: map[*waiter]struct{}{}, wake: make(chan struct{}, 1)}
}

// add registers a waiter for hashes, first looked for at the next head
// change or after firstLook.
func (w *receiptWatch) add(hashes []string, firstLook time.Duration) *waiter {
	wt := &waiter{found: make(chan receiptFound, 1), hashes: hashes, nextLook: time.Now().Add(firstLook)}
	w.mu.Lock()
	wt.seenHead = w.head
	w.waiters[wt] = struct{}{}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return wt
}

func (w *receiptWatch) remove(wt *waiter) {
	w.mu.Lock()
	delete(w.waiters, wt)
	w.mu.Unlock()
}

// setHashes updates the transactions a waiter stands for (a replacement
// was recorded) and has it looked for at the next step.
func (w *receiptWatch) setHashes(wt *waiter, hashes []string) {
	w.mu.Lock()
	wt.hashes, wt.nextLook = hashes, time.Now()
	w.mu.Unlock()
}

// due records the head just read (ok false: unknown) and returns the
// waiters to look for now, each with the hashes to ask.
func (w *receiptWatch) due(head uint64, ok bool, now time.Time) ([]*waiter, [][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var (
		ws   []*waiter
		sets [][]string
	)
	back := ok && head < w.head // a reorg, or another node behind the URL
	if ok {
		w.head = head
	}
	for wt := range w.waiters {
		moved := ok && (back || head > wt.seenHead)
		if !moved && now.Before(wt.nextLook) {
			continue
		}
		if ok {
			wt.seenHead = head
		}
		wt.nextLook = now.Add(maxReceiptPoll)
		ws = append(ws, wt)
		sets = append(sets, wt.hashes)
	}
	return ws, sets
}

// idle reports whether nobody waits.
func (w *receiptWatch) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters) == 0
}

// watch runs n's receipt watcher until the engine stops. Its step follows
// the network's recent inclusion time (an eighth of it, 1 ms to 1 s): a node
// that mines on demand is seen within a millisecond or two of mining, and
// Base's two-second blocks cost a handful of head reads per block.
func (e *Engine) watch(n *network) {
	w := n.receipts
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	last := time.Now() // when the last head read started
	for {
		if w.idle() {
			select {
			case <-w.wake:
				last = time.Now()
			case <-e.ctx.Done():
				return
			}
		}
		// The step runs from the start of the last read, so a slow node
		// (reads taking longer than the step) is read back to back rather
		// than a step after each answer.
		usual := n.inclusionTime(e.opts.ReceiptPoll)
		timer.Reset(time.Until(last.Add(min(max(usual/8, minReceiptPoll), maxReceiptPoll))))
		select {
		case <-timer.C:
		case <-e.ctx.Done():
			return
		}
		last = time.Now()
		ctx, cancel := e.chainCtx()
		h, err := n.chain.Head(ctx)
		cancel()
		if err != nil && e.ctx.Err() == nil {
			e.log.Debug("receipt watcher: read head", "network", n.id, "err", err)
		}
		ws, sets := w.due(h, err == nil, time.Now())
		if len(ws) == 0 {
			continue
		}
		var hashes []string
		for _, set := range sets {
			hashes = append(hashes, set...)
		}
		ctx, cancel = e.chainCtx()
		rs, err := n.chain.Receipts(ctx, hashes)
		cancel()
		failed := ws
		if err == nil && len(rs) == len(hashes) {
			failed = deliver(ws, sets, rs)
		} else if e.ctx.Err() == nil {
			e.log.Debug("receipt watcher: read receipts", "network", n.id, "count", len(hashes), "err", err)
		}
		// A failed read is tried again soon, not at the next block: the
		// block it was for has come already.
		w.lookAgain(failed, time.Now().Add(min(usual, maxReceiptPoll)))
	}
}

// lookAgain has ws looked for at the latest at t.
func (w *receiptWatch) lookAgain(ws []*waiter, t time.Time) {
	if len(ws) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range ws {
		if t.Before(wt.nextLook) {
			wt.nextLook = t
		}
	}
}

// deliver hands each waiter the receipt of its transactions, if any, and
// returns the waiters whose read failed (an error on one of its hashes and
// none mined). rs holds the answers for sets flattened in order.
func deliver(ws []*waiter, sets [][]string, rs []ReceiptStatus) (failed []*waiter) {
	i := 0
	for k, wt := range ws {
		set := sets[k]
		hash, found, success, err := pick(set, rs[i:i+len(set)])
		i += len(set)
		if err != nil {
			failed = append(failed, wt)
		}
		if found {
			select {
			case wt.found <- receiptFound{hash: hash, success: success}:
			default:
			}
		}
	}
	return failed
}

// pick chooses the outcome among the receipts of one intent's transactions:
// a successful one wins (only one can move the money: the authorization is
// spent by it), else a reverted one; err is the last error when none is
// found.
func pick(hashes []string, rs []ReceiptStatus) (hash string, found, success bool, err error) {
	for i, r := range rs {
		switch {
		case r.Err != nil:
			err = r.Err
		case r.Found && (!found || r.Success && !success):
			hash, found, success = hashes[i], true, r.Success
		}
	}
	if found {
		return hash, true, success, nil
	}
	return "", false, false, err
}
