package registry_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/access/x402pay"
	"github.com/ardx-dev/ardx/registry/access/x402pay/x402paytest"
	"github.com/ardx-dev/ardx/web"
)

type startAnswer struct {
	Minted       struct{ Key string } `json:"key"`
	Account      string
	TrialGranted bool
	TrialNote    string
	Monitoring   struct {
		Domain, State string
		TrialEnd      *time.Time
	}
	CreditsBalance int64
}

func (f *fixture) start(tb testing.TB, key, body string) startAnswer {
	tb.Helper()
	status, _, b := f.send(tb, http.MethodPost, "/monitoring/start", key, body, nil)
	if status != 200 {
		tb.Fatalf("POST /monitoring/start %s: %d %s", body, status, b)
	}
	var a startAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		tb.Fatal(err)
	}
	return a
}

func newMonitoringServer(tb testing.TB, now func() time.Time, pay registry.PaymentsConfig) *fixture {
	return newTestServer(tb, registry.Config{Now: now, MonitorInterval: -1, Payments: pay}, nil)
}

// TestMonitoringRoutes: a keyless start mints a key shown once and grants
// the domain's trial; another account's start gets no trial and pauses
// without credits; mine and stop need the key.
func TestMonitoringRoutes(t *testing.T) {
	f := newMonitoringServer(t, nil, registry.PaymentsConfig{})
	first := f.start(t, "", `{"domain":"Example.COM"}`)
	if !strings.HasPrefix(first.Minted.Key, "ardx_") || !first.TrialGranted || first.Monitoring.State != "trial" || first.Monitoring.Domain != "example.com" || first.Monitoring.TrialEnd == nil {
		t.Fatalf("first start: %+v", first)
	}
	again := f.start(t, first.Minted.Key, `{"domain":"example.com"}`)
	if again.Minted.Key != "" || again.Account != first.Account || again.Monitoring.State != "trial" {
		t.Fatalf("start with the key: %+v", again)
	}
	second := f.start(t, "", `{"domain":"example.com"}`)
	if second.Minted.Key == "" || second.Account == first.Account || second.TrialGranted || second.TrialNote == "" || second.Monitoring.State != "paused" {
		t.Fatalf("another account's start: %+v", second)
	}

	tests := []struct {
		name, method, path, key, body string
		want                          int
	}{
		{"mine without a key", http.MethodGet, "/monitoring/mine", "", "", 401},
		{"mine with a wrong key", http.MethodGet, "/monitoring/mine", "ardx_0000000000000000_" + strings.Repeat("A", 43), "", 401},
		{"stop without a key", http.MethodPost, "/monitoring/stop", "", `{"domain":"example.com"}`, 401},
		{"stop of a domain not monitored", http.MethodPost, "/monitoring/stop", first.Minted.Key, `{"domain":"other.example"}`, 404},
		{"start without a domain", http.MethodPost, "/monitoring/start", "", `{}`, 422},
		{"start with a bad domain", http.MethodPost, "/monitoring/start", "", `{"domain":"not a domain"}`, 422},
		{"start with an unknown member", http.MethodPost, "/monitoring/start", "", `{"domain":"example.com","plan":"gold"}`, 422},
		{"start with a bad webhook", http.MethodPost, "/monitoring/start", "", `{"domain":"example.com","webhook":"ftp://x.example/"}`, 422},
		{"stop with a webhook", http.MethodPost, "/monitoring/stop", first.Minted.Key, `{"domain":"example.com","webhook":"https://x.example/"}`, 422},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := f.send(t, tc.method, tc.path, tc.key, tc.body, nil)
			if status != tc.want {
				t.Fatalf("%d %s, want %d", status, b, tc.want)
			}
			if status == 422 && strings.Contains(string(b), `"key"`) {
				t.Fatalf("a refused start minted a key: %s", b)
			}
		})
	}

	status, _, b := f.send(t, http.MethodGet, "/monitoring/mine", first.Minted.Key, "", nil)
	var mine struct {
		Items []struct{ Domain, State string }
	}
	if status != 200 || json.Unmarshal(b, &mine) != nil || len(mine.Items) != 1 || mine.Items[0].State != "trial" {
		t.Fatalf("mine: %d %s", status, b)
	}
	status, _, b = f.send(t, http.MethodPost, "/monitoring/stop", first.Minted.Key, `{"domain":"example.com"}`, nil)
	if status != 200 || !strings.Contains(string(b), `"state":"stopped"`) {
		t.Fatalf("stop: %d %s", status, b)
	}
	// Stopped is kept, not deleted.
	_, _, b = f.send(t, http.MethodGet, "/monitoring/mine", first.Minted.Key, "", nil)
	if !strings.Contains(string(b), `"state":"stopped"`) {
		t.Fatalf("mine after stop: %s", b)
	}
}

