//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// sideBySide is the env var that turns TestSideBySideThroughput on: it
// takes about two minutes of both cores, so `make e2e` leaves it off.
const sideBySide = "ARDX_E2E_SIDE_BY_SIDE"

// benchPayer is one of the payers the throughput runs rotate through, so
// no single payer's balance or nonce space matters.
type benchPayer struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// signFor signs a v2 payment of value from payer to merchant with our
// EIP-712 code and returns the body and its authorization nonce.
func (e *payEnv) signFor(t *testing.T, p benchPayer, merchant common.Address, value *big.Int) ([]byte, common.Hash) {
	t.Helper()
	pay := e.signPaymentAs(t, p.key, merchant, x402.Version2, devNetwork, value, randomNonce(t))
	return pay.body, pay.nonce
}

// settleFeed signs n settle bodies from payers (in turn) to merchant and
// returns the feed closedLoop takes them from, each once.
func (e *payEnv) settleFeed(t *testing.T, payers []benchPayer, merchant common.Address, value *big.Int, n int) func() ([]byte, settledBody, bool) {
	t.Helper()
	bodies := make([][]byte, n)
	metas := make([]settledBody, n)
	for i := range bodies {
		p := payers[i%len(payers)]
		bodies[i], metas[i].nonce = e.signFor(t, p, merchant, value)
		metas[i].payer = p.addr
	}
	var i atomic.Int64
	return func() ([]byte, settledBody, bool) {
		n := int(i.Add(1)) - 1
		if n >= len(bodies) {
			return nil, settledBody{}, false
		}
		return bodies[n], metas[n], true
	}
}

// loadResult is one closed-loop run against one facilitator.
type loadResult struct {
	facilitator, op string
	clients         int
	elapsed         time.Duration
	ok, failed      int
	latencies       []time.Duration // of successful requests, sorted
	firstFailure    string
	settled         []settledBody // settle runs only
}

// settledBody is one successful settle: which body, which transaction.
type settledBody struct {
	payer common.Address
	nonce common.Hash
	tx    common.Hash
}

