package access_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

func TestSignatureRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"kind":"endpoint.down"}`)
	sig := access.Sign("whsec_x", now, body)
	tests := []struct {
		name   string
		secret string
		header string
		body   []byte
		at     time.Time
		ok     bool
	}{
		{"valid", "whsec_x", sig, body, now.Add(time.Minute), true},
		{"wrong secret", "whsec_y", sig, body, now, false},
		{"changed body", "whsec_x", sig, []byte(`{"kind":"endpoint.up"}`), now, false},
		{"replayed late", "whsec_x", sig, body, now.Add(10 * time.Minute), false},
		{"malformed", "whsec_x", "v1=abc", body, now, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := access.VerifySignature(tc.secret, tc.header, tc.body, tc.at, 5*time.Minute)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestAlertsDeliver: an event of a monitored domain reaches its webhook
// signed, after failed attempts retried with backoff; the outbox is
// durable, events of other domains and of stopped monitorings send
// nothing, and an event already enqueued is never enqueued twice.
func TestAlertsDeliver(t *testing.T) {
	db := kvtest.Open(t)
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	var got [][]byte
	var sigs []string
	fail := 2
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if fail > 0 {
			fail--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		got = append(got, b)
		sigs = append(sigs, r.Header.Get(access.HeaderSignature))
	}))
	defer hook.Close()

	m := &access.Monitor{DB: db, Now: c.now}
	res, err := m.Start("acct", "example.com", false, hook.URL+"/in")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start("other", "quiet.example", false, hook.URL+"/in"); err != nil {
		t.Fatal(err)
	}
	a := &access.Alerts{DB: db, Now: c.now, Fetcher: web.NewFetcher(web.FetchOptions{AllowPrivate: true, MaxRedirects: -1})}
	// The first run starts at the feed's end: history is not alerted.
	if _, err := db.AppendChanges([]kv.Change{{Time: c.t, Kind: "entry.added", ID: "old", Publisher: "example.com"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Enqueue(); err != nil || n != 0 {
		t.Fatalf("first enqueue: %d %v", n, err)
	}
	if _, err := db.AppendChanges([]kv.Change{
		{Time: c.t, Kind: "endpoint.down", ID: "urn:x", Publisher: "example.com", Endpoint: "https://example.com/mcp"},
		{Time: c.t, Kind: "entry.added", ID: "urn:y", Publisher: "elsewhere.example"},
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Enqueue(); err != nil || n != 1 {
		t.Fatalf("enqueue: %d %v", n, err)
	}
	if n, _ := a.Enqueue(); n != 0 {
		t.Fatalf("the same events enqueued again: %d", n)
	}
	ctx := context.Background()
	for attempt := 1; attempt <= 2; attempt++ {
		if n, err := a.Deliver(ctx); err != nil || n != 0 {
			t.Fatalf("attempt %d: delivered %d %v", attempt, n, err)
		}
		items, _ := db.OutboxItems("example.com")
		if len(items) != 1 || items[0].Attempts != attempt || !items[0].NextAttempt.Equal(c.t.Add(access.Backoff(attempt))) {
			t.Fatalf("after attempt %d: %+v", attempt, items)
		}
		// Not due yet: nothing is sent.
		if n, _ := a.Deliver(ctx); n != 0 {
			t.Fatal("delivered before the backoff ended")
		}
		c.add(access.Backoff(attempt))
	}
	if n, err := a.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("third attempt: %d %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("deliveries: %d", len(got))
	}
	if err := access.VerifySignature(res.WebhookSecret, sigs[0], got[0], c.t, time.Minute); err != nil {
		t.Fatalf("signature: %v (%s)", err, sigs[0])
	}
	if items, _ := db.OutboxItems("example.com"); len(items) != 0 {
		t.Fatalf("a delivered item stayed: %+v", items)
	}
	if access.Backoff(1) != 30*time.Second || access.Backoff(2) != time.Minute || access.Backoff(40) != 6*time.Hour {
		t.Fatalf("backoff: %v %v %v", access.Backoff(1), access.Backoff(2), access.Backoff(40))
	}
}

// TestAlertsRefuseLoopback: the production fetcher refuses a webhook on a
// loopback address; the item is retried later, never sent there.
func TestAlertsRefuseLoopback(t *testing.T) {
	db := kvtest.Open(t)
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	hit := false
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer hook.Close()
	m := &access.Monitor{DB: db, Now: c.now}
	if _, err := m.Start("acct", "example.com", false, hook.URL); err != nil {
		t.Fatal(err)
	}
	a := &access.Alerts{DB: db, Now: c.now, Fetcher: web.NewFetcher(web.FetchOptions{})}
	a.Enqueue()
	db.AppendChanges([]kv.Change{{Time: c.t, Kind: "endpoint.down", ID: "urn:x", Publisher: "example.com"}})
	if n, err := a.Enqueue(); n != 1 || err != nil {
		t.Fatalf("enqueue %d %v", n, err)
	}
	a.Deliver(context.Background())
	items, _ := db.OutboxItems("example.com")
	if hit || len(items) != 1 || items[0].Attempts != 1 || items[0].LastError == "" {
		t.Fatalf("hit=%v items=%+v", hit, items)
	}
}
