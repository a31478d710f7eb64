//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// The official clients live in e2e/npm: package.json pins them exactly and
// package-lock.json is committed, so `npm ci` installs the same tree on
// every machine.
var (
	npmOnce sync.Once
	npmErr  error
	npmTook time.Duration
)

// npmDir returns e2e/npm with its node_modules installed by `npm ci` (once
// per test binary). Without node or npm the test fails under CI=true and is
// skipped, loudly, elsewhere; a failing `npm ci` always fails.
//
// ARDX_E2E_NPM_CI=skip reuses an existing node_modules, for a developer
// rerunning the tier; it is never set in CI.
func npmDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(moduleRoot(), "e2e", "npm")
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s is not installed: the official x402 and MCP clients cannot run (install Node.js >= 20 with npm)", tool)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip("SKIPPING (not CI): " + msg)
		}
	}
	npmOnce.Do(func() {
		if os.Getenv("ARDX_E2E_NPM_CI") == "skip" {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
				return
			}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, tailOf(string(out), 4000))
			return
		}
		npmTook = time.Since(start)
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	if npmTook > 0 {
		t.Logf("npm ci installed the official clients in %v", npmTook.Round(time.Millisecond))
		npmTook = 0
	}
	return dir
}

// runNode runs `node script args...` in e2e/npm and decodes the one JSON
// line it prints on stdout into v. A script that fails still prints its
// JSON (with "error"), which the failure shows.
func runNode(t *testing.T, dir, script string, v any, args ...string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, tailOf(stdout.String(), 4000), tailOf(stderr.String(), 4000))
	}
	line := bytes.TrimSpace(stdout.Bytes())
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal(line, v); err != nil {
		t.Fatalf("node %s printed no JSON result (%v): %s\nstderr: %s", script, err, stdout.Bytes(), tailOf(stderr.String(), 4000))
	}
	return took
}

// echoEnv is a payEnv whose facilitator also runs the echo merchant on the
// dev chain, with a funded operator wallet that is payTo and refunds.
type echoEnv struct {
	*payEnv
	wallet     common.Address
	walletFile string
	proc       *proc
	base       string
	sup        supportedDoc
}

// echoFlags are the flags the echo merchant needs; requireFlags checks the
// binary has them so a missing flag fails with its name instead of a
// process that exits before it listens.
var echoFlags = []string{"--echo-network", "--echo-wallet-key-file"}

func requireFlags(t *testing.T, sub string, flags ...string) {
	t.Helper()
	out, err := exec.Command(binary(t), sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("ardx %s --help: %v\n%s", sub, err, out)
	}
	for _, f := range flags {
		if !bytes.Contains(out, []byte(f+" ")) {
			t.Fatalf("ardx %s has no %s flag; --help:\n%s", sub, f, out)
		}
	}
}

// newEchoEnv starts geth with the token, funds an echo wallet with 1 ETH of
// gas money, starts `ardx facilitator` with /echo on the dev chain and waits
// until /supported lists the chain and /echo/status says serving.
func newEchoEnv(t *testing.T) *echoEnv {
	t.Helper()
	requireFlags(t, "facilitator", echoFlags...)
	e := &echoEnv{payEnv: newPayEnv(t)}
	key, addr := newKey(t)
	e.wallet, e.walletFile = addr, writeKeyFile(t, key)
	e.chain.fundETH(t, addr, ether(1))

	args := append(e.facilitatorArgs(), "--echo-network", devNetwork, "--echo-wallet-key-file", e.walletFile)
	e.proc = startArdx(t, []string{"facilitator"}, args...)
	e.base = e.proc.url("facilitator")
	e.sup = waitSupported(t, e.base)
	st := e.waitEchoServing(t)
	if st.Network != devNetwork || !x402.EqualAddress(st.PayTo, addr.Hex()) || !x402.EqualAddress(st.Asset, e.token.addr.Hex()) {
		t.Fatalf("/echo/status %+v: want network %s, payTo %s (the echo wallet), asset %s", st, devNetwork, addr.Hex(), e.token.addr.Hex())
	}
	if st.Amount != echoAmount.String() {
		t.Fatalf("/echo/status amount %q, want %s (0.001 USD at 6 decimals)", st.Amount, echoAmount)
	}
	return e
}

