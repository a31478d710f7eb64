package settle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// The receipts of settlements waiting together are asked for together: one
// watcher per network follows the head and, when a block comes, asks for
// every awaited transaction in one batch, instead of one poller per
// settlement. Once nothing waits it stops calling the node.
func TestReceiptWatcherOneBatchPerBlock(t *testing.T) {
	const n = 8
	c := newFakeChain()
	c.fund(payerA, 1_000_000)
	c.autoMine = false
	e, _ := newTestEngine(t, "", settle.Options{SettleTimeout: 10 * time.Second}, c)

	answers := make([]x402.SettleResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		body := newPayment(byte(60 + i)).body(t)
		wg.Go(func() {
			resp, _, err := e.Settle(context.Background(), body, "")
			if err != nil {
				t.Errorf("settle %d: %v", i, err)
			}
			answers[i] = resp
		})
	}
	// Every transaction is in the pool and its waiter past its first look
	// (three quarters of the 1 ms assumed inclusion time): from here on
	// only a block makes the watcher ask for receipts.
	waitFor(t, func() bool { return c.poolSize() == n })
	time.Sleep(50 * time.Millisecond)
	c.mu.Lock()
	before := c.receiptBatches
	c.mu.Unlock()

	c.mine() // one block with all of them
	wg.Wait()
	for i, a := range answers {
		if !a.Success {
			t.Fatalf("settlement %d: %+v", i, a)
		}
	}
	c.mu.Lock()
	batches := c.receiptBatches - before
	c.mu.Unlock()
	if batches > 2 {
		t.Errorf("%d receipt requests for %d settlements mined in one block; want one batch (two if a head read fell between the mine and the receipts)", batches, n)
	}
	if transfers, _, _ := c.stats(); transfers != n {
		t.Fatalf("transfers = %d, want %d", transfers, n)
	}

	time.Sleep(20 * time.Millisecond) // the waiters leave after the answers
	c.mu.Lock()
	heads := c.heads
	c.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	c.mu.Lock()
	idle := c.heads - heads
	c.mu.Unlock()
	if idle > 1 {
		t.Errorf("the watcher read the head %d times in 50 ms with nothing waiting", idle)
	}
}

// A receipt read that fails after a block came is tried again at the next
// step, not left for the next block (an on-demand chain may mine none) or
// the one-second fallback: the settlement finishes well inside a receipt
// timeout of half a second.
func TestReceiptWatcherRetriesAFailedRead(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.autoMine = false
	e, _ := newTestEngine(t, "", settle.Options{SettleTimeout: 10 * time.Second, ReceiptTimeout: 500 * time.Millisecond}, c)
	done := make(chan x402.SettleResponse, 1)
	body := newPayment(70).body(t)
	go func() {
		resp, _, err := e.Settle(context.Background(), body, "")
		if err != nil {
			t.Errorf("settle: %v", err)
		}
		done <- resp
	}()
	waitFor(t, func() bool { return c.poolSize() == 1 })
	c.mu.Lock()
	c.failReceipts = errors.New("node overloaded")
	c.mu.Unlock()
	c.mine()
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.failedReads > 0 })
	c.mu.Lock()
	c.failReceipts = nil
	c.mu.Unlock()
	if resp := <-done; !resp.Success {
		t.Fatalf("settle = %+v, want success: the failed read was not tried again in time", resp)
	}
}
