//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// The kill-point crash tests: the facilitator kills itself (SIGKILL, via
// ARDX_TEST_CRASH_AT) exactly where a crash costs most: after an intent is
// recorded and before its transaction is sent, after a send and before its
// outcome is recorded, and while start-up reconciliation sends a recorded
// transaction again. After every restart /health must answer within 3 s,
// every body must replay to a final outcome, and the chain must hold
// exactly one Transfer per successful body.

// healthWithin is how soon after a (re)start /health must answer 200.
const healthWithin = 3 * time.Second

// crashTarget is a chain the kill-point test settles on.
type crashTarget struct {
	args []string // `ardx facilitator` arguments
	// sign returns a body paying value to the merchant with a fresh nonce.
	sign func(t *testing.T, value *big.Int) payment
	// transfers returns the amounts of every Transfer to the merchant
	// (after the last process stopped).
	transfers func(t *testing.T) []*big.Int
}

// killPoints are the test's rounds: each start but the last of a round
// dies at its failpoint; the last runs clean.
var killPoints = []struct {
	name    string
	crashes []string // ARDX_TEST_CRASH_AT of the starts that die
}{
	{"before broadcast", []string{"before-broadcast:10"}},
	{"after broadcast", []string{"after-broadcast:10"}},
	{"during start-up reconciliation", []string{"before-broadcast:10", "reconcile:1"}},
}

const bodiesPerKillPoint = 30

var crashClient = &http.Client{Timeout: 45 * time.Second}

