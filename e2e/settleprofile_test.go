//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// settleProfile is the env var that turns TestSettleProfileOnGeth on.
const settleProfile = "ARDX_E2E_SETTLE_PROFILE"

// TestSettleProfileOnGeth shows where a settlement's time goes on geth
// --dev: two rounds of 800 fresh payments from 32 payers, 8 closed-loop
// clients, ardx alone on the chain. Each round logs its rate and latency,
// the round's change in the settlement stage and RPC metrics (from
// /metrics), the CPU seconds ardx and geth spent per settlement (from
// /proc) and the settlements per block geth sealed, then checks exactly
// one Transfer per successful settle. Nothing is asserted about speed
// (DESIGN: speed targets live in benchmarks).
func TestSettleProfileOnGeth(t *testing.T) {
	if os.Getenv(settleProfile) != "1" {
		t.Skipf("set %s=1 to profile the settle path on geth --dev (about a minute)", settleProfile)
	}
	env := newPayEnv(t)
	p := startArdx(t, []string{"facilitator"}, env.facilitatorArgs()...)
	url := p.url("facilitator")
	waitSupported(t, url)
	payers := make([]benchPayer, 32)
	for i := range payers {
		payers[i].key, payers[i].addr = newKey(t)
		env.token.mint(t, payers[i].addr, big.NewInt(1_000_000_000_000))
	}
	value := big.NewInt(1000)
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	ctx := context.Background()
	settleOK := func(status int, raw []byte) (common.Hash, bool) {
		var sr x402.SettleResponse
		if status != http.StatusOK || json.Unmarshal(raw, &sr) != nil || !sr.Success {
			return common.Hash{}, false
		}
		return common.HexToHash(sr.Transaction), true
	}
	for round := 0; round < 2; round++ {
		_, merchant := newKey(t)
		next := env.settleFeed(t, payers, merchant, value, 800)
		before := scrape(t, url)
		c0a, c0g := cpuOf(p.cmd.Process.Pid), cpuOf(env.chain.cmd.Process.Pid)
		b0, err := env.chain.client.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := closedLoop(ctx, hc, url+"/settle", 8, 60*time.Second, next, settleOK)
		after := scrape(t, url)
		c1a, c1g := cpuOf(p.cmd.Process.Pid), cpuOf(env.chain.cmd.Process.Pid)
		b1, err := env.chain.client.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("CPU per settle: ardx %.2f ms, geth %.2f ms; %.2f settles per block", (c1a-c0a)*1000/float64(r.ok), (c1g-c0g)*1000/float64(r.ok), float64(r.ok)/float64(max(b1-b0, 1)))
		t.Logf("round %d: %d ok %d failed in %v: %.1f/s p50 %v p99 %v first failure %s", round, r.ok, r.failed, r.elapsed, r.rate(), percentile(r.latencies, 50), percentile(r.latencies, 99), r.firstFailure)
		if r.failed > 0 {
			t.Errorf("round %d: %d of %d settles failed; first: %s", round, r.failed, r.ok+r.failed, r.firstFailure)
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(after)) {
			d := after[k] - before[k]
			if d != 0 && (strings.Contains(k, "ardx_rpc_") || strings.Contains(k, "ardx_settle_")) {
				b.WriteString(k + " " + strconv.FormatFloat(d, 'f', 4, 64) + "\n")
			}
		}
		t.Logf("round %d metrics (change over the round):\n%s", round, b.String())
		checkExactlyOnce(t, env, payers, merchant, value, r)
	}
}

// scrape reads a /metrics page into sample → value, without histogram
// buckets.
func scrape(t *testing.T, url string) map[string]float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "_bucket") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// cpuOf returns the CPU seconds (user + system) process pid has used, 0 if
// unreadable (not Linux).
func cpuOf(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}