// TestFeedWindowLiftedByMonitoring: changes older than the free 24 hours
// are refused to anonymous callers and to keys that do not monitor the
// publisher, and served to the key that monitors it.
func TestFeedWindowLiftedByMonitoring(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	f := newMonitoringServer(t, func() time.Time { return now }, registry.PaymentsConfig{})
	if _, err := f.db.AppendChanges([]kv.Change{{Time: now.Add(-72 * time.Hour), Kind: kv.ChangeAdded, ID: "urn:air:example.com:old", Publisher: "example.com"}}); err != nil {
		t.Fatal(err)
	}
	owner := f.start(t, "", `{"domain":"example.com"}`)
	other := f.start(t, "", `{"domain":"other.example"}`)
	since := now.Add(-96 * time.Hour).Format(time.RFC3339)
	path := "/feed/changes?publisher=example.com&since=" + since
	for _, tc := range []struct {
		name, key string
		want      int
	}{{"anonymous", "", 401}, {"a key monitoring another domain", other.Minted.Key, 401}, {"the monitoring key", owner.Minted.Key, 200}} {
		status, _, b := f.send(t, http.MethodGet, path, tc.key, "", nil)
		if status != tc.want {
			t.Fatalf("%s: %d %s", tc.name, status, b)
		}
		if status == 200 && !strings.Contains(string(b), "urn:air:example.com:old") {
			t.Fatalf("%s: the old change is missing: %s", tc.name, b)
		}
	}
	if status, _, b := f.send(t, http.MethodGet, "/feed/changes?publisher=example.com&limit=500", owner.Minted.Key, "", nil); status != 200 {
		t.Fatalf("a large page for the monitoring key: %d %s", status, b)
	}
	if status, _, _ := f.send(t, http.MethodGet, "/feed/changes?limit=500", owner.Minted.Key, "", nil); status != 401 {
		t.Fatalf("a large page of the whole feed: %d, want 401", status)
	}
}