func runKillPoints(t *testing.T, target crashTarget) {
	var all []*crashBody
	for round, kp := range killPoints {
		bodies := make([]*crashBody, bodiesPerKillPoint)
		for i := range bodies {
			// A distinct amount per body makes each Transfer attributable.
			bodies[i] = &crashBody{payment: target.sign(t, big.NewInt(int64(10_000+round*100+i)))}
			if i%2 == 0 {
				bodies[i].key = fmt.Sprintf("kill-%d-%02d", round, i)
			}
		}
		all = append(all, bodies...)
		for _, spec := range kp.crashes {
			p, base := startCrashable(t, target.args, spec)
			ctx, cancel := context.WithCancel(context.Background())
			wg := settleAll(ctx, crashClient, bodies, base)
			died := make(chan error, 1)
			go func() { died <- p.cmd.Wait() }()
			select {
			case err := <-died:
				if err == nil || !strings.Contains(err.Error(), "killed") {
					t.Fatalf("%s: the process ended with %v, want killed at %s; log tail:\n%s", kp.name, err, spec, tailOf(p.log(), 3000))
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("%s: failpoint %s never reached; log tail:\n%s", kp.name, spec, tailOf(p.log(), 3000))
			}
			cancel()
			wg.Wait()
			t.Logf("%s: killed at %s with %d of %d bodies acknowledged", kp.name, spec, countAcked(bodies), len(bodies))
		}
		p, base := startCrashable(t, target.args, "")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		settleAll(ctx, crashClient, bodies, base).Wait()
		cancel()
		if n := countAcked(bodies); n != len(bodies) {
			t.Fatalf("%s: %d of %d bodies final after the clean restart; log tail:\n%s", kp.name, n, len(bodies), tailOf(p.log(), 3000))
		}
		for i, b := range bodies {
			again := mustSettle(t, base, b.body, b.key)
			if again.status != http.StatusOK || !again.replayed || again.resp != *b.acked {
				t.Errorf("%s: body %d replay: %d replayed=%v %s; acknowledged %+v", kp.name, i, again.status, again.replayed, again.raw, *b.acked)
			}
		}
		p.stopWithin(t, 5*time.Second)
	}

	// Exactly one Transfer per successful body, none for a failed one.
	perAmount := map[string]int{}
	for _, v := range target.transfers(t) {
		perAmount[v.String()]++
	}
	for i, b := range all {
		want := 0
		if b.acked.Success {
			want = 1
		}
		if got := perAmount[b.value.String()]; got != want {
			t.Errorf("body %d (%s, success %t): %d Transfers on chain, want %d", i, b.value, b.acked.Success, got, want)
		}
		if !b.acked.Success {
			t.Logf("body %d failed: %s %s", i, b.acked.ErrorReason, b.acked.ErrorMessage)
		}
	}
}

// startCrashable starts the facilitator, armed to die at crashAt ("" runs
// clean), and checks /health answers within healthWithin of the start
// (except for a start armed to die during reconciliation).
func startCrashable(t *testing.T, args []string, crashAt string) (*proc, string) {
	t.Helper()
	var env []string
	if crashAt != "" {
		env = []string{"ARDX_TEST_CRASH_AT=" + crashAt}
	}
	p := startArdxEnv(t, env, []string{"facilitator"}, args...)
	base := p.url("facilitator")
	if strings.HasPrefix(crashAt, "reconcile:") {
		// This start dies while it reconciles, which begins as soon as it
		// listens: it may be gone before a first /health. The clean start
		// that follows reconciles the same backlog and is held to
		// healthWithin.
		return p, base
	}
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(p.started) > healthWithin {
			t.Fatalf("/health not 200 within %v of the start (%v); log tail:\n%s", healthWithin, err, tailOf(p.log(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("/health answered %v after the start", time.Since(p.started).Round(time.Millisecond))
	return p, base
}

// settleAll posts every body until it is final or ctx ends.
func settleAll(ctx context.Context, client *http.Client, bodies []*crashBody, base string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.settleUntilFinal(ctx, client, base)
		}()
	}
	return &wg
}

// TestFacilitatorKillPointsOnGeth runs the kill points against geth --dev.
func TestFacilitatorKillPointsOnGeth(t *testing.T) {
	env := newPayEnv(t)
	runKillPoints(t, crashTarget{
		args: env.facilitatorArgs(),
		sign: func(t *testing.T, value *big.Int) payment {
			return env.signPayment(t, x402.Version2, devNetwork, value, randomNonce(t))
		},
		transfers: func(t *testing.T) []*big.Int {
			var out []*big.Int
			for _, tr := range env.token.transfers(t, env.payer, env.merchant) {
				out = append(out, tr.Value)
			}
			return out
		},
	})
}

// TestFacilitatorKillPointsOnEmbeddedDevChain runs the kill points against
// the in-process dev chain, which keeps its state in the data dir: what the
// killed process sent is on the chain the restarted one runs.
func TestFacilitatorKillPointsOnEmbeddedDevChain(t *testing.T) {
	dataDir := t.TempDir()
	args := []string{"facilitator", "--data", dataDir, "--facilitator-addr", "127.0.0.1:0", "--rate-limit", "off"}
	// The first start deploys the token; its address is in /supported.
	p, base := startCrashable(t, args, "")
	var sup struct {
		Networks map[string]struct {
			Asset  string `json:"asset"`
			EIP712 struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"eip712"`
		} `json:"networks"`
	}
	code, body := getURL(t, base+"/supported")
	if code != http.StatusOK || json.Unmarshal(body, &sup) != nil {
		t.Fatalf("/supported: %d %s", code, body)
	}
	dev := sup.Networks[devNetwork]
	p.stopWithin(t, 5*time.Second)
	payer := evm.DevKey("payer")
	merchant := common.HexToAddress("0x00000000000000000000000000000000000e2e01")
	runKillPoints(t, crashTarget{
		args: args,
		sign: func(t *testing.T, value *big.Int) payment {
			nonce := randomNonce(t)
			req := x402.PaymentRequirementsV2{
				Scheme: x402.SchemeExact, Network: devNetwork, Amount: x402.Decimal(value.String()), Asset: dev.Asset,
				PayTo: merchant.Hex(), MaxTimeoutSeconds: 300, Extra: &x402.Extra{Name: dev.EIP712.Name, Version: dev.EIP712.Version},
			}
			r, err := evm.PaymentV2(payer, &x402.ResourceInfo{URL: "http://127.0.0.1/e2e/resource"}, req, evm.PayOptions{Nonce: &nonce})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			return payment{body: raw, nonce: common.Hash(nonce), value: value}
		},
		transfers: func(t *testing.T) []*big.Int {
			d, err := evm.OpenDevChain(context.Background(), nil, filepath.Join(dataDir, "devchain"))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			evs, err := d.Transfers(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			var out []*big.Int
			for _, ev := range evs {
				if ev.To == merchant {
					out = append(out, ev.Value)
				}
			}
			return out
		},
	})
}

// TestFacilitatorStartsWithADeadRPC: one network's RPC does not answer at
// start. The facilitator serves the others at once, lists the dead one as
// unavailable and outside kinds, and settles on the live one.
func TestFacilitatorStartsWithADeadRPC(t *testing.T) {
	env := newPayEnv(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("http://127.0.0.1:%d", port) // nothing listens there
	args := append(env.facilitatorArgs(), "--network", "base-sepolia", "--rpc", "base-sepolia="+dead)
	p, base := startCrashable(t, args, "")
	var sup struct {
		Kinds []struct {
			Network string `json:"network"`
		} `json:"kinds"`
		Networks map[string]struct {
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"networks"`
	}
	code, body := getURL(t, base+"/supported")
	if code != http.StatusOK || json.Unmarshal(body, &sup) != nil {
		t.Fatalf("/supported: %d %s", code, body)
	}
	for _, k := range sup.Kinds {
		if k.Network == "eip155:84532" || k.Network == "base-sepolia" {
			t.Errorf("the dead network is listed in kinds: %s", body)
		}
	}
	if st, ok := sup.Networks["eip155:84532"]; !ok || st.Available || st.Reason == "" {
		t.Errorf("dead network entry = %+v (present %t), want unavailable with a reason", st, ok)
	}
	if st := sup.Networks[devNetwork]; !st.Available {
		t.Errorf("live network unavailable: %s", body)
	}
	pay := env.signPayment(t, x402.Version2, devNetwork, big.NewInt(4242), randomNonce(t))
	if a := mustSettle(t, base, pay.body, ""); !a.resp.Success {
		t.Fatalf("settle on the live network: %s", a.raw)
	}
	p.stopWithin(t, 5*time.Second)
}
