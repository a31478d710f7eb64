package pay_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/ardx-dev/ardx/registry/pay"
)

const v1Body = `{"x402Version":1,"error":"X-PAYMENT header is required","accepts":[{"scheme":"exact","network":"base-sepolia","maxAmountRequired":"10000","resource":"https://api.example.com/premium","description":"d","mimeType":"application/json","payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","maxTimeoutSeconds":60,"asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","extra":{"name":"USDC","version":"2"}}]}`

const v2Required = `{"x402Version":2,"error":"PAYMENT-SIGNATURE header is required","resource":{"url":"https://api.example.com/v2"},"accepts":[{"scheme":"exact","network":"eip155:8453","amount":"1000","asset":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913","payTo":"0xAbC0000000000000000000000000000000000001","maxTimeoutSeconds":60,"extra":{"name":"USD Coin","version":"2"}},{"scheme":"exact","network":"eip155:8453","amount":"5","asset":"0x0000000000000000000000000000000000000bad","payTo":"0xabc0000000000000000000000000000000000001","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}]}`

func TestParseRequired(t *testing.T) {
	r, err := pay.ParseRequired(http.StatusPaymentRequired, http.Header{}, []byte(v1Body))
	if err != nil {
		t.Fatal(err)
	}
	want := pay.Option{Protocol: "x402", Scheme: "exact", Network: "base-sepolia", Asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", Amount: "10000", Price: "0.01", PayTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}
	if r.X402Version != 1 || r.Resource != "https://api.example.com/premium" || len(r.Options) != 1 || r.Options[0] != want {
		t.Fatalf("v1: %+v", r)
	}

	h := http.Header{}
	h.Set("PAYMENT-REQUIRED", base64.StdEncoding.EncodeToString([]byte(v2Required)))
	r, err = pay.ParseRequired(http.StatusPaymentRequired, h, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.X402Version != 2 || r.Resource != "https://api.example.com/v2" || len(r.Options) != 2 {
		t.Fatalf("v2: %+v", r)
	}
	if o := r.Options[0]; o.Network != "base" || o.Price != "0.001" || o.Amount != "1000" {
		t.Errorf("v2 USDC option: %+v", o)
	}
	// A token named USDC at another address on a mainnet is not priced.
	if o := r.Options[1]; o.Price != "" {
		t.Errorf("unknown mainnet asset priced: %+v", o)
	}

	for _, c := range []struct {
		name   string
		status int
		h      http.Header
		body   string
	}{
		{"not 402", 200, http.Header{}, v1Body},
		{"body not JSON", 402, http.Header{}, "<html>pay me</html>"},
		{"no accepts", 402, http.Header{}, `{"x402Version":1}`},
		{"amount not an integer", 402, http.Header{}, `{"x402Version":1,"accepts":[{"network":"base","maxAmountRequired":"1.5"}]}`},
		{"amount a float", 402, http.Header{}, `{"x402Version":2,"accepts":[{"network":"base","amount":1e3}]}`},
		{"header not base64", 402, http.Header{"Payment-Required": {"%%%"}}, ``},
	} {
		if _, err := pay.ParseRequired(c.status, c.h, []byte(c.body)); !errors.Is(err, pay.ErrNoTerms) {
			t.Errorf("%s: err %v, want ErrNoTerms", c.name, err)
		}
	}
}

func TestFromMetadata(t *testing.T) {
	meta := map[string]json.RawMessage{
		"pay.protocol": json.RawMessage(`"x402"`), "pay.scheme": json.RawMessage(`"exact"`),
		"pay.network": json.RawMessage(`"eip155:84532"`), "pay.amount": json.RawMessage(`"2500"`),
		"pay.asset": json.RawMessage(`"0x036cbd53842c5426634e7929541ec2318f3dcf7e"`), "pay.payTo": json.RawMessage(`"0x1"`),
		"pay.2.protocol": json.RawMessage(`"mpp"`), "pay.2.network": json.RawMessage(`"tempo"`), "pay.2.price": json.RawMessage(`0.010`),
		"pay.3.protocol": json.RawMessage(`"card"`), "pay.3.network": json.RawMessage(`"stripe"`), "pay.3.price": json.RawMessage(`"$0.05"`),
		"pay.4.protocol": json.RawMessage(`"bitcoin"`), "pay.4.network": json.RawMessage(`"lightning"`), "pay.4.price": json.RawMessage(`"1"`),
		"pay.5.protocol": json.RawMessage(`"card"`), "pay.5.network": json.RawMessage(`"stripe"`), "pay.5.price": json.RawMessage(`"-1"`),
		"pay.6.protocol": json.RawMessage(`"mpp"`), "pay.6.network": json.RawMessage(`"tempo"`), "pay.6.price": json.RawMessage(`1e-3`),
		// Past a gap in the numbering nothing is read.
		"pay.8.protocol": json.RawMessage(`"mpp"`), "pay.8.network": json.RawMessage(`"tempo"`), "pay.8.price": json.RawMessage(`7`),
	}
	got := pay.FromMetadata(meta)
	want := []pay.Option{
		{Protocol: "x402", Scheme: "exact", Network: "base-sepolia", Asset: "0x036cbd53842c5426634e7929541ec2318f3dcf7e", Amount: "2500", Price: "0.0025", PayTo: "0x1"},
		{Protocol: "mpp", Network: "tempo", Price: "0.01"},
		{Protocol: "card", Network: "stripe", Price: "0.05"},
		{Protocol: "mpp", Network: "tempo", Price: "0.001"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("option %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	protocols, networks, prices := pay.Summary(got)
	if len(protocols) != 3 || len(networks) != 3 || len(prices) != 4 {
		t.Errorf("summary %v %v %v", protocols, networks, prices)
	}
}

func TestSatisfiedBy(t *testing.T) {
	seen := pay.Option{Protocol: "x402", Scheme: "exact", Network: "base", Asset: "0xAA", Amount: "1000", Price: "0.001", PayTo: "0xBB"}
	for _, c := range []struct {
		name  string
		claim pay.Option
		want  bool
	}{
		{"same", seen, true},
		{"addresses in another case", pay.Option{Protocol: "x402", Scheme: "exact", Network: "base", Asset: "0xaa", Amount: "1000", PayTo: "0xbb"}, true},
		{"price only", pay.Option{Protocol: "x402", Network: "base", Price: "0.001"}, true},
		{"another price", pay.Option{Protocol: "x402", Network: "base", Price: "0.0001"}, false},
		{"another amount", pay.Option{Protocol: "x402", Network: "base", Amount: "100"}, false},
		{"another payTo", pay.Option{Protocol: "x402", Network: "base", Amount: "1000", PayTo: "0xCC"}, false},
		{"another network", pay.Option{Protocol: "x402", Network: "solana", Amount: "1000"}, false},
	} {
		if got := c.claim.SatisfiedBy(seen); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	fp := seen.Fingerprint()
	back, ok := pay.OptionFromFingerprint(fp)
	if !ok || !seen.SatisfiedBy(back) {
		t.Errorf("fingerprint %q read back as %+v", fp, back)
	}
}

func TestDecimals(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0", "0"}, {"0.010", "0.01"}, {"1e-3", "0.001"}, {"$2", "2"}, {"10", "10"}, {"0.000000000000000000000000000001", "0.000000000000000000000000000001"}, {"12.5000", "12.5"},
	} {
		got, err := pay.ParseDecimal(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDecimal(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-0.1", "1/3", "0x10", "abc", "NaN", "Inf"} {
		if got, err := pay.ParseDecimal(bad); err == nil {
			t.Errorf("ParseDecimal(%q) = %q, want an error", bad, got)
		}
	}
	for _, c := range []struct {
		amount string
		dec    int
		want   string
	}{
		{"1000", 6, "0.001"}, {"1", 6, "0.000001"}, {"1000000", 6, "1"}, {"1234567", 6, "1.234567"}, {"0", 6, "0"}, {"5", 2, "0.05"},
	} {
		if got := pay.BaseUnitsToDecimal(c.amount, c.dec); got != c.want {
			t.Errorf("BaseUnitsToDecimal(%s, %d) = %q, want %q", c.amount, c.dec, got, c.want)
		}
	}
}

// FuzzParseRequired: any 402 body or header either gives terms with a
// network and an integer amount, or ErrNoTerms; never a panic.
func FuzzParseRequired(f *testing.F) {
	f.Add([]byte(v1Body), "")
	f.Add([]byte(`{}`), base64.StdEncoding.EncodeToString([]byte(v2Required)))
	f.Add([]byte(`{"accepts":[{"network":"x","amount":"00"}]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		h := http.Header{}
		if header != "" {
			h.Set("PAYMENT-REQUIRED", header)
		}
		r, err := pay.ParseRequired(402, h, body)
		if err != nil {
			if !errors.Is(err, pay.ErrNoTerms) {
				t.Fatalf("error %v does not wrap ErrNoTerms", err)
			}
			return
		}
		if len(r.Options) == 0 || len(r.Options) > pay.MaxOptions {
			t.Fatalf("%d options", len(r.Options))
		}
		for _, o := range r.Options {
			if o.Network == "" || o.Amount == "" || o.Protocol != "x402" {
				t.Fatalf("incomplete option %+v", o)
			}
		}
	})
}