// TestCreditsRoute: POST /credits is an x402 resource: 402 with terms, then
// a paid retry that credits the account once and resumes its paused
// monitoring.
func TestCreditsRoute(t *testing.T) {
	fac := x402paytest.New(t)
	f := newMonitoringServer(t, nil, registry.PaymentsConfig{FacilitatorURL: fac.URL, Network: x402paytest.Network, PayTo: x402paytest.PayTo})
	f.start(t, "", `{"domain":"example.com"}`) // takes the trial
	buyer := f.start(t, "", `{"domain":"example.com"}`)
	if buyer.Monitoring.State != "paused" {
		t.Fatalf("no trial, no credits: %+v", buyer)
	}
	if status, _, _ := f.send(t, http.MethodPost, "/credits", "", `{"credits":20000}`, nil); status != 401 {
		t.Fatalf("keyless purchase: %d", status)
	}
	if status, _, _ := f.send(t, http.MethodPost, "/credits", buyer.Minted.Key, `{"credits":0}`, nil); status != 422 {
		t.Fatalf("zero credits: %d", status)
	}
	status, hdr, _ := f.send(t, http.MethodPost, "/credits", buyer.Minted.Key, `{"credits":20000}`, nil)
	if status != 402 {
		t.Fatalf("unpaid: %d", status)
	}
	raw, _ := base64.StdEncoding.DecodeString(hdr.Get("PAYMENT-REQUIRED"))
	var pr x402pay.PaymentRequired
	if err := json.Unmarshal(raw, &pr); err != nil || len(pr.Accepts) != 1 || pr.Accepts[0].Amount != "20000000" || pr.Resource.URL != publicURL+"/credits" {
		t.Fatalf("terms: %s %v", raw, err)
	}
	payment := signedFor(t, pr)
	status, hdr, b := f.send(t, http.MethodPost, "/credits", buyer.Minted.Key, `{"credits":20000}`, map[string]string{"PAYMENT-SIGNATURE": payment})
	if status != 200 || !strings.Contains(string(b), `"balance":1000`) || hdr.Get("PAYMENT-RESPONSE") == "" {
		t.Fatalf("paid: %d %s", status, b)
	}
	// The same payment for other terms is refused; resent as is, replayed.
	if status, _, _ := f.send(t, http.MethodPost, "/credits", buyer.Minted.Key, `{"credits":1000}`, map[string]string{"PAYMENT-SIGNATURE": payment}); status != 402 {
		t.Fatalf("payment for other terms: %d", status)
	}
	status, _, b = f.send(t, http.MethodPost, "/credits", buyer.Minted.Key, `{"credits":20000}`, map[string]string{"PAYMENT-SIGNATURE": payment})
	if status != 200 || !strings.Contains(string(b), `"replayed":true`) {
		t.Fatalf("resent: %d %s", status, b)
	}
	if _, transfers := fac.Counts(); transfers != 1 {
		t.Fatalf("transfers %d", transfers)
	}
	// The purchase resumed the paused monitoring, paying its first period
	// (the balance above is after that charge).
	_, _, b = f.send(t, http.MethodGet, "/monitoring/mine", buyer.Minted.Key, "", nil)
	if !strings.Contains(string(b), `"state":"active"`) {
		t.Fatalf("mine after the purchase: %s", b)
	}
	// GET /me shows the balance, the history (newest first) and the
	// monitoring; without a key, only the free numbers.
	status, _, b = f.send(t, http.MethodGet, "/me", buyer.Minted.Key, "", nil)
	var me struct {
		Monitoring []struct{ Domain, State string }
		Credits    struct {
			Balance int64
			History []struct {
				Kind  string
				Delta int64
			}
		}
	}
	if status != 200 || json.Unmarshal(b, &me) != nil || me.Credits.Balance != 1000 || len(me.Credits.History) != 2 ||
		me.Credits.History[0].Kind != "monitoring" || me.Credits.History[0].Delta != -19000 ||
		me.Credits.History[1].Kind != "purchase" || me.Credits.History[1].Delta != 20000 ||
		len(me.Monitoring) != 1 || me.Monitoring[0].State != "active" {
		t.Fatalf("GET /me: %d %s", status, b)
	}
	if _, _, b := f.send(t, http.MethodGet, "/me", "", "", nil); strings.Contains(string(b), `"credits"`) {
		t.Fatalf("anonymous GET /me shows credits: %s", b)
	}
}

// signedFor builds a PAYMENT-SIGNATURE for the terms (the fake facilitator
// checks no signature).
func signedFor(t *testing.T, pr x402pay.PaymentRequired) string {
	t.Helper()
	a := pr.Accepts[0]
	p := x402pay.PayloadV2{X402Version: 2, Resource: pr.Resource, Accepted: a, Payload: x402pay.ExactPayload{
		Signature: "0x" + strings.Repeat("ab", 65),
		Authorization: &x402pay.Authorization{From: x402paytest.Payer, To: a.PayTo, Value: a.Amount,
			ValidAfter: "0", ValidBefore: "4102444800", Nonce: "0x" + hex.EncodeToString(make([]byte, 31)) + "07"},
	}}
	b, _ := json.Marshal(p)
	return base64.StdEncoding.EncodeToString(b)
}