// echoAmount is the echo's price, 0.001 USD, in the test token's smallest
// unit (6 decimals).
var echoAmount = big.NewInt(1000)

// echoStatusDoc is the part of GET /echo/status the tier reads.
type echoStatusDoc struct {
	Serving bool   `json:"serving"`
	Reason  string `json:"reason"`
	Network string `json:"network"`
	Amount  string `json:"amount"`
	Asset   string `json:"asset"`
	PayTo   string `json:"payTo"`
}

func (e *echoEnv) waitEchoServing(t *testing.T) echoStatusDoc {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, raw := getURL(t, e.base+"/echo/status")
		var st echoStatusDoc
		if status != http.StatusOK || json.Unmarshal(raw, &st) != nil {
			t.Fatalf("GET /echo/status answered %d %s", status, raw)
		}
		if st.Serving {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("/echo not serving after 20 s: %s\nlog:\n%s", raw, tailOf(e.proc.log(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// payResult is what pay-echo-v1.mjs and pay-echo-v2.mjs print.
type payResult struct {
	Error           string            `json:"error"`
	Payer           string            `json:"payer"`
	NetworkShim     []string          `json:"networkShim"`
	Status          int               `json:"status"`
	Body            json.RawMessage   `json:"body"`
	Headers         map[string]string `json:"headers"`
	PaymentResponse *struct {
		Success     bool   `json:"success"`
		ErrorReason string `json:"errorReason"`
		Transaction string `json:"transaction"`
		Network     string `json:"network"`
		Payer       string `json:"payer"`
	} `json:"paymentResponse"`
	Exchanges []struct {
		Method string          `json:"method"`
		URL    string          `json:"url"`
		Sent   map[string]bool `json:"sent"`
		Status int             `json:"status"`
	} `json:"exchanges"`
	ElapsedMs float64 `json:"elapsedMs"`
}

// echoBody is the part of a paid /echo body the tier checks.
type echoBody struct {
	Echo struct {
		Method      string `json:"method"`
		Path        string `json:"path"`
		X402Version int    `json:"x402Version"`
	} `json:"echo"`
	Paid struct {
		Success     bool   `json:"success"`
		Network     string `json:"network"`
		Amount      string `json:"amount"`
		Payer       string `json:"payer"`
		Transaction string `json:"transaction"`
		Refund      struct {
			Status      string `json:"status"`
			Transaction string `json:"transaction"`
			Amount      string `json:"amount"`
			Error       string `json:"error"`
		} `json:"refund"`
	} `json:"paid"`
}

// TestOfficialClientsPayEcho is the end-to-end check of /echo with
// the official clients against geth --dev: @x402/fetch + @x402/evm (v2,
// PAYMENT-SIGNATURE) and the legacy x402-fetch (v1, X-PAYMENT) each get a
// 402, pay, get 200 with a decodable settlement header naming a mined
// transfer, and the refund leaves the payer's balance where it was. The
// official MCP client then lists and calls the facilitator's four tools.
func TestOfficialClientsPayEcho(t *testing.T) {
	dir := npmDir(t)
	e := newEchoEnv(t)
	payerKey := hex.EncodeToString(crypto.FromECDSA(e.payerKey))
	chainID := e.chain.chainID.String()

	v1Name := e.sup.Networks[devNetwork].V1Network
	cases := []struct {
		name, script        string
		version             int
		wantNetwork         string
		sentHeader, respHdr string
		args                []string
	}{
		{"v2 @x402/fetch", "pay-echo-v2.mjs", x402.Version2, devNetwork, x402.HeaderPaymentSignature, x402.HeaderPaymentResponse,
			[]string{e.base + "/echo", payerKey, e.chain.rpcURL, chainID, e.token.addr.Hex()}},
		{"v1 x402-fetch", "pay-echo-v1.mjs", x402.Version1, v1Name, x402.HeaderXPayment, x402.HeaderXPaymentResponse,
			[]string{e.base + "/echo", payerKey, e.chain.rpcURL, chainID, v1Name}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantNetwork == "" {
				t.Fatalf("/supported gives %s no v1 name; the legacy client needs one", devNetwork)
			}
			payerBefore, walletBefore := e.token.balanceOf(t, e.payer), e.token.balanceOf(t, e.wallet)
			gasBefore := e.ethBalance(t, e.wallet)

			var res payResult
			took := runNode(t, dir, tc.script, &res, tc.args...)
			t.Logf("paid /echo round trip (client request to %d): %.0f ms; node process %v", res.Status, res.ElapsedMs, took.Round(time.Millisecond))
			if len(res.NetworkShim) > 0 {
				t.Logf("x402 1.2.0 network tables extended with %q: %v", tc.wantNetwork, res.NetworkShim)
			}
			if res.Error != "" || res.Status != http.StatusOK {
				t.Fatalf("%s: status %d error %s\nbody %s\nexchanges %+v\nfacilitator log:\n%s",
					tc.script, res.Status, res.Error, res.Body, res.Exchanges, tailOf(e.proc.log(), 3000))
			}
			if !x402.EqualAddress(res.Payer, e.payer.Hex()) {
				t.Fatalf("script paid as %s, want %s", res.Payer, e.payer.Hex())
			}
			// The client's own record: the unpaid request met 402, the retry
			// carried the version's payment header and got 200.
			if n := len(res.Exchanges); n != 2 ||
				res.Exchanges[0].Status != http.StatusPaymentRequired || len(res.Exchanges[0].Sent) != 0 ||
				!res.Exchanges[1].Sent[tc.sentHeader] || res.Exchanges[1].Status != http.StatusOK {
				t.Errorf("exchanges %+v: want 402 unpaid, then 200 with %s", res.Exchanges, tc.sentHeader)
			}
			if res.Headers[strings.ToLower(tc.respHdr)] == "" {
				t.Errorf("200 without %s; headers %v", tc.respHdr, res.Headers)
			}

			pr := res.PaymentResponse
			if pr == nil || !pr.Success || pr.Network != tc.wantNetwork || !txHashRE.MatchString(pr.Transaction) ||
				!x402.EqualAddress(pr.Payer, e.payer.Hex()) {
				t.Fatalf("decoded %s %+v: want success on %s by %s with a tx hash", tc.respHdr, pr, tc.wantNetwork, e.payer.Hex())
			}

			var body echoBody
			if err := json.Unmarshal(res.Body, &body); err != nil {
				t.Fatalf("paid /echo body %s: %v", res.Body, err)
			}
			if body.Echo.X402Version != tc.version || body.Echo.Path != "/echo" || !body.Paid.Success ||
				body.Paid.Transaction != pr.Transaction || body.Paid.Amount != echoAmount.String() {
				t.Errorf("paid /echo body %s: want x402Version %d, path /echo, the settlement %s of %s",
					res.Body, tc.version, pr.Transaction, echoAmount)
			}
			if body.Paid.Refund.Status != "refunded" || !txHashRE.MatchString(body.Paid.Refund.Transaction) ||
				body.Paid.Refund.Amount != echoAmount.String() {
				t.Fatalf("refund %+v: want refunded with a tx hash, amount %s", body.Paid.Refund, echoAmount)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			settleTx, refundTx := common.HexToHash(pr.Transaction), common.HexToHash(body.Paid.Refund.Transaction)
			for _, h := range []common.Hash{settleTx, refundTx} {
				rcpt, err := e.chain.waitReceipt(ctx, h)
				if err != nil || rcpt.Status != 1 {
					t.Fatalf("receipt of %s: %+v %v", h.Hex(), rcpt, err)
				}
			}
			// On the chain: one payment of the price into the echo wallet in
			// the settlement, one refund of it back in the refund.
			if got := transfersIn(e.token.transfers(t, e.payer, e.wallet), settleTx); len(got) != 1 || got[0].Cmp(echoAmount) != 0 {
				t.Errorf("payer->echo wallet transfers in %s: %v, want one of %s", settleTx.Hex(), got, echoAmount)
			}
			if got := transfersIn(e.token.transfers(t, e.wallet, e.payer), refundTx); len(got) != 1 || got[0].Cmp(echoAmount) != 0 {
				t.Errorf("echo wallet->payer transfers in %s: %v, want one of %s", refundTx.Hex(), got, echoAmount)
			}
			if got := e.token.balanceOf(t, e.payer); got.Cmp(payerBefore) != 0 {
				t.Errorf("payer holds %s after the refund, held %s before", got, payerBefore)
			}
			if got := e.token.balanceOf(t, e.wallet); got.Cmp(walletBefore) != 0 {
				t.Errorf("echo wallet holds %s after the refund, held %s before", got, walletBefore)
			}
			// The operator's wallet paid the refund's gas (the payer holds no
			// ether at all, so it cannot have).
			if gasAfter := e.ethBalance(t, e.wallet); gasAfter.Cmp(gasBefore) >= 0 {
				t.Errorf("echo wallet ether %s -> %s: the refund's gas was not paid from it", gasBefore, gasAfter)
			}
		})
	}

	t.Run("mcp @modelcontextprotocol/sdk", func(t *testing.T) {
		checkMCPClient(t, dir, e.base)
	})
	t.Run("bazaar @x402/extensions", func(t *testing.T) {
		checkBazaarClient(t, dir, e.base)
	})
	// The stateless server offers no SSE stream and no session to end: GET
	// and DELETE /mcp are 405 problems, never 404 (a client falls back on
	// 405 but reports 404 as "no MCP server here").
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method+" /mcp", func(t *testing.T) {
			req, _ := http.NewRequest(method, e.base+"/mcp", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Content-Type"), "application/problem+json") ||
				!strings.Contains(resp.Header.Get("Allow"), http.MethodPost) {
				t.Errorf("%s /mcp: %d %q Allow %q, want a 405 problem allowing POST", method, resp.StatusCode,
					resp.Header.Get("Content-Type"), resp.Header.Get("Allow"))
			}
		})
	}
}

// ethBalance returns addr's ether balance in wei.
func (e *echoEnv) ethBalance(t *testing.T, addr common.Address) *big.Int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := e.chain.client.BalanceAt(ctx, addr, nil)
	if err != nil {
		t.Fatalf("ether balance of %s: %v", addr.Hex(), err)
	}
	return b
}

// transfersIn returns the values of the transfers made in tx.
func transfersIn(trs []transferLog, tx common.Hash) []*big.Int {
	var vs []*big.Int
	for _, tr := range trs {
		if tr.TxHash == tx {
			vs = append(vs, tr.Value)
		}
	}
	return vs
}

// mcpResult is what mcp-client.mjs prints.
type mcpResult struct {
	Error      string `json:"error"`
	ServerInfo *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	Calls map[string]mcpCall `json:"calls"`
}

// mcpCall is one tools/call result as the SDK returns it, or the protocol
// error the script caught.
type mcpCall struct {
	Arguments         map[string]any  `json:"arguments"`
	ProtocolError     string          `json:"protocolError"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Content           []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// text is every text content of the call, joined, plus the structured
// content, which is what a model reading the result sees.
func (c mcpCall) text() string {
	var b strings.Builder
	for _, ct := range c.Content {
		b.WriteString(ct.Text)
		b.WriteByte('\n')
	}
	b.Write(c.StructuredContent)
	return b.String()
}

// mcpTools are the facilitator's MCP tools and what each result must say
// after the echo payments above: facts a working tool cannot leave out.
var mcpTools = []struct {
	name string
	want func(base string) []string
}{
	{"facilitator_status", func(string) []string { return []string{devNetwork} }},
	{"settlement_price", func(string) []string { return []string{devNetwork} }},
	// The echo's settlements declare the bazaar extension, so the catalogue
	// holds /echo by now.
	{"find_paid_resource", func(base string) []string { return []string{base + "/echo"} }},
	{"integration_snippet", func(base string) []string { return []string{"@x402/express", base} }},
}

// checkMCPClient runs the official MCP client against POST /mcp: the four
// tools are listed and each call returns a non-error result that says what
// it must.
func checkMCPClient(t *testing.T, dir, base string) {
	t.Helper()
	var res mcpResult
	took := runNode(t, dir, "mcp-client.mjs", &res, base+"/mcp")
	t.Logf("MCP client: connect, list and four calls in %v (node process)", took.Round(time.Millisecond))
	if res.Error != "" {
		t.Fatalf("mcp-client.mjs: %s", res.Error)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name == "" {
		t.Errorf("initialize gave no server info: %+v", res.ServerInfo)
	}
	var listed []string
	for _, tl := range res.Tools {
		listed = append(listed, tl.Name)
		if tl.Description == "" {
			t.Errorf("tool %s has no description", tl.Name)
		}
	}
	for _, tool := range mcpTools {
		t.Run(tool.name, func(t *testing.T) {
			if !slices.Contains(listed, tool.name) {
				t.Fatalf("tools/list %v lacks %s", listed, tool.name)
			}
			call, ok := res.Calls[tool.name]
			switch {
			case !ok:
				t.Fatalf("the script did not call %s", tool.name)
			case call.ProtocolError != "":
				t.Fatalf("tools/call %s: %s", tool.name, call.ProtocolError)
			case call.IsError:
				t.Fatalf("tools/call %s returned an error result: %s", tool.name, call.text())
			case len(call.Content) == 0:
				t.Fatalf("tools/call %s returned no content", tool.name)
			}
			got := call.text()
			flat := strings.Join(strings.Fields(got), " ")
			t.Logf("%s(%v): %.300s", tool.name, call.Arguments, flat)
			for _, w := range tool.want(base) {
				if !strings.Contains(got, w) {
					t.Errorf("%s result lacks %q:\n%s", tool.name, w, tailOf(got, 2000))
				}
			}
		})
	}
}

// bazaarResult is what bazaar-client.mjs prints: the official client's
// listResources and search answers, decoded by the client itself.
type bazaarResult struct {
	List struct {
		X402Version int `json:"x402Version"`
		Items       []struct {
			Resource string `json:"resource"`
		} `json:"items"`
	} `json:"list"`
	Search struct {
		X402Version int `json:"x402Version"`
		Resources   []struct {
			Resource   string         `json:"resource"`
			Extensions map[string]any `json:"extensions"`
		} `json:"resources"`
		PartialResults *bool `json:"partialResults"`
		Pagination     *struct {
			Limit  int     `json:"limit"`
			Cursor *string `json:"cursor"`
		} `json:"pagination"`
	} `json:"search"`
	Error string `json:"error"`
}

// checkBazaarClient runs the official bazaar client (withBazaar, 2.27.0)
// against the facilitator: the echo its payments catalogued is listed and
// found by GET /discovery/search, in the shape the client reads.
func checkBazaarClient(t *testing.T, dir, base string) {
	t.Helper()
	var res bazaarResult
	runNode(t, dir, "bazaar-client.mjs", &res, base, "echo")
	if res.Error != "" {
		t.Fatalf("bazaar-client.mjs: %s", res.Error)
	}
	listed := false
	for _, it := range res.List.Items {
		listed = listed || it.Resource == base+"/echo"
	}
	if res.List.X402Version != 2 || !listed {
		t.Errorf("listResources does not list %s/echo: %+v", base, res.List)
	}
	s := res.Search
	if s.X402Version != 2 || s.PartialResults == nil || s.Pagination == nil || s.Pagination.Limit != 1 || len(s.Resources) != 1 ||
		s.Resources[0].Resource != base+"/echo" || s.Resources[0].Extensions["bazaar"] == nil {
		t.Errorf("search(echo) = %+v", s)
	}
}
