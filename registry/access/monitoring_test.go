package access_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/registry/access"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func days(n int) time.Duration       { return time.Duration(n) * 24 * time.Hour }
func buy(t *testing.T, db *kv.DB, acct, ref string, n int64) {
	t.Helper()
	if _, _, err := db.ApplyCredit(acct, kv.CreditEntry{Delta: n, Kind: access.CreditPurchase, Ref: ref}); err != nil {
		t.Fatal(err)
	}
}

// TestMonitorLifecycle walks one domain through its trial, a pause without
// credits, a resume after a purchase, monthly charges, a stop and a restart
// within the paid period, on an injected clock.
func TestMonitorLifecycle(t *testing.T) {
	db := kvtest.Open(t)
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	m := &access.Monitor{DB: db, Now: c.now}

	res, err := m.Start("acct-a", "example.com", false, "")
	if err != nil || !res.Trial || res.Monitor.State != access.StateTrial {
		t.Fatalf("first start: %+v %v", res, err)
	}
	if want := c.t.Add(access.TrialLength); !res.Monitor.TrialEnd.Equal(want) || !res.Monitor.NextCharge.Equal(want) {
		t.Fatalf("trial end %v, next charge %v, want %v", res.Monitor.TrialEnd, res.Monitor.NextCharge, want)
	}
	if !m.Watching("acct-a", "example.com") {
		t.Fatal("not watching during the trial")
	}
	// A second start is idempotent: no second trial, no charge.
	if res, err := m.Start("acct-a", "example.com", false, ""); err != nil || res.Trial || res.Monitor.State != access.StateTrial {
		t.Fatalf("second start: %+v %v", res, err)
	}

	c.add(days(14))
	if charged, paused, err := m.Sweep(); err != nil || charged != 0 || paused != 1 {
		t.Fatalf("sweep after the trial with no credits: charged %d paused %d %v", charged, paused, err)
	}
	if m.Watching("acct-a", "example.com") {
		t.Fatal("a paused monitoring still lifts the feed window")
	}
	mine, _ := m.Mine("acct-a")
	if len(mine) != 1 || mine[0].State != access.StatePaused {
		t.Fatalf("paused, not deleted: %+v", mine)
	}

	c.add(days(3))
	buy(t, db, "acct-a", "pay-1", 40000)
	if err := m.ResumeAccount("acct-a"); err != nil {
		t.Fatal(err)
	}
	mine, _ = m.Mine("acct-a")
	if mine[0].State != access.StateActive || !mine[0].PaidUntil.Equal(c.t.Add(access.Period)) {
		t.Fatalf("resumed: %+v (now %v)", mine[0], c.t)
	}
	if bal, _ := db.CreditBalance("acct-a"); bal != 40000-access.PeriodCredits {
		t.Fatalf("balance after one period: %d", bal)
	}
	// A sweep inside the period charges nothing; repeated sweeps after it
	// charge once.
	if charged, _, _ := m.Sweep(); charged != 0 {
		t.Fatalf("charged inside a paid period: %d", charged)
	}
	c.add(access.Period)
	for range 3 {
		if _, _, err := m.Sweep(); err != nil {
			t.Fatal(err)
		}
	}
	if bal, _ := db.CreditBalance("acct-a"); bal != 40000-2*access.PeriodCredits {
		t.Fatalf("balance after two periods: %d", bal)
	}

	// Stop keeps the paid period: a restart within it charges nothing.
	if v, err := m.Stop("acct-a", "example.com"); err != nil || v.State != access.StateStopped || v.NextCharge != nil {
		t.Fatalf("stop: %+v %v", v, err)
	}
	if m.Watching("acct-a", "example.com") {
		t.Fatal("watching after stop")
	}
	c.add(days(10))
	if _, _, err := m.Sweep(); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Start("acct-a", "example.com", false, ""); err != nil || res.Monitor.State != access.StateActive {
		t.Fatalf("restart within the period: %+v %v", res, err)
	}
	if bal, _ := db.CreditBalance("acct-a"); bal != 40000-2*access.PeriodCredits {
		t.Fatalf("a restart within the paid period charged: %d", bal)
	}
	if _, err := m.Stop("acct-a", "other.example"); !errors.Is(err, access.ErrNotMonitored) {
		t.Fatalf("stop of an unmonitored domain: %v", err)
	}
}

// TestMonitorTrialOncePerDomain: another account gets no trial for a
// domain whose trial was used, and starts paid (or paused without
// credits); the domain's verified owner always gets one.
func TestMonitorTrialOncePerDomain(t *testing.T) {
	tests := []struct {
		name      string
		verified  bool
		credits   int64
		wantTrial bool
		wantState string
	}{
		{"another account without credits", false, 0, false, access.StatePaused},
		{"another account with credits", false, 20000, false, access.StateActive},
		{"the verified owner", true, 0, true, access.StateTrial},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := kvtest.Open(t)
			c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
			m := &access.Monitor{DB: db, Now: c.now}
			if res, err := m.Start("first", "example.com", false, ""); err != nil || !res.Trial {
				t.Fatalf("first trial: %+v %v", res, err)
			}
			if tc.credits > 0 {
				buy(t, db, "second", "p", tc.credits)
			}
			res, err := m.Start("second", "example.com", tc.verified, "")
			if err != nil || res.Trial != tc.wantTrial || res.Monitor.State != tc.wantState {
				t.Fatalf("second account: %+v %v", res, err)
			}
			if !tc.wantTrial && res.TrialReason == "" {
				t.Fatal("a refused trial says nothing of why")
			}
			// The verified owner's trial is once too.
			if tc.verified {
				m.Stop("second", "example.com")
				if res, _ := m.Start("second", "example.com", true, ""); res.Trial {
					t.Fatal("a verified owner got a second trial")
				}
			}
		})
	}
}

// TestMonitorWebhookValidation: only absolute http(s) URLs are kept, and a
// new webhook returns a new secret once.
func TestMonitorWebhookValidation(t *testing.T) {
	db := kvtest.Open(t)
	m := &access.Monitor{DB: db}
	for _, bad := range []string{"ftp://x.example/h", "/relative", "https://user:pw@x.example/", "https://", "https://x.example/a b"} {
		if _, err := m.Start("a", "example.com", false, bad); !errors.Is(err, access.ErrBadWebhook) {
			t.Errorf("webhook %q: %v", bad, err)
		}
	}
	res, err := m.Start("a", "example.com", false, "https://hooks.example/in")
	if err != nil || len(res.WebhookSecret) < 40 {
		t.Fatalf("start with a webhook: %+v %v", res, err)
	}
	again, _ := m.Start("a", "example.com", false, "https://hooks.example/in")
	if again.WebhookSecret != "" {
		t.Fatal("the same webhook showed its secret twice")
	}
	moved, _ := m.Start("a", "example.com", false, "https://hooks.example/new")
	if moved.WebhookSecret == "" || moved.WebhookSecret == res.WebhookSecret {
		t.Fatal("a new webhook URL kept the old secret")
	}
}
