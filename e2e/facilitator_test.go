//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

var txHashRE = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

// TestFacilitatorSettlesOnGeth runs `ardx facilitator` against geth --dev and
// pays it the way a merchant does: /supported advertises the chain, v2 and
// v1 payments signed with our EIP-712 code verify and settle, the balances
// move exactly once, replays return the recorded outcome, and `ardx pay`
// works end to end.
func TestFacilitatorSettlesOnGeth(t *testing.T) {
	env := newPayEnv(t)
	p, base := env.startFacilitator(t)
	t.Logf("facilitator listening at %s %v after process start", base, time.Since(p.started).Round(time.Millisecond))

	if status, _ := getURL(t, base+"/health"); status != http.StatusOK {
		t.Fatalf("GET /health answered %d", status)
	}
	sup := waitSupported(t, base)
	net := sup.Networks[devNetwork]
	t.Run("supported", func(t *testing.T) {
		if !sup.hasKind(2, devNetwork) {
			t.Errorf("kinds lack (2, exact, %s): %+v", devNetwork, sup.Kinds)
		}
		if !x402.EqualAddress(net.Asset, env.token.addr.Hex()) {
			t.Errorf("asset %s, deployed %s", net.Asset, env.token.addr.Hex())
		}
		// The name is read from the contract at start, never assumed.
		if net.EIP712.Name != tokenName || net.EIP712.Version != tokenVersion {
			t.Errorf("eip712 %+v, contract has %q %q", net.EIP712, tokenName, tokenVersion)
		}
		if net.Decimals != 6 {
			t.Errorf("decimals %d, want 6", net.Decimals)
		}
		if !slices.ContainsFunc(net.Signers, func(s string) bool { return x402.EqualAddress(s, env.signer.Hex()) }) {
			t.Errorf("signers %v lack %s", net.Signers, env.signer.Hex())
		}
	})

	cases := []struct {
		name    string
		version int
		value   int64
	}{
		{"v2", x402.Version2, 12_345},
		{"v1", x402.Version1, 23_456},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			network := devNetwork
			if tc.version == x402.Version1 {
				network = net.V1Network
				if network == "" {
					t.Fatalf("/supported gives %s no v1 name, so v1 payments cannot name it; the CLI must set one for chain 1337 (e.g. %q)", devNetwork, "dev")
				}
				if !sup.hasKind(1, network) {
					t.Errorf("kinds lack (1, exact, %s): %+v", network, sup.Kinds)
				}
			}
			value := big.NewInt(tc.value)
			pay := env.signPayment(t, tc.version, network, value, randomNonce(t))

			vr := mustVerify(t, base, pay.body)
			if !vr.IsValid || !x402.EqualAddress(vr.Payer, env.payer.Hex()) {
				t.Fatalf("verify: %+v", vr)
			}

			payerBefore, merchantBefore := env.token.balanceOf(t, env.payer), env.token.balanceOf(t, env.merchant)
			key := "e2e-" + tc.name + "-" + pay.nonce.Hex()[2:10]
			first := mustSettle(t, base, pay.body, key)
			sr := first.resp
			if first.status != http.StatusOK || first.replayed || !sr.Success {
				t.Fatalf("settle: %d replayed=%v %s", first.status, first.replayed, first.raw)
			}
			if !txHashRE.MatchString(sr.Transaction) || sr.Network != network || sr.Amount != value.String() ||
				!x402.EqualAddress(sr.Payer, env.payer.Hex()) {
				t.Errorf("settle response %s: want a tx hash, network %s, amount %s, payer %s", first.raw, network, value, env.payer.Hex())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rcpt, err := env.chain.waitReceipt(ctx, common.HexToHash(sr.Transaction))
			if err != nil || rcpt.Status != 1 {
				t.Fatalf("receipt of %s: %+v %v", sr.Transaction, rcpt, err)
			}

			checkMoved := func(t *testing.T) {
				t.Helper()
				if d := new(big.Int).Sub(payerBefore, env.token.balanceOf(t, env.payer)); d.Cmp(value) != 0 {
					t.Errorf("payer paid %s, want %s", d, value)
				}
				if d := new(big.Int).Sub(env.token.balanceOf(t, env.merchant), merchantBefore); d.Cmp(value) != 0 {
					t.Errorf("merchant received %s, want %s", d, value)
				}
				if n := env.token.authorizationsUsed(t, env.payer)[pay.nonce]; n != 1 {
					t.Errorf("authorization %s used %d times on chain, want 1", pay.nonce.Hex(), n)
				}
				var inTx int
				for _, tr := range env.token.transfers(t, env.payer, env.merchant) {
					if tr.TxHash == common.HexToHash(sr.Transaction) {
						inTx++
						if tr.Value.Cmp(value) != 0 {
							t.Errorf("transfer of %s in %s, want %s", tr.Value, sr.Transaction, value)
						}
					}
				}
				if inTx != 1 {
					t.Errorf("%d Transfer events in %s, want 1", inTx, sr.Transaction)
				}
			}
			checkMoved(t)

			// Once per body: the same key, no key, and a new key all get the
			// recorded outcome, marked as a replay, and move nothing.
			for _, k := range []string{key, "", key + "-new"} {
				again := mustSettle(t, base, pay.body, k)
				if again.status != http.StatusOK || !again.replayed || again.resp != sr {
					t.Errorf("replay with key %q: %d replayed=%v %s; first was %s", k, again.status, again.replayed, again.raw, first.raw)
				}
			}
			checkMoved(t)

			if vr := mustVerify(t, base, pay.body); vr.IsValid || vr.InvalidReason != x402.ReasonNonceAlreadyUsed {
				t.Errorf("verify after settle: %+v, want invalid %s", vr, x402.ReasonNonceAlreadyUsed)
			}

			// The key is bound to its first body: a different payment under it
			// is refused with 422 and never reaches the chain.
			other := env.signPayment(t, tc.version, network, value, randomNonce(t))
			conflict := mustSettle(t, base, other.body, key)
			if conflict.status != http.StatusUnprocessableEntity || !strings.Contains(conflict.ctype, "problem+json") {
				t.Errorf("key reused with another body: %d %s %s, want a 422 problem", conflict.status, conflict.ctype, conflict.raw)
			}
			if n := env.token.authorizationsUsed(t, env.payer)[other.nonce]; n != 0 {
				t.Errorf("refused payment was settled %d times", n)
			}
		})
	}

	t.Run("ardx pay", func(t *testing.T) {
		for _, version := range []string{"2", "1"} {
			before := env.token.balanceOf(t, env.merchant)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			cmd := exec.CommandContext(ctx, binary(t), "pay", "--facilitator", base, "--network", devNetwork,
				"--to", env.merchant.Hex(), "--amount", "0.01", "--key-file", env.payerKeyFile, "--x402-version", version)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Errorf("ardx pay --x402-version %s: %v\nstdout:\n%s\nstderr:\n%s", version, err, stdout.String(), stderr.String())
				continue
			}
			t.Logf("ardx pay --x402-version %s took %v", version, time.Since(start).Round(time.Millisecond))
			var vr x402.VerifyResponse
			var sr x402.SettleResponse
			if !decodePrinted(stdout.String(), "verify: ", &vr) || !vr.IsValid {
				t.Errorf("ardx pay printed no valid verify answer:\n%s", stdout.String())
			}
			if !decodePrinted(stdout.String(), "settle: ", &sr) || !sr.Success || !txHashRE.MatchString(sr.Transaction) {
				t.Errorf("ardx pay printed no successful settle answer:\n%s", stdout.String())
			}
			if d := new(big.Int).Sub(env.token.balanceOf(t, env.merchant), before); d.Cmp(big.NewInt(10_000)) != 0 {
				t.Errorf("ardx pay 0.01 moved %s units, want 10000", d)
			}
		}
	})
}

