package facilitator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

func TestValidRouteTemplate(t *testing.T) {
	tests := []struct {
		template string
		want     bool
	}{
		{"/weather/:city", true},
		{"/a/b.json", true},
		{"/users/%3Aid", true},
		{"", false},
		{"weather", false},
		{"/a/../b", false},
		{"/a/%2e%2e/b", false},
		{"/x/http:%2F%2Fevil", false},
		{"/a b", false},
		{"/a?b", false},
	}
	for _, tc := range tests {
		if got := validRouteTemplate(tc.template); got != tc.want {
			t.Errorf("validRouteTemplate(%q) = %v, want %v", tc.template, got, tc.want)
		}
	}
}

func TestARDPublisher(t *testing.T) {
	tests := map[string]string{
		"https://pay.example.com":      "pay.example.com",
		"https://PAY.Example.com:8443": "pay.example.com",
		"http://127.0.0.1:4020":        "127.0.0.1",
		"http://localhost:4020":        "ardx.localhost",
		"http://[::1]:4020":            "ardx.localhost",
		"http://myhost":                "myhost.localhost",
		"::not a url":                  "ardx.localhost",
	}
	for in, want := range tests {
		if got := ardPublisher(in); got != want {
			t.Errorf("ardPublisher(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormaliseV1Info(t *testing.T) {
	got, err := normaliseV1Info(json.RawMessage(`{"input":{"type":"http","method":"post","body_fields":{"q":"string"},"query":{"n":1}},"output":{"type":"json"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Input  map[string]json.RawMessage `json:"input"`
		Output json.RawMessage            `json:"output"`
	}
	if err := json.Unmarshal(got, &info); err != nil {
		t.Fatal(err)
	}
	if string(info.Input["method"]) != `"POST"` || string(info.Input["bodyType"]) != `"json"` ||
		string(info.Input["body"]) != `{"q":"string"}` || string(info.Input["queryParams"]) != `{"n":1}` || len(info.Output) == 0 {
		t.Errorf("normalised %s", got)
	}
	if _, err := normaliseV1Info(json.RawMessage(`{"output":{}}`)); err == nil {
		t.Error("an outputSchema without input was accepted")
	}
}

// FuzzExtractDiscovery feeds arbitrary /settle bodies to the catalogue's
// extractor: it must never panic, and what it accepts must have a key, a
// type and an absolute resource.
func FuzzExtractDiscovery(f *testing.F) {
	f.Add([]byte(`{"x402Version":2,"paymentPayload":{"resource":{"url":"https://a.test/x"},"accepted":{},"extensions":{"bazaar":{"info":{"input":{"type":"http","method":"GET"}},"schema":{"type":"object"}}}},"paymentRequirements":{"scheme":"exact","network":"eip155:1","amount":"1","asset":"0x","payTo":"0x","maxTimeoutSeconds":1}}`))
	f.Add([]byte(`{"x402Version":2,"paymentPayload":{"resource":{"url":"https://a.test/mcp"},"extensions":{"bazaar":{"info":{"input":{"type":"mcp","toolName":"t"}},"routeTemplate":"/m/:id"}}},"paymentRequirements":{}}`))
	f.Add([]byte(`{"x402Version":1,"paymentPayload":{},"paymentRequirements":{"resource":"http://b.test/y","outputSchema":{"input":{"method":"post","body":{}}}}}`))
	f.Add([]byte(`{"x402Version":2,"paymentPayload":{"extensions":{"bazaar":{"info":{},"schema":{"$ref":"https://evil.test/s.json"}}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := extractDiscovery(body)
		if err != nil {
			if !errors.Is(err, ErrNotDiscoverable) {
				t.Fatalf("error %v does not wrap ErrNotDiscoverable", err)
			}
			return
		}
		if e.Key == "" || (e.Type != "http" && e.Type != "mcp") || e.Resource == "" || !json.Valid(e.Accepts) {
			t.Fatalf("accepted entry %+v", e)
		}
	})
}

// levels records the level of every log record.
type levels struct {
	mu  sync.Mutex
	got []slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r.Level)
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// TestSettleWithoutBazaarIsNoWarning: a settled payment that declares no
// bazaar extension is the common case; it is logged at debug, never warned.
func TestSettleWithoutBazaarIsNoWarning(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := &levels{}
	c, err := NewCatalogue(db, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.bodyOf = func(*x402.PaymentRequest) ([]byte, error) {
		return []byte(`{"x402Version":2,"paymentPayload":{"x402Version":2,"resource":{"url":"https://shop.test/a"},"accepted":{},"payload":{}},"paymentRequirements":{}}`), nil
	}
	c.recordSettled(&x402.PaymentRequest{})
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.got) != 1 || log.got[0] != slog.LevelDebug {
		t.Fatalf("log levels %v, want one debug record", log.got)
	}
}