func (r loadResult) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// closedLoop runs clients goroutines that each send the next body, wait for
// the answer and send again, for d or until bodies run out. isGood says
// whether an answer counts as a success.
func closedLoop(ctx context.Context, hc *http.Client, url string, clients int, d time.Duration,
	next func() (body []byte, meta settledBody, ok bool),
	isGood func(status int, raw []byte) (common.Hash, bool),
) loadResult {
	var (
		mu   sync.Mutex
		res  = loadResult{clients: clients}
		wg   sync.WaitGroup
		stop atomic.Bool
	)
	time.AfterFunc(d, func() { stop.Store(true) })
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lats []time.Duration
			var settled []settledBody
			ok, failed, first := 0, 0, ""
			for !stop.Load() && ctx.Err() == nil {
				body, meta, more := next()
				if !more {
					break
				}
				t0 := time.Now()
				status, raw, err := post(ctx, hc, url, body)
				lat := time.Since(t0)
				tx, good := common.Hash{}, false
				if err == nil {
					tx, good = isGood(status, raw)
				}
				if good {
					ok++
					lats = append(lats, lat)
					if meta.payer != (common.Address{}) {
						meta.tx = tx
						settled = append(settled, meta)
					}
				} else {
					failed++
					if first == "" {
						first = fmt.Sprintf("%d %s %v", status, raw, err)
					}
				}
			}
			mu.Lock()
			res.ok += ok
			res.failed += failed
			res.latencies = append(res.latencies, lats...)
			res.settled = append(res.settled, settled...)
			if res.firstFailure == "" {
				res.firstFailure = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

// post sends one JSON body and reads the bounded answer.
func post(ctx context.Context, hc *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, raw, err
}

// TestSideBySideThroughput measures ardx and the official TypeScript
// facilitator on one geth --dev chain, one after the other, with the same
// closed-loop load: verify with 8 clients, settle with 4, 8 and 16, each
// for about 10 s, with fresh payments from 32 funded payers. After each ardx
// settle run it checks exactly-once on chain: one Transfer per successful
// settle, in the transaction the answer named, and every authorization used
// once. The numbers are logged as a table, never asserted (DESIGN: speed
// targets live in benchmarks, not timed tests).
func TestSideBySideThroughput(t *testing.T) {
	if os.Getenv(sideBySide) != "1" {
		t.Skipf("set %s=1 to run the side-by-side throughput comparison (about 3 minutes of both cores)", sideBySide)
	}
	dir := npmDir(t)
	env := newPayEnv(t)
	ardxProc := startArdx(t, []string{"facilitator"}, env.facilitatorArgs()...)
	ardxURL := ardxProc.url("facilitator")
	sup := waitSupported(t, ardxURL)
	off := startOfficialFacilitator(t, dir, env, sup.Networks[devNetwork].V1Network)

	payers := make([]benchPayer, 32)
	for i := range payers {
		payers[i].key, payers[i].addr = newKey(t)
		env.token.mint(t, payers[i].addr, big.NewInt(1_000_000_000_000))
	}
	value := big.NewInt(1_000) // 0.001 USDC
	const runFor = 10 * time.Second

	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	facilitators := []struct{ name, url string }{{"ardx", ardxURL}, {"official-ts", off.url}}
	var results []loadResult

	// Verify: a fixed pool of valid bodies (verification consumes nothing).
	pool := make([][]byte, 256)
	for i := range pool {
		pool[i], _ = env.signFor(t, payers[i%len(payers)], env.merchant, value)
	}
	verifyOK := func(status int, raw []byte) (common.Hash, bool) {
		var vr x402.VerifyResponse
		return common.Hash{}, status == http.StatusOK && json.Unmarshal(raw, &vr) == nil && vr.IsValid
	}
	for _, f := range facilitators {
		var i atomic.Int64
		next := func() ([]byte, settledBody, bool) {
			return pool[int(i.Add(1))%len(pool)], settledBody{}, true
		}
		closedLoop(ctx, hc, f.url+"/verify", 8, 2*time.Second, next, verifyOK) // warm-up: JIT, connections, caches
		r := closedLoop(ctx, hc, f.url+"/verify", 8, runFor, next, verifyOK)
		r.facilitator, r.op = f.name, "verify"
		results = append(results, r)
		if r.failed > 0 {
			t.Errorf("%s verify: %d of %d answers were not valid; first: %s", f.name, r.failed, r.ok+r.failed, r.firstFailure)
		}
	}

	// Settle: fresh bodies, signed before the run so signing is not timed.
	settleOK := func(status int, raw []byte) (common.Hash, bool) {
		var sr x402.SettleResponse
		if status != http.StatusOK || json.Unmarshal(raw, &sr) != nil || !sr.Success || !txHashRE.MatchString(sr.Transaction) {
			return common.Hash{}, false
		}
		return common.HexToHash(sr.Transaction), true
	}
	for _, clients := range []int{4, 8, 16} {
		for _, f := range facilitators {
			// A merchant per run keeps each run's transfers apart on chain.
			_, merchant := newKey(t)
			signed := 400 * clients
			next := env.settleFeed(t, payers, merchant, value, signed)
			r := closedLoop(ctx, hc, f.url+"/settle", clients, runFor, next, settleOK)
			r.facilitator, r.op = f.name, "settle"
			results = append(results, r)
			if r.ok+r.failed >= signed {
				t.Logf("%s settle with %d clients used all %d pre-signed bodies in %v", f.name, clients, signed, r.elapsed.Round(time.Millisecond))
			}
			if r.failed > 0 {
				t.Errorf("%s settle with %d clients: %d of %d failed; first: %s", f.name, clients, r.failed, r.ok+r.failed, r.firstFailure)
			}
			checkExactlyOnce(t, env, payers, merchant, value, r)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-7s %7s %9s %10s %9s %9s %7s\n", "facilitator", "op", "clients", "requests", "per second", "p50", "p99", "failed")
	for _, r := range results {
		fmt.Fprintf(&b, "%-12s %-7s %7d %9d %10.1f %9v %9v %7d\n", r.facilitator, r.op, r.clients, r.ok, r.rate(),
			percentile(r.latencies, 50).Round(100*time.Microsecond), percentile(r.latencies, 99).Round(100*time.Microsecond), r.failed)
	}
	t.Logf("side by side on geth --dev (%d-second closed-loop runs, one facilitator at a time):\n%s", int(runFor.Seconds()), b.String())
}

// checkExactlyOnce reads the run's transfers to its merchant from the chain:
// exactly one per successful settle, each in the transaction the answer
// named, and each authorization used exactly once.
func checkExactlyOnce(t *testing.T, env *payEnv, payers []benchPayer, merchant common.Address, value *big.Int, r loadResult) {
	t.Helper()
	byTx := map[common.Hash]int{}
	total := 0
	for _, p := range payers {
		for _, tr := range env.token.transfers(t, p.addr, merchant) {
			if tr.Value.Cmp(value) != 0 {
				t.Errorf("%s: transfer of %s in %s, want %s", r.facilitator, tr.Value, tr.TxHash.Hex(), value)
			}
			byTx[tr.TxHash]++
			total++
		}
	}
	if total != r.ok {
		t.Errorf("%s settle with %d clients: %d Transfer events to the run's merchant, %d successful settles", r.facilitator, r.clients, total, r.ok)
	}
	usedBy := map[common.Address]map[common.Hash]int{}
	for _, s := range r.settled {
		if byTx[s.tx] != 1 {
			t.Errorf("%s: settled body (payer %s, nonce %s) names transaction %s holding %d transfers to the merchant, want 1",
				r.facilitator, s.payer.Hex(), s.nonce.Hex(), s.tx.Hex(), byTx[s.tx])
		}
		if usedBy[s.payer] == nil {
			usedBy[s.payer] = env.token.authorizationsUsed(t, s.payer)
		}
		if n := usedBy[s.payer][s.nonce]; n != 1 {
			t.Errorf("%s: authorization %s of %s used %d times on chain, want 1", r.facilitator, s.nonce.Hex(), s.payer.Hex(), n)
		}
	}
	t.Logf("%s settle with %d clients: %d settles, %d transfers on chain, one per body", r.facilitator, r.clients, r.ok, total)
}