// TestX402Terms: GET /x402 describes the terms (available with a
// facilitator, saying why not without one), and its HTML page is readable.
func TestX402Terms(t *testing.T) {
	fac := x402paytest.New(t)
	f := newMonitoringServer(t, nil, registry.PaymentsConfig{FacilitatorURL: fac.URL, Network: x402paytest.Network, PayTo: x402paytest.PayTo})
	status, b := f.do(t, http.MethodGet, "/x402", "")
	var terms struct {
		Available        bool
		CreditsPerDollar int64
		Asset, PayTo     string
		Monitoring       struct{ TrialDays, CreditsPerPeriod, PeriodDays int }
	}
	if status != 200 || json.Unmarshal(b, &terms) != nil || !terms.Available || terms.Asset != x402paytest.Asset ||
		terms.CreditsPerDollar != 1000 || terms.Monitoring.TrialDays != 14 || terms.Monitoring.CreditsPerPeriod != 19000 {
		t.Fatalf("GET /x402: %d %s", status, b)
	}
	none := newMonitoringServer(t, nil, registry.PaymentsConfig{})
	_, b = none.do(t, http.MethodGet, "/x402", "")
	if !strings.Contains(string(b), `"available":false`) || !strings.Contains(string(b), "no facilitator") {
		t.Fatalf("without a facilitator: %s", b)
	}
	if status, _, _ := none.send(t, http.MethodPost, "/credits", none.start(t, "", `{"domain":"a.example"}`).Minted.Key, `{"credits":1000}`, nil); status != 501 {
		t.Fatalf("buying where nothing is sold: %d", status)
	}
	pagecheck.Check(t, f.svc.Handler(), "/x402")
}

// TestMonitoringWebhook: a change of the monitored domain reaches the
// webhook given at start, signed with the secret the start returned.
func TestMonitoringWebhook(t *testing.T) {
	type delivery struct {
		sig, event string
		body       []byte
	}
	got := make(chan delivery, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Get("Ardx-Signature"), r.Header.Get("Ardx-Event"), b}
	}))
	defer hook.Close()
	f := newTestServer(t, registry.Config{MonitorInterval: -1,
		WebhookFetcher: web.NewFetcher(web.FetchOptions{AllowPrivate: true, MaxRedirects: -1})}, nil)
	status, _, b := f.send(t, http.MethodPost, "/monitoring/start", "", `{"domain":"example.com","webhook":"`+hook.URL+`/hook"}`, nil)
	var started struct{ WebhookSecret string }
	if status != 200 || json.Unmarshal(b, &started) != nil || !strings.HasPrefix(started.WebhookSecret, "whsec_") {
		t.Fatalf("start: %d %s", status, b)
	}
	ctx := context.Background()
	if err := f.svc.RunMonitoring(ctx); err != nil { // starts the alert cursor at the feed's end
		t.Fatal(err)
	}
	if _, err := f.db.AppendChanges([]kv.Change{
		{Time: time.Now(), Kind: "endpoint.down", ID: "urn:air:example.com:mcp", Publisher: "example.com", Endpoint: "https://example.com/mcp"},
		{Time: time.Now(), Kind: "endpoint.down", ID: "urn:air:other.example:mcp", Publisher: "other.example"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RunMonitoring(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if d.event != "endpoint.down" || !strings.Contains(string(d.body), "urn:air:example.com:mcp") {
			t.Fatalf("delivery: %+v", d)
		}
		if err := access.VerifySignature(started.WebhookSecret, d.sig, d.body, time.Now(), time.Minute); err != nil {
			t.Fatalf("signature: %v", err)
		}
	default:
		t.Fatal("no delivery")
	}
	if len(got) != 0 {
		t.Fatalf("%d more deliveries (another domain's event?)", len(got))
	}
}

// TestReportsFullWindowFollowsMonitoring: with no FullReports override,
// a domain's reports past the free window are served to a key that
// monitors the domain, and clipped for anyone else (no key, or a key that
// monitors another domain).
func TestReportsFullWindowFollowsMonitoring(t *testing.T) {
	f := newMonitoringServer(t, nil, registry.PaymentsConfig{})
	mine := f.start(t, "", `{"domain":"example.com"}`).Minted.Key
	other := f.start(t, "", `{"domain":"other.example"}`).Minted.Key
	for _, tc := range []struct {
		name, key string
		full      bool
		days      int
	}{{"no key", "", false, 7}, {"monitoring key", mine, true, 30}, {"another domain's key", other, false, 7}} {
		status, _, b := f.send(t, http.MethodGet, "/demand?domain=example.com&days=30", tc.key, "", nil)
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.name, status, b)
		}
		var d struct {
			Access struct {
				Full       bool `json:"full"`
				ServedDays int  `json:"servedDays"`
			} `json:"access"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.Access.Full != tc.full || d.Access.ServedDays != tc.days {
			t.Errorf("%s: access %+v, want full %v and %d days", tc.name, d.Access, tc.full, tc.days)
		}
	}
}
