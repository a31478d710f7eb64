package access

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Webhook headers. The signature is HMAC-SHA256 over "<t>.<body>" with the
// monitoring's secret, written "t=<unix seconds>,v1=<hex>": the receiver
// recomputes it and refuses a t too far from its clock (replays).
const (
	HeaderSignature = "Ardx-Signature"
	HeaderDelivery  = "Ardx-Delivery"
	HeaderEvent     = "Ardx-Event"
)

// Delivery limits: attempts at 30 s, 1, 2, 4 … minutes apart, capped at
// 6 hours; after MaxAttempts the item is kept, marked dead.
const (
	MaxAttempts  = 12
	firstBackoff = 30 * time.Second
	maxBackoff   = 6 * time.Hour
	// alertsCursor is the counter holding the last feed sequence number
	// turned into alerts, plus one (0: never started).
	alertsCursor = "monitoring.alerts_cursor"
)

// Sign returns the Ardx-Signature value of body at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature checks an Ardx-Signature value against body, accepting a
// timestamp at most tolerance from now: what a receiver does.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	t := time.Unix(sec, 0)
	if d := now.Sub(t); d > tolerance || d < -tolerance {
		return errors.New("signature timestamp outside the tolerance")
	}
	want := Sign(secret, t, body)
	if !hmac.Equal([]byte(want), []byte("t="+ts+",v1="+sig)) {
		return errors.New("signature mismatch")
	}
	return nil
}

// Alert is the body of a webhook delivery: one change-feed event of a
// monitored domain.
type Alert struct {
	ID         string          `json:"id"`
	Domain     string          `json:"domain"`
	Kind       string          `json:"kind"`
	Time       time.Time       `json:"time"`
	Identifier string          `json:"identifier"`
	Endpoint   string          `json:"endpoint,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// Alerts turns the change feed of monitored domains into webhook
// deliveries: a durable outbox filled from the feed (Enqueue) and emptied
// by signed POSTs through the SSRF-safe fetcher (Deliver), retried with
// backoff.
type Alerts struct {
	DB *kv.DB
	// Fetcher posts the webhooks; it refuses private and loopback
	// addresses unless built to allow them (tests).
	Fetcher *web.Fetcher
	Now     func() time.Time
	Logger  *slog.Logger
}

func (a *Alerts) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// Enqueue reads the feed after the last event handled and puts an alert
// in the outbox for each event of a domain live-monitored with a webhook.
// The outbox items and the new cursor commit together. The first run
// starts at the feed's end: alerts are for what happens from now on.
func (a *Alerts) Enqueue() (int, error) {
	cur, err := a.DB.Counter(alertsCursor)
	if err != nil {
		return 0, err
	}
	if cur == 0 {
		last, err := a.DB.LastChangeSeq()
		if err != nil {
			return 0, err
		}
		return 0, a.DB.EnqueueOutbox(nil, alertsCursor, int64(last)+1)
	}
	changes, err := a.DB.Changes(uint64(cur-1), 1000)
	if err != nil || len(changes) == 0 {
		return 0, err
	}
	now := a.now()
	watchers := map[string][]kv.Monitor{}
	if err := a.DB.Monitors(func(r kv.Monitor) error {
		if r.WebhookURL != "" && live(r, now) {
			watchers[r.Domain] = append(watchers[r.Domain], r)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	var items []kv.OutboxItem
	for _, c := range changes {
		for _, r := range watchers[c.Publisher] {
			key := fmt.Sprintf("%d:%s:%s", c.Seq, r.Account, r.Domain)
			body, err := json.Marshal(Alert{ID: key, Domain: r.Domain, Kind: c.Kind, Time: c.Time,
				Identifier: c.ID, Endpoint: c.Endpoint, Detail: c.Detail})
			if err != nil {
				return 0, err
			}
			items = append(items, kv.OutboxItem{Key: key, Account: r.Account, Domain: r.Domain,
				URL: r.WebhookURL, Body: body, CreatedAt: now, NextAttempt: now})
		}
	}
	last := changes[len(changes)-1].Seq
	return len(items), a.DB.EnqueueOutbox(items, alertsCursor, int64(last)+1)
}

// Deliver posts every due outbox item once and records the outcome: a 2xx
// removes it, anything else schedules the next attempt (or gives up after
// MaxAttempts, keeping it marked dead). It returns how many were delivered.
func (a *Alerts) Deliver(ctx context.Context) (int, error) {
	due, err := a.DB.DueOutbox(a.now(), 64)
	if err != nil {
		return 0, err
	}
	delivered := 0
	for _, it := range due {
		if ctx.Err() != nil {
			return delivered, ctx.Err()
		}
		ok, err := a.deliverOne(ctx, it)
		if err != nil {
			return delivered, err
		}
		if ok {
			delivered++
		}
	}
	return delivered, nil
}

func (a *Alerts) deliverOne(ctx context.Context, it kv.OutboxItem) (bool, error) {
	r, err := a.DB.GetMonitor(it.Account, it.Domain)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return false, err
	}
	if err != nil || r.State == StateStopped || r.WebhookURL != it.URL {
		// The subscription ended or moved: the alert has nowhere to go.
		it.Dead, it.LastError = true, "monitoring stopped or webhook changed before delivery"
		return false, a.DB.UpdateOutbox(it, false)
	}
	now := a.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, it.URL, bytes.NewReader(it.Body))
	if err != nil {
		it.Dead, it.LastError = true, err.Error()
		return false, a.DB.UpdateOutbox(it, false)
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(it.Body, &kind)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderSignature, Sign(r.WebhookSecret, now, it.Body))
	req.Header.Set(HeaderDelivery, it.Key)
	req.Header.Set(HeaderEvent, kind.Kind)
	res, err := a.Fetcher.Do(req)
	it.Attempts++
	switch {
	case err == nil && res.Status >= 200 && res.Status < 300:
		return true, a.DB.UpdateOutbox(it, true)
	case err != nil:
		it.LastError = err.Error()
	default:
		it.LastError = "HTTP " + strconv.Itoa(res.Status)
	}
	if it.Attempts >= MaxAttempts {
		it.Dead = true
	} else {
		it.NextAttempt = now.Add(Backoff(it.Attempts))
	}
	if a.Logger != nil {
		a.Logger.Info("webhook delivery failed", "domain", it.Domain, "attempt", it.Attempts, "dead", it.Dead, "error", it.LastError)
	}
	return false, a.DB.UpdateOutbox(it, false)
}

// Backoff is the wait after the nth failed attempt (n ≥ 1).
func Backoff(n int) time.Duration {
	d := firstBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}
