package facilitator_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/screen"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/probe"
)

// fakeProbes answers NetworkAvailability from fixed counts, computing the
// bound with the probe package as the CLI's adapter does.
type fakeProbes struct {
	counts map[string][2]int64 // "network/path" → successes, total
	err    error
}

func (f fakeProbes) NetworkAvailability(network string) ([]facilitator.PathAvailability, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []facilitator.PathAvailability
	for _, path := range []string{facilitator.ProbePathRPC, facilitator.ProbePathSettle} {
		c, ok := f.counts[network+"/"+path]
		if !ok {
			continue
		}
		pa := facilitator.PathAvailability{Path: path, Successes: c[0], Probes: c[1], WindowDays: 30}
		if lb, ok := probe.WilsonLowerBound(c[0], c[1]); ok {
			pa.LowerBound = &lb
		} else {
			pa.Withheld = fmt.Sprintf("%d of the %d probes needed so far", c[1], probe.MinProbes)
		}
		out = append(out, pa)
	}
	return out, nil
}

func withConfig(f func(*facilitator.Config)) envOption {
	return func(c *facilitator.Config, _ *[]settle.Chain) { f(c) }
}

// statusFixedNow is the clock of the status tests.
var statusFixedNow = time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)

// sanctionsFile writes a list of two addresses (and one entry of another
// chain) whose file is three days old at statusFixedNow.
func sanctionsFile(tb testing.TB) *screen.List {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "sanctions.txt")
	body := "# test list\n0x000000000000000000000000000000000000dEaD\n0x1111111111111111111111111111111111111111\nbc1qnotevm\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	mod := statusFixedNow.Add(-72 * time.Hour)
	if err := os.Chtimes(path, mod, mod); err != nil {
		tb.Fatal(err)
	}
	l, err := screen.Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// statusEnv is a facilitator with probes, a sanctions list, an unavailable
// second network and one settlement done.
func statusEnv(tb testing.TB) *testEnv {
	tb.Helper()
	dc := mustDevChain(tb)
	list := sanctionsFile(tb)
	env := newTestEnv(tb,
		withNetwork(unavailable{chainFacts: dc.Network, id: "eip155:84532", v1: "base-sepolia"}),
		withConfig(func(c *facilitator.Config) {
			c.Screening = list
			c.Now = func() time.Time { return statusFixedNow }
			c.Version = "v1.2.3"
			c.Availability = fakeProbes{counts: map[string][2]int64{
				"eip155:1337/rpc":    {95, 100},
				"eip155:1337/settle": {3, 3},
			}}
		}))
	a := do(tb, "POST", env.URL+"/settle", env.payment(tb, 2, 1_000), nil)
	var sr x402.SettleResponse
	a.decode(tb, &sr)
	if !sr.Success {
		tb.Fatalf("settle for the status fixture failed: %s", a.Body)
	}
	return env
}