// decodePrinted finds the line starting with prefix in out and decodes the
// JSON after it into v.
func decodePrinted(out, prefix string, v any) bool {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return json.Unmarshal([]byte(rest), v) == nil
		}
	}
	return false
}

func getURL(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// crashBody is one payment of the crash test and what was seen of it.
type crashBody struct {
	payment
	key string // Idempotency-Key, on every other body

	mu    sync.Mutex
	acked *x402.SettleResponse // first final outcome a facilitator answered
	sends int
}

// TestFacilitatorSettlesExactlyOnceAcrossKills is the acceptance
// check: 50 distinct signed bodies are settled concurrently while the
// facilitator is SIGKILLed at random moments three times and restarted on
// the same data dir. In the end every body has succeeded, exactly one
// transfer per body is on the chain, no acknowledged outcome changed, and
// every replay returns the recorded outcome.
func TestFacilitatorSettlesExactlyOnceAcrossKills(t *testing.T) {
	const (
		nBodies = 50
		nKills  = 3
	)
	env := newPayEnv(t)
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, 0))
	t.Logf("kill schedule seed %d", seed)

	bodies := make([]*crashBody, nBodies)
	want := new(big.Int)
	for i := range bodies {
		// A distinct amount per body makes each Transfer event attributable.
		b := &crashBody{payment: env.signPayment(t, x402.Version2, devNetwork, big.NewInt(int64(1_000+i)), randomNonce(t))}
		if i%2 == 0 {
			b.key = fmt.Sprintf("crash-%02d", i)
		}
		bodies[i] = b
		want.Add(want, b.value)
	}
	payerBefore, merchantBefore := env.token.balanceOf(t, env.payer), env.token.balanceOf(t, env.merchant)

	client := &http.Client{Timeout: 45 * time.Second}
	start := time.Now()
	var finalBase string
	midFlight := 0 // kills that found bodies not yet settled
	for round := 0; round <= nKills; round++ {
		p, base := env.startFacilitator(t)
		ctx, cancel := context.WithCancel(context.Background())
		wg := settleAll(ctx, client, bodies, base)
		if round < nKills {
			// Kill at a random moment in the first seconds, or earlier when a
			// random share of the remaining bodies has been acknowledged, so
			// on a fast machine too the kill lands while settlements are in
			// flight rather than on an idle process.
			ackedBefore := countAcked(bodies)
			delay := 100*time.Millisecond + time.Duration(rng.Int64N(int64(2400*time.Millisecond)))
			target := ackedBefore + 1 + rng.IntN(max(1, (nBodies-ackedBefore)*3/4))
			if round == 0 {
				// The first kill by time alone, within the first run's
				// way to the chain: receipts come block by block, so a
				// block can acknowledge all the bodies at once, between
				// two looks at the count.
				delay, target = 5*time.Millisecond+time.Duration(rng.Int64N(int64(55*time.Millisecond))), nBodies+1
			}
			killAt := time.Now().Add(delay)
			for time.Now().Before(killAt) && countAcked(bodies) < target {
				time.Sleep(5 * time.Millisecond)
			}
			alive := time.Since(killAt.Add(-delay))
			ackedAtKill := countAcked(bodies)
			killArdx(t, p)
			cancel()
			wg.Wait()
			if ackedAtKill < nBodies {
				midFlight++
			}
			t.Logf("kill %d after %v: %d of %d bodies acknowledged at the kill (%d before this run)",
				round+1, alive.Round(time.Millisecond), ackedAtKill, nBodies, ackedBefore)
			continue
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
			cancel()
			<-done
			t.Fatalf("bodies still not final 3 minutes after the last restart (%d of %d acknowledged); log tail:\n%s",
				countAcked(bodies), nBodies, tailOf(p.log(), 4000))
		}
		cancel()
		finalBase = base
	}
	settled := time.Since(start)

	// Every body succeeded, and its acknowledged outcome is the one recorded.
	var sends int
	for i, b := range bodies {
		sends += b.sends
		if b.acked == nil || !b.acked.Success {
			t.Errorf("body %d (amount %s) did not succeed: %+v", i, b.value, b.acked)
			continue
		}
		again := mustSettle(t, finalBase, b.body, b.key)
		if again.status != http.StatusOK || !again.replayed || again.resp != *b.acked {
			t.Errorf("body %d replay: %d replayed=%v %s; acknowledged %+v", i, again.status, again.replayed, again.raw, *b.acked)
		}
	}

	// Exactly one transfer per body on the chain, matched by nonce and amount.
	used := env.token.authorizationsUsed(t, env.payer)
	transfers := env.token.transfers(t, env.payer, env.merchant)
	perAmount := map[string][]common.Hash{}
	for _, tr := range transfers {
		perAmount[tr.Value.String()] = append(perAmount[tr.Value.String()], tr.TxHash)
	}
	for i, b := range bodies {
		if n := used[b.nonce]; n != 1 {
			t.Errorf("body %d: authorization used %d times on chain, want 1", i, n)
		}
		txs := perAmount[b.value.String()]
		if len(txs) != 1 {
			t.Errorf("body %d: %d Transfer events of %s, want 1", i, len(txs), b.value)
			continue
		}
		if b.acked != nil && txs[0] != common.HexToHash(b.acked.Transaction) {
			t.Errorf("body %d: transfer in %s, facilitator answered %s", i, txs[0].Hex(), b.acked.Transaction)
		}
	}
	if len(transfers) != nBodies || len(used) != nBodies {
		t.Errorf("%d transfers and %d used authorizations on chain for %d bodies", len(transfers), len(used), nBodies)
	}
	if d := new(big.Int).Sub(payerBefore, env.token.balanceOf(t, env.payer)); d.Cmp(want) != 0 {
		t.Errorf("payer paid %s in total, want %s", d, want)
	}
	if d := new(big.Int).Sub(env.token.balanceOf(t, env.merchant), merchantBefore); d.Cmp(want) != 0 {
		t.Errorf("merchant received %s in total, want %s", d, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	signerTxs, err := env.chain.client.NonceAt(ctx, env.signer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if midFlight == 0 {
		t.Errorf("no kill interrupted a settlement: the test did not test a crash")
	}
	t.Logf("crash test: %d bodies, %d kills (%d mid-settlement), %d sends, %d transfers on chain, %d signer transactions, settled in %v, whole test %v",
		nBodies, nKills, midFlight, sends, len(transfers), signerTxs, settled.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// settleUntilFinal posts the body until the facilitator answers a final
// outcome, which it records as acknowledged, or ctx ends (the facilitator
// was killed). The final replay check compares later answers with it.
func (b *crashBody) settleUntilFinal(ctx context.Context, c *http.Client, base string) {
	b.mu.Lock()
	acked := b.acked != nil
	b.mu.Unlock()
	for !acked && ctx.Err() == nil {
		b.mu.Lock()
		b.sends++
		b.mu.Unlock()
		a, err := postSettle(ctx, c, base, b.body, b.key)
		if err == nil && a.final() {
			b.mu.Lock()
			r := a.resp
			b.acked = &r
			b.mu.Unlock()
			return
		}
		// Pending, a connection refused or reset by the kill, or a 5xx:
		// the identical body is safe to send again.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func countAcked(bodies []*crashBody) int {
	n := 0
	for _, b := range bodies {
		b.mu.Lock()
		if b.acked != nil {
			n++
		}
		b.mu.Unlock()
	}
	return n
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestFacilitatorSettleLatencyOnGeth measures /settle against geth --dev,
// one client after another and with several concurrent clients, and logs
// p50/p99. It asserts only that every settlement succeeds: speed targets
// live in benchmarks, never in timed tests.
func TestFacilitatorSettleLatencyOnGeth(t *testing.T) {
	env := newPayEnv(t)
	_, base := env.startFacilitator(t)
	waitSupported(t, base)

	measure := func(t *testing.T, clients, perClient int) {
		pays := make([][]payment, clients)
		for c := range pays {
			for range perClient {
				pays[c] = append(pays[c], env.signPayment(t, x402.Version2, devNetwork, big.NewInt(1_000), randomNonce(t)))
			}
		}
		client := &http.Client{Timeout: 60 * time.Second}
		var mu sync.Mutex
		var lat []time.Duration
		var failures []string
		var wg sync.WaitGroup
		start := time.Now()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, pay := range pays[c] {
					t0 := time.Now()
					a, err := postSettle(context.Background(), client, base, pay.body, "")
					d := time.Since(t0)
					mu.Lock()
					if err != nil || !a.resp.Success {
						failures = append(failures, fmt.Sprintf("%v %d %s", err, a.status, a.raw))
					} else {
						lat = append(lat, d)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		for _, f := range failures {
			t.Errorf("settle failed: %s", f)
		}
		used := env.token.authorizationsUsed(t, env.payer)
		for c := range pays {
			for _, pay := range pays[c] {
				if used[pay.nonce] != 1 {
					t.Errorf("authorization %s used %d times on chain, want 1", pay.nonce.Hex(), used[pay.nonce])
				}
			}
		}
		slices.Sort(lat)
		n := clients * perClient
		t.Logf("settle against geth --dev, %d client(s) x %d: p50 %v, p99 %v, max %v; %.1f settlements/s",
			clients, perClient, percentile(lat, 50).Round(100*time.Microsecond), percentile(lat, 99).Round(100*time.Microsecond),
			percentile(lat, 100).Round(100*time.Microsecond), float64(n)/wall.Seconds())
	}
	t.Run("sequential", func(t *testing.T) { measure(t, 1, 40) })
	t.Run("concurrent", func(t *testing.T) { measure(t, 4, 40) })
}
