package settle_test

import (
	"context"
	"math/big"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
)

// BenchmarkSettleDevChain measures sustained settlement throughput on the
// in-process dev chain with 32 concurrent clients, each payment a distinct
// signed authorization, and fails on any duplicate or missing transfer.
// Target: ≥ 50 settles/s.
func BenchmarkSettleDevChain(b *testing.B) {
	d := newDevChain(b)
	e, _ := newTestEngine(b, "", settle.Options{ReceiptPoll: settle.DefaultReceiptPoll}, d.Network)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		// The simulated chain's clock runs ahead of the wall clock by a
		// second per block beyond one a second; a long validity keeps
		// authorizations signed up front valid for the whole run.
		bodies[i] = devPayment(b, d, 1, "https://m.example/bench", evm.PayOptions{ValidBefore: big.NewInt(time.Now().Unix() + 86400)})
	}
	before := transfersTo(b, d, d.Merchant)
	var next, failed atomic.Int64
	// Closed-loop clients: once the dev chain runs its maximum drift ahead it
	// seals one block a second (block timestamps must rise), so sustained
	// throughput is the number of settlements waiting per block.
	b.SetParallelism(64) // × GOMAXPROCS clients
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			resp, _, err := e.Settle(context.Background(), bodies[i], "")
			if err != nil || !resp.Success {
				if failed.Add(1) == 1 {
					b.Logf("first failure: %+v, %v", resp, err)
				}
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if failed.Load() != 0 {
		b.Fatalf("%d settlements failed", failed.Load())
	}
	if got := transfersTo(b, d, d.Merchant) - before; got != b.N {
		b.Fatalf("Transfer events = %d, want %d (duplicates or losses)", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "settles/s")
}

// BenchmarkReplay measures the latency of answering an identical body from
// its recorded outcome. Target: p99 ≤ 2 ms.
func BenchmarkReplay(b *testing.B) {
	d := newDevChain(b)
	e, _ := newTestEngine(b, "", settle.Options{}, d.Network)
	body := devPayment(b, d, 1, "https://m.example/replay", evm.PayOptions{})
	if resp, _, err := e.Settle(context.Background(), body, "replay-key"); err != nil || !resp.Success {
		b.Fatalf("settle = %+v, %v", resp, err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		_, replayed, err := e.Settle(context.Background(), body, "replay-key")
		lat = append(lat, time.Since(t))
		if err != nil || !replayed {
			b.Fatalf("replay: replayed=%t err=%v", replayed, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