func TestStatusJSON(t *testing.T) {
	env := statusEnv(t)
	a := do(t, "GET", env.URL+"/status.json", nil, nil)
	if a.Status != 200 || !strings.HasPrefix(a.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %s: %s", a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	var doc facilitator.StatusDocument
	a.decode(t, &doc)

	if doc.Status != "degraded" || doc.Version != "v1.2.3" || !doc.GeneratedAt.Equal(statusFixedNow) {
		t.Fatalf("status %q version %q at %v", doc.Status, doc.Version, doc.GeneratedAt)
	}
	if doc.Method.MinProbes != 5 || doc.Method.Confidence != 0.95 {
		t.Errorf("method %+v", doc.Method)
	}
	if len(doc.Networks) != 2 {
		t.Fatalf("networks %+v", doc.Networks)
	}
	dev, sepolia := doc.Networks[0], doc.Networks[1]

	// The dev network: available, rpc probed enough, settle withheld.
	if dev.Network != "eip155:1337" || !dev.Available || len(dev.Observed) != 2 {
		t.Fatalf("dev network %+v", dev)
	}
	rpc, settlePath := dev.Observed[0], dev.Observed[1]
	want, _ := probe.WilsonLowerBound(95, 100)
	if rpc.Path != "rpc" || rpc.LowerBound == nil || *rpc.LowerBound != want || rpc.Probes != 100 {
		t.Errorf("rpc availability %+v, want bound %v", rpc, want)
	}
	if settlePath.Path != "settle" || settlePath.LowerBound != nil || settlePath.Withheld == "" || settlePath.Probes != 3 {
		t.Errorf("settle availability under five probes must be withheld: %+v", settlePath)
	}
	if dev.Settlements.Succeeded != 1 || dev.Settlements.Failed != 0 {
		t.Errorf("dev settlements %+v, want 1 succeeded", dev.Settlements)
	}

	// The unavailable network: reason shown, never probed, so withheld.
	if sepolia.Available || sepolia.Reason != "rpc unreachable" || sepolia.V1Network != "base-sepolia" {
		t.Errorf("unavailable network %+v", sepolia)
	}
	for _, p := range sepolia.Observed {
		if p.LowerBound != nil || p.Withheld == "" {
			t.Errorf("a network without probes shows a bound: %+v", p)
		}
	}

	if doc.Settlements.Succeeded != 1 {
		t.Errorf("total settlements %+v", doc.Settlements)
	}
	sc := doc.Screening
	if !sc.Enabled || sc.Size != 2 || sc.Ignored != 1 || sc.AgeSeconds == nil || *sc.AgeSeconds != 72*3600 || sc.LoadedAt == nil || sc.SHA256 == "" {
		t.Errorf("screening %+v", sc)
	}
}

func TestStatusWithoutProbesOrScreening(t *testing.T) {
	env := newTestEnv(t, withConfig(func(c *facilitator.Config) {
		c.Availability = fakeProbes{err: errors.New("disk on fire")}
	}))
	var doc facilitator.StatusDocument
	do(t, "GET", env.URL+"/status.json", nil, nil).decode(t, &doc)
	if doc.Status != "ok" || doc.Screening.Enabled || doc.Version != "dev" {
		t.Fatalf("doc %+v", doc)
	}
	// A counter read error shows withheld figures, never a made-up bound.
	for _, p := range doc.Networks[0].Observed {
		if p.LowerBound != nil || p.Withheld == "" {
			t.Fatalf("observed %+v", p)
		}
	}
}

func TestStatusPage(t *testing.T) {
	env := statusEnv(t)
	a := do(t, "GET", env.URL+"/status", nil, map[string]string{"Accept": "text/html"})
	if a.Status != 200 || a.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d %q", a.Status, a.Header.Get("Content-Type"))
	}
	page := string(a.Body)
	want, _ := probe.WilsonLowerBound(95, 100)
	for _, s := range statusFigures(want) {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, banned := range []string{"<script", "<link", "src=\"http", "href=\"http://", "@import"} {
		if strings.Contains(page, banned) {
			t.Errorf("page loads external assets or scripts: %q", banned)
		}
	}
}

// statusFigures are the strings the status page must show for statusEnv.
func statusFigures(rpcBound float64) []string {
	return []string{
		"eip155:1337", "eip155:84532", "rpc unreachable", "degraded",
		fmt.Sprintf("at least %d%% with 95%% confidence, 95 of 100 ok", int(rpcBound*100)), // 88%
		"withheld, 3 of 3 ok",
		"3 days", // sanctions list age
		"v1.2.3",
	}
}

// TestStatusPageInChromium renders /status in headless Chromium (Debian's
// package "chromium"), takes a screenshot and checks the rendered DOM shows
// the figures. TestPagesReadableInChromium checks its contrast.
func TestStatusPageInChromium(t *testing.T) {
	bin := pagecheck.Browser(t)
	env := statusEnv(t)
	shot := filepath.Join(t.TempDir(), "status.png")
	if out := os.Getenv("ARDX_STATUS_SCREENSHOT"); out != "" {
		shot = out
	}
	dom := pagecheck.Run(t, bin, "--dump-dom", env.URL+"/status")
	want, _ := probe.WilsonLowerBound(95, 100)
	for _, s := range statusFigures(want) {
		if !strings.Contains(dom, s) {
			t.Errorf("rendered page lacks %q", s)
		}
	}
	pagecheck.Run(t, bin, "--screenshot="+shot, env.URL+"/status")
	st, err := os.Stat(shot)
	if err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %d): the page did not render", shot, err, sizeOf(st))
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}
